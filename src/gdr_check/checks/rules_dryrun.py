"""GDR3xx: what `gdr-check dry-run` finds when it runs the kernel on synthetic tensors of the deployment's shapes.

The dry-run child process returns numbers (errors, counts, the first offending row or slot); the parent turns
them into these diagnostics (`gdr_check.pipeline.dryrun.diagnose`). Values are formatted before they reach the message
templates, so `explain` can match a pasted message.

Numbering, stable once released:
    GDR301-GDR306  verification against the float64 reference and the engine's kernel
    GDR311-GDR313  the child process, kernel launches and engine backends
    GDR314         nothing to run: no GDN/KDA layer, or a decode step that is not a packed kernel
    GDR321-GDR322  interpreter-mode limits (CPU runs)
"""

from __future__ import annotations

from typing import Any

from ..base.registry import Violation, declare
from .examples import DryRunExample, RefusedDryRunExample, kimi_linear_config

DRYRUN = "dryrun"
_TOLERANCES = (
    "Tolerances, relative to the largest reference value of the compared tensor: `out` 1e-4 (float32), 2e-3 "
    "(float16), 1e-2 (bfloat16); touched state 1e-5 (float32), 2e-3 (float16), 1e-2 (bfloat16). Each step is "
    "checked against a float64 reference computed from that step's inputs and pre-step state, so errors do "
    "not accumulate across steps."
)

# -- GDR301-GDR306: verification ---------------------------------------------------------------------------------

def _verified(check: dict[str, Any]) -> dict[str, Any]:
    """A result of the builtin kernel whose step 0 fails `check`."""
    return {"kernels": {"builtin": {}}, "steps": [{"step": 1, "kernels": {"builtin": check}}],
            "geometry": {"call": {"out": {"dtype": "bfloat16"}, "initial_state": {"dtype": "float32"}}}}


class OutputMismatch(Violation):
    rule = declare(
        "GDR301", "output-mismatches", scope=DRYRUN,
        summary="`out` differs from the float64 reference",
        message="`out` of the {kernel} kernel differs from the float64 reference at step {step}: max error {error} "
                "of the largest reference value (tolerance {tolerance}, {dtype} output), worst at row {row}, value "
                "head {head}",
        explanation=(
            "Each dry-run step computes the decode step in float64 (docs/kernel-contract.md §6: decay, delta rule, "
            "rank-1 write, output read from the updated state) from the same inputs and pre-step state, and compares "
            "the kernel's `out` for every live row. " + _TOLERANCES + "\n\n"
            "An error of about 1e-3 with bfloat16 gates usually means different beta semantics (sglang 0.5.23 "
            "rounds sigmoid(b) to `b`'s dtype in the GDN kernel; vLLM since PR #53877 keeps it in float32). An "
            "error near 1 means the kernel reads the wrong memory: a q/k/v layout, head grouping or pool layout "
            "that differs from the one the kernel assumes."
        ),
        causes=(
            "a kernel with other beta semantics than the engine profile (`--engine`)",
            "a state pool whose inner [HV, V, K] block is not dense (docs/kernel-contract.md U1)",
            "a miscompiled or mis-tiled kernel variant for these shapes",
        ),
        fixes=(
            "run with `--engine` matching the engine whose kernel you deploy",
            "re-run with `--steps 1 --output-format json` and compare `steps[0]` per kernel",
        ),
        example=DryRunExample(_verified({"output": {"passed": False, "error": 0.5, "tolerance": 0.01, "row": 2,
                                                    "head": 1}})),
    )

    kernel: object
    step: object
    error: object
    tolerance: object
    dtype: object
    row: object
    head: object


class StateMismatch(Violation):
    rule = declare(
        "GDR302", "state-mismatches", scope=DRYRUN,
        summary="the in-place state of touched slots differs from the float64 reference",
        message="the state of touched slots after the {kernel} kernel differs from the float64 reference at step "
                "{step}: max error {error} of the largest reference value (tolerance {tolerance}, {dtype} state), "
                "worst at slot {slot}, value head {head}",
        explanation=(
            "The kernel updates `initial_state[idx[n]]` in place for every live row n. The dry-run compares each "
            "touched slot with the float64 reference. " + _TOLERANCES + "\n\n"
            "A float32 state should match to about 1e-7 (docs/kernel-contract.md §6.3). Errors of about 1e-3 "
            "point to different beta semantics; errors near 1 to a transposed ([HV, K, V]) or otherwise "
            "mis-addressed state."
        ),
        causes=(
            "a kernel with other beta semantics than the engine profile",
            "a pool laid out as [HV, K, V] or permuted (docs/kernel-contract.md §7.1)",
            "two live rows naming the same slot (a write race, U5); the dry-run never does this itself",
        ),
        fixes=(
            "run with `--engine` matching the engine whose kernel you deploy",
            "check the pool layout the engine allocates against `gdr-check PATH` (GDR2xx)",
        ),
        example=DryRunExample(_verified({"state": {"passed": False, "error": 0.3, "tolerance": 0.001, "slot": 5,
                                                   "head": 0}})),
    )

    kernel: object
    step: object
    error: object
    tolerance: object
    dtype: object
    slot: object
    head: object


