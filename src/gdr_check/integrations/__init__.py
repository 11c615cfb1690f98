"""Engine plugins: the runtime guard or capture switched on in a served sglang or vLLM engine by environment
variables, with no edit to the engine (docs/production-guard.md).

The plugin modules (`vllm_plugin`, `sglang_plugin`) and what they import at load time (`settings`,
`post_import`) use the standard library only: the engines load every installed plugin in each of their
processes, so with no variable set a plugin reads the environment and returns. `served` enters the guard or the
capture in an engine worker; it is imported only there, and only when a variable asks for it.
"""
