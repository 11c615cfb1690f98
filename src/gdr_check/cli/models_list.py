"""`gdr-check --list-models`: the built-in model descriptions, as a table for people or, with
`--output-format json`, one JSON document with every model's config fields and how far they are verified."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..models.builtin import list_builtin

if TYPE_CHECKING:
    from ..models.builtin import BuiltinModel

# What a built-in model's confidence tag says: the weakest source among its values.
CONFIDENCE = {
    "V": "verified: every value read from a released config.json or safetensors header",
    "S": "secondary: some values from a single secondary source (a model card, a paper)",
    "U": "unverified: some values assumed (e.g. from a sibling model); check the real config.json",
}


def _model(model: BuiltinModel) -> dict[str, Any]:
    return {
        "repo_id": model.repo_id,
        "architecture": model.architecture,
        "model_type": model.config.get("model_type"),
        "confidence": model.confidence,
        "unverified": list(model.unverified),
        "notes": list(model.notes),
        "config": model.config_copy(),
    }


def document() -> dict[str, Any]:
    return {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info(), "confidence_levels": dict(CONFIDENCE),
            "models": [_model(model) for model in list_builtin()]}


def render_text() -> str:
    models = list_builtin()
    header = ["Built-in model descriptions (used for a repo id that is not in the local Hugging Face cache).",
              "The tag after each model is the weakest source among its values:"]
    header += [f"  {tag}  {meaning}" for tag, meaning in CONFIDENCE.items()]
    header.append("")
    id_width = max(len(m.repo_id) for m in models)
    arch_width = max(len(m.architecture) for m in models)
    rows = []
    for m in models:
        row = f"{m.repo_id.ljust(id_width)}  {m.architecture.ljust(arch_width)}  {m.confidence}"
        if m.unverified:
            row += f"  not verified: {', '.join(m.unverified)}"
        rows.append(row)
    return "\n".join(header + rows) + "\n"


def render(output_format: str) -> str:
    return json.dumps(document(), indent=2) + "\n" if output_format == "json" else render_text()