class UntouchedModified(Violation):
    rule = declare(
        "GDR303", "untouched-state-writes", scope=DRYRUN,
        summary="the kernel wrote state outside the slots of live rows",
        message="the {kernel} kernel changed {count} element(s) of the state pool outside the slots of live rows at "
                "step {step}, first at {where}",
        explanation=(
            "Only the slots named by live rows may change. The dry-run snapshots the whole pool allocation (for "
            "sglang the stacked [layers, slots, HV, V, K] pool, so neighbouring layers are covered) before each "
            "step and compares it bitwise afterwards, excluding those slots. Any other change is memory the kernel "
            "must not touch: another request's state, the reserved slot 0, or another layer. On a GPU this is how "
            "an out-of-range slot index silently corrupts neighbouring memory (docs/kernel-contract.md U3)."
        ),
        causes=(
            "a skipped row (index -1, or 0 on vLLM) whose state is still written",
            "a slot pitch (`initial_state.stride(0)`) that differs from the one the kernel was compiled for",
            "state tiles addressed past the [HV, V, K] block of a slot",
        ),
        fixes=("report the kernel and the `--output-format json` document; do not deploy this kernel variant",),
        example=DryRunExample(_verified({"untouched": {"passed": False, "modified_elements": 64,
                                                       "first": "slot 7, head 0"}})),
    )

    kernel: object
    count: object
    step: object
    where: object


class SkippedNotZero(Violation):
    rule = declare(
        "GDR304", "nonzero-skipped-rows", scope=DRYRUN,
        summary="a skipped row's output is not zero",
        message="the {kernel} kernel left {count} nonzero element(s) in `out` rows it must skip at step {step} "
                "(rows {rows})",
        explanation=(
            "Rows whose slot index is negative (sglang and vLLM) or 0 (vLLM's null block) are skipped: the kernel "
            "writes zeros to their `out` row and leaves the state alone (docs/kernel-contract.md U4, §8). The "
            "dry-run fills `out` with NaN before every step, so a skipped row must come back as exact zeros."
        ),
        causes=(
            "a kernel with sglang's skip rule (index < 0) run with vLLM's padding (index 0)",
            "a skipped row computed from some slot instead of being zeroed",
        ),
        fixes=("run with `--engine` matching the engine whose kernel you deploy",),
        example=DryRunExample(_verified({"skipped_rows": {"passed": False, "nonzero_elements": 32, "rows": [3]}})),
    )

    kernel: object
    count: object
    step: object
    rows: object


class UnwrittenOutput(Violation):
    rule = declare(
        "GDR305", "unwritten-outputs", scope=DRYRUN,
        summary="part of `out` was never written",
        message="the {kernel} kernel left {count} element(s) of `out` unwritten (the NaN poison is still there) at "
                "step {step}, rows {rows}",
        explanation=(
            "The dry-run fills `out` with NaN before each step. Every element must be written: the result for a "
            "live row, zeros for a skipped row. NaN left behind means some (row, value head, value tile) program "
            "never ran or stored under a wrong mask, e.g. a grid too small for the value dimension V."
        ),
        causes=("a launch grid that misses some value tiles or heads", "a store mask that drops the last tile"),
        fixes=("report the kernel and the `--output-format json` document; do not deploy this kernel variant",),
        example=DryRunExample(_verified({"written": {"passed": False, "nan_elements": 32, "rows": [1]}})),
    )

    kernel: object
    count: object
    step: object
    rows: object


class BackendDisagreement(Violation):
    rule = declare(
        "GDR306", "backend-disagreements", scope=DRYRUN,
        summary="gdr-check's kernel and the engine's kernel disagree",
        message="gdr-check's kernel and {engine}'s kernel disagree on `{tensor}` at step {step}: max difference "
                "{difference} of the largest reference value (tolerance {tolerance})",
        explanation=(
            "With `--backend sglang` or `--backend vllm` the dry-run runs the installed engine's kernel and, on "
            "copies of the same inputs and pre-step state, gdr-check's own kernel with the same engine profile, "
            "then compares the two directly (tolerance: twice the reference tolerance). When both match the float64 "
            "reference they agree; a disagreement with only one of them failing GDR301/GDR302 says which one is "
            "off. A state difference of about 1e-3 is the signature of different beta semantics (rounded vs "
            "float32 sigmoid(b), docs/kernel-contract.md §6.3)."
        ),
        causes=(
            "an engine build with other beta semantics (sglang before or after PR #38977, vLLM before PR #53877)",
            "an engine kernel that treats slot 0 differently from the `--engine` profile",
        ),
        fixes=("check which of the two also fails GDR301/GDR302, and which engine version is installed",),
        example=DryRunExample({"kernels": {}, "steps": [{"step": 1, "agreement": {
            "out": {"passed": False, "difference": 0.2, "tolerance": 0.01}}}]}, backend="sglang"),
    )

    engine: object
    tensor: object
    step: object
    difference: object
    tolerance: object


