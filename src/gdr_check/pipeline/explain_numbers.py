"""`model_numbers`: the widths of a model that `gdr-check explain --model` reads a pasted error's numbers with."""

from __future__ import annotations

from ..base.errors import InputError
from ..checks.explanations import ModelNumbers, model_widths
from .library import deployment_of, without_linear_layers
from .model_check import check_model


# -- explain ---------------------------------------------------------------------------------------------------------
class ExplainModelError(InputError):
    """A model `explain` cannot read numbers with: no GDN/KDA layer, or head counts and sizes not all known (exit 2)."""

    code = "usage"


def model_numbers(target: str) -> ModelNumbers:
    """The widths and head sizes `explain` reads a paste's numbers with (`checks.explain.model_widths`), of the model
    `target` names, read as `check_recording` reads its target: a checkpoint directory or one of its files, a repo
    id from the local Hugging Face cache, else a built-in description (`models.check.check_model`). SourceError
    when it cannot be read; ExplainModelError when it has no GDN/KDA layer or its head counts and sizes are not all
    known (the check's own message says why)."""
    check = check_model(target, deployment_of())
    model = check.model
    diagnostics = list(check.report)
    if model is None:
        without = without_linear_layers(check)
        if without is not None:
            raise ExplainModelError(f"{target}: {without} has no GDN or KDA layers, so explain has no "
                                    f"linear-attention widths to read the numbers with")
        first = next((d for d in diagnostics if d.severity == "error"), diagnostics[0] if diagnostics else None)
        raise ExplainModelError(f"{target}: " + (first.message if first is not None else
                                                 "its linear-attention layers could not be described"))
    H, HV, K, V = (size or 0 for size in (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim))
    if not (H and HV and K and V):
        error = next((d for d in diagnostics if d.severity == "error" and d.code < "GDR2"), None)
        unknown = [f"`{model.field_name(name)}`" for name, size in
                   (("num_k_heads", H), ("num_v_heads", HV), ("head_k_dim", K), ("head_v_dim", V)) if not size]
        why = error.message if error is not None else f"{', '.join(unknown)} unknown"
        raise ExplainModelError(f"{target}: the model's head counts and sizes are not all known ({why}), so explain "
                                f"has no widths to read the numbers with")
    return model_widths(model.kind, H, HV, K, V, model.num_attention_heads)


