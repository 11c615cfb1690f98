"""GDR265: the layer's parameters in the dtype the engine keeps them in (an assumed precondition).

sglang 0.5.23 allocates `A_log` in float32 whatever the model dtype (srt/models/qwen3_next.py,
kimi_linear.py: `torch.zeros(..., dtype=torch.float32)`), the KDA fast path requires it
(kernels/ops/attention/kda_packed_decode.py: `A_log.dtype == torch.float32`, else it falls back to Triton),
and the Triton kernels load it with `.to(tl.float32)`: a 16-bit `A_log` runs, with every head's decay
exp(A_log) rounded. The wrapper does not check it, so the runtime guard does.
"""

from __future__ import annotations

from ..base.registry import Finding, rule
from ..call.packed_call import CallContext
from .examples import CallExample, tensor

_SIXTEEN_BIT = ("bfloat16", "float16")
_VERIFIED_ENGINES = ("sglang",)


@rule(
    "GDR265", "a-log-not-float32", severity="warning",
    summary="`A_log` is not float32, the dtype the engine keeps it in",
    message="`A_log` is {dtype}: {engine} keeps it in float32",
    explanation=(
        "The decay of each value head is g = -exp(A_log) * softplus(a + dt_bias); the state is multiplied by "
        "exp(g) on every token. sglang 0.5.23 allocates `A_log` in float32 whatever the model dtype (the "
        "Qwen3-Next and Kimi-Linear layers), and its KDA fast path requires float32 (a 16-bit `A_log` falls "
        "back to the Triton kernel). A 16-bit `A_log` loads (the kernel widens it), but each head's decay is "
        "rounded to 8 (bf16) or 11 (fp16) bits of mantissa, and the error compounds over the context."
    ),
    causes=("the parameter cast with the model (`model.to(torch.bfloat16)`) after loading",
            "a checkpoint that stores `A_log` in bf16, loaded without the engine's float32 parameter"),
    fixes=("keep `A_log` in float32: `A_log.float()` once at load (the parameter, not per call)",),
    engines="sglang 0.5.23 (GDN and KDA layers allocate A_log in float32).",
    example=CallExample({"A_log": tensor(4, dtype="bfloat16")}, "`A_log` cast to bf16 with the model"),
)
def a_log_dtype(ctx: CallContext) -> Finding | None:
    dtype = ctx.call.A_log.dtype
    # Read in sglang's source only: another engine's parameter dtype is not asserted here.
    if dtype not in _SIXTEEN_BIT or ctx.profile.name not in _VERIFIED_ENGINES:
        return None
    return Finding({"dtype": dtype, "engine": ctx.profile.label},
                   [f"keep `A_log` in float32 as {ctx.profile.label} does: `A_log.float()` once at load"],
                   argument="A_log")