# -- GDR311-GDR314: the child process, launches, backends, nothing to run --------------------------------------
class ChildCrashed(Violation):
    rule = declare(
        "GDR311", "crashed-dry-runs", scope=DRYRUN,
        summary="the dry-run child process crashed",
        message="the dry-run child process {how}; last stderr line: {last_line}",
        explanation=(
            "The kernel runs in a separate Python process, so a device fault cannot take down the caller: after "
            "`CUDA error: an illegal memory access was encountered` every later CUDA call in that process fails "
            "(docs/kernel-contract.md U3). The child died before it could report a result. Its last stderr line is "
            "quoted; run the same command with GDR_CHECK_DEBUG=1 to see its whole stderr."
        ),
        causes=(
            "a device fault (illegal memory access, an unrecoverable launch error)",
            "the process ran out of host or device memory and was killed",
            "the run took longer than `--timeout` (the interpreter is slow at large sizes)",
        ),
        fixes=(
            "re-run with GDR_CHECK_DEBUG=1 to see the child's full stderr",
            "try a smaller `--batch` or `--slots`; on CPU keep the interpreter's reduced sizes",
        ),
        example=DryRunExample(None, returncode=-11, stderr="Fatal Python error: Segmentation fault"),
    )

    how: object
    last_line: object


class KernelRaised(Violation):
    rule = declare(
        "GDR312", "kernel-launch-errors", scope=DRYRUN,
        summary="the kernel call raised an exception",
        message="the {kernel} kernel raised {exception} at step {step}: {error}",
        explanation=(
            "The call raised instead of running: a contract check refused it (gdr-check's wrappers raise "
            "ValueError with the reference wrapper's message), Triton could not compile or launch the variant, or "
            "the device reported an error. After a CUDA error the child stops: its CUDA context may be unusable "
            "(docs/kernel-contract.md U3, U7)."
        ),
        causes=(
            "a launch over a grid limit (`RuntimeError: Triton Error [CUDA]: invalid argument`, U7)",
            "out of device memory for the pool at this `--slots`",
            "a compile error for an unusual head size",
        ),
        fixes=("run `gdr-check PATH` with the same deployment options: a GDR2xx error usually names the cause",),
        example=DryRunExample({"kernels": {"builtin": {}}, "steps": [{"step": 1, "kernels": {"builtin": {"raised": {
            "exception": "RuntimeError", "message": "CUDA error: an illegal memory access was encountered"}}}}]}),
    )

    kernel: object
    exception: object
    step: object
    error: object


class BackendUnavailable(Violation):
    rule = declare(
        "GDR313", "unavailable-backends", scope=DRYRUN,
        summary="the requested engine is installed but cannot run this packed-decode call",
        message="backend `{backend}` is not available: {reason}",
        explanation=(
            "`--backend sglang` loads sglang's own `fused_recurrent.py` (from GDR_CHECK_SGLANG_PATH: a wheel, an "
            "unpacked tree or the file itself; else from the installed sglang) without importing the sglang "
            "server. `--backend vllm` imports vLLM's FLA `fused_recurrent` module, which has a GDN packed decode "
            "only (vLLM's KDA packed op has another API). This rule is an engine that is here but cannot run the "
            "call; nothing ran. An engine that is not here at all (vLLM not importable; sglang not installed and "
            "GDR_CHECK_SGLANG_PATH not set, or set to a path without the file) is no finding but an unusable "
            "environment, as a missing torch is: one `error:` line naming what is missing and how to get it, "
            "exit 2."
        ),
        causes=("an installed sglang without `sglang/kernels/ops/attention/fla/fused_recurrent.py`",
                "a vLLM build without the packed decode op, or whose FLA module fails to import"),
        fixes=(
            "install an engine release that has the packed decode, or set GDR_CHECK_SGLANG_PATH to an sglang "
            "0.5.23 wheel or source tree",
            "use `--backend builtin` to verify gdr-check's kernel alone",
        ),
        example=DryRunExample({"backend_unavailable": {
            "backend": "vllm",
            "reason": "vLLM's FLA module has no fused_recurrent_gated_delta_rule_packed_decode (or does not import)"}},
            backend="vllm"),
    )

    backend: object
    reason: object


