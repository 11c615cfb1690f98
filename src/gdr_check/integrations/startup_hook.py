"""The opt-in start-up hook (`gdr-check hook install`): the `.pth` file it writes imports this module in a
Python process of the environment when GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set, and never otherwise (the
file's one line tests the variables before importing anything of gdr-check).

It registers both engine plugins as their entry points would (`vllm_plugin.register`, `sglang_plugin.register`):
for an engine release that has no plugin loader, or a process its loader does not reach. Each plugin then waits
for its engine's worker module to be imported; a release whose worker class lacks the hooked method is said once
on the engine's logger, and nothing is changed. Loading the plugins twice (the hook and an engine's own loader)
hooks each method once.
"""

from __future__ import annotations

from . import sglang_plugin, vllm_plugin

vllm_plugin.register()
sglang_plugin.register()