class NothingToDryRun(Violation):
    rule = declare(
        "GDR314", "nothing-to-dry-run", scope=DRYRUN,
        summary="the deployment has no packed-decode call for the dry-run to run",
        message="nothing to dry-run: {why}",
        explanation=(
            "The dry-run runs the packed decode call the deployment's engine makes for one linear-attention layer "
            "(`fused_recurrent_gated_delta_rule_packed_decode` or `fused_recurrent_kda_packed_decode`). Some "
            "deployments make none: the model has no GDN or KDA layers (GDR101 for `gdr-check TARGET`, where it is "
            "a note), or the engine's decode step calls another kernel (GDR134): vLLM decodes KDA layers with "
            "`fused_recurrent_kda`, Jet-Nemotron's JetBlock calls its own kernel, and sglang takes the packed "
            "kernel for a KDA layer with a safe-gate lower bound only with a decode backend that supports the "
            "safe gate. Then nothing runs and nothing is verified, so a CI gate on the dry-run must not pass: this "
            "is an error, and the exit 1 comes with a diagnostic in every output format (`--ranks all` too). The "
            "notes say why the engine takes that path; `refused_because` in the JSON document is `[\"GDR314\"]`. "
            "A deployment with errors is refused for those errors instead, and `refused_because` lists their "
            "codes.\n\n"
            "The dry-run models the engine's default decode kernels, so a switch the fixes name (sglang's safe-gate "
            "decode backend) changes the deployment's path, not the dry-run's. The deployment facts alone decide "
            "this, before the environment is looked at: with `--backend vllm` and no vLLM installed, this is still "
            "GDR314 (exit 1), not the missing-engine line (exit 2), since installing vLLM would only lead here."
        ),
        causes=(
            "a KDA model (Kimi-Linear and its kin) dry-run under vLLM (`--engine vllm` or `--backend vllm`)",
            "Jet-Nemotron, or a KDA layer with a safe-gate lower bound under sglang's default decode backend",
            "a checkpoint without GDN or KDA layers (a plain transformer, a lightning-attention hybrid)",
        ),
        fixes=(
            "dry-run under an engine whose decode step calls the packed kernel, when the fix names one",
            "check the rest of the deployment with `gdr-check TARGET`: its TP, pool and shape rules do not need "
            "the packed call",
        ),
        engines="sglang 0.5.23 and vLLM.",
        example=RefusedDryRunExample(kimi_linear_config(), "a KDA model under vLLM", deployment={"engine": "vllm"}),
    )

    why: object


# -- GDR321-GDR322: interpreter mode ---------------------------------------------------------------------------------
class Bf16NotVerifiable(Violation):
    rule = declare(
        "GDR321", "bf16-not-verifiable", severity="warning", scope=DRYRUN,
        summary="bfloat16 tensors ran as float16 under the interpreter",
        message="bfloat16 {arguments} ran as float16: bf16 is not verifiable in interpreter mode",
        explanation=(
            "Without a GPU the kernel runs under the Triton interpreter (TRITON_INTERPRET=1), which returns NaN "
            "for bfloat16 without raising (triton-lang/triton #4972, #5424). The dry-run therefore runs bfloat16 "
            "tensors as float16, with the same shapes and strides. Shapes, layouts, indexing and the float32 math "
            "are verified; bfloat16 rounding is not, so this configuration is neither passed nor failed for bf16."
        ),
        causes=("a dry-run on a machine without a CUDA device, or with `--device cpu`",),
        fixes=("run the dry-run on a CUDA machine to verify bfloat16",),
        example=DryRunExample({"device": {"interpreter": True},
                               "geometry": {"substitutions": [{"what": "`mixed_qkv`"}]}}),
    )

    arguments: object


class ReducedSizes(Violation):
    rule = declare(
        "GDR322", "reduced-interpreter-sizes", severity="info", scope=DRYRUN,
        summary="the interpreter run used reduced sizes",
        message="the interpreter run is at reduced sizes: {reductions}",
        explanation=(
            "The Triton interpreter runs every program in NumPy on the CPU, so the dry-run caps the batch at 4 rows, "
            "the pool at 8 slots, and the state per slot (HV x V x K elements) by lowering the head counts. It keeps "
            "K, V, the group size HV/H, the dtypes (bf16 as fp16), the layouts and the per-axis stride padding, so "
            "the kernel's indexing and masking are exercised as deployed. Timings under the interpreter are not "
            "kernel times and no bandwidth is reported."
        ),
        causes=("a dry-run on a machine without a CUDA device, or with `--device cpu`",),
        fixes=("run the dry-run on a CUDA machine for the full per-rank sizes and timings",),
        example=DryRunExample({"device": {"interpreter": True}, "geometry": {
            "reductions": [{"what": "B", "before": 2048, "after": 8}]}}),
    )

    reductions: object
