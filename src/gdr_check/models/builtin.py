"""Built-in geometries of the public GDN/KDA models, by Hugging Face repo id.

Each entry is the minimal config a released checkpoint carries (the fields the adapters read), so a built-in
model goes through the same adapter as a config.json on disk. Values are from docs/models.md; `confidence` is the
weakest tag among them (V verified in a released config or header, S a single secondary source, U
unverified) and `unverified` names the fields that are not V.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import field
from typing import Any

from ..base.records import dataclass


@dataclass(frozen=True)
class BuiltinModel:
    repo_id: str
    config: dict[str, Any]
    confidence: str = "V"  # "V", "S" or "U"
    unverified: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def config_copy(self) -> dict[str, Any]:
        return copy.deepcopy(self.config)

    @property
    def architecture(self) -> str:
        architecture: str = self.config["architectures"][0]
        return architecture


def _interval_layer_types(layers: int, interval: int = 4) -> list[str]:
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]


def _qwen3_next() -> dict[str, Any]:
    # The released config has no `layer_types`: full attention every 4th layer.
    return {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "hidden_size": 2048, "num_hidden_layers": 48, "full_attention_interval": 4,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "num_experts": 512, "num_experts_per_tok": 10, "vocab_size": 151936, "torch_dtype": "bfloat16",
        "max_position_embeddings": 262144,
    }


def _qwen3_5(*, moe: bool, hidden: int, layers: int, value_heads: int, heads: int, kv_heads: int) -> dict[str, Any]:
    model_type = "qwen3_5_moe" if moe else "qwen3_5"
    architecture = "Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"
    return {
        "architectures": [architecture], "model_type": model_type,
        "text_config": {
            "model_type": f"{model_type}_text",
            "hidden_size": hidden, "num_hidden_layers": layers,
            "layer_types": _interval_layer_types(layers), "full_attention_interval": 4,
            "linear_num_key_heads": 16, "linear_num_value_heads": value_heads,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 256,
            "mamba_ssm_dtype": "float32", "dtype": "bfloat16",
        },
    }


def _kimi_linear() -> dict[str, Any]:
    kda = [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]
    return {
        "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
        "hidden_size": 2304, "num_hidden_layers": 27, "num_attention_heads": 32,
        "linear_attn_config": {
            "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4,
            "kda_layers": kda, "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        },
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "num_experts": 256, "num_experts_per_token": 8, "torch_dtype": "bfloat16",
        # The model's length: no `max_position_embeddings` (MLA without positions), 1M tokens as `model_max_length`,
        # the key both engines read (docs/models.md §3, S).
        "model_max_length": 1048576,
    }


_MODELS: tuple[BuiltinModel, ...] = (
    BuiltinModel("Qwen/Qwen3-Next-80B-A3B-Instruct", _qwen3_next()),
    BuiltinModel("Qwen/Qwen3-Next-80B-A3B-Thinking", _qwen3_next(), "U", ("all fields",),
                 ("assumed identical to the Instruct model",)),
    BuiltinModel("Qwen/Qwen3.5-0.8B", _qwen3_5(moe=False, hidden=1024, layers=24, value_heads=16, heads=8, kv_heads=2)),
    BuiltinModel("Qwen/Qwen3.5-0.8B-Base",
                 _qwen3_5(moe=False, hidden=1024, layers=24, value_heads=16, heads=8, kv_heads=2)),
    BuiltinModel("Qwen/Qwen3.5-2B", _qwen3_5(moe=False, hidden=2048, layers=24, value_heads=16, heads=8, kv_heads=2),
                 "U", ("num_hidden_layers", "layer_types", "mamba_ssm_dtype", "linear_* (S)")),
    BuiltinModel("Qwen/Qwen3.5-4B", _qwen3_5(moe=False, hidden=2560, layers=32, value_heads=32, heads=16, kv_heads=4)),
    BuiltinModel("Qwen/Qwen3.5-9B", _qwen3_5(moe=False, hidden=4096, layers=32, value_heads=32, heads=16, kv_heads=4),
                 "U", ("num_hidden_layers (S)", "layer_types (S)", "mamba_ssm_dtype (U)", "linear_* (S)")),
    BuiltinModel("Qwen/Qwen3.5-27B", _qwen3_5(moe=False, hidden=5120, layers=64, value_heads=48, heads=24, kv_heads=4),
                 "S", ("all fields (S): assumed equal to Qwen3.6-27B",)),
    BuiltinModel("Qwen/Qwen3.6-27B", _qwen3_5(moe=False, hidden=5120, layers=64, value_heads=48, heads=24, kv_heads=4)),
    BuiltinModel("Qwen/Qwen3.5-35B-A3B",
                 _qwen3_5(moe=True, hidden=2048, layers=40, value_heads=32, heads=16, kv_heads=2)),
    BuiltinModel("Qwen/Qwen3.6-35B-A3B",
                 _qwen3_5(moe=True, hidden=2048, layers=40, value_heads=32, heads=16, kv_heads=2),
                 "U", ("all fields: assumed equal to Qwen3.5-35B-A3B",)),
    BuiltinModel("Qwen/Qwen3.5-122B-A10B",
                 _qwen3_5(moe=True, hidden=3072, layers=48, value_heads=64, heads=32, kv_heads=2),
                 "S", ("num_hidden_layers", "layer_types", "mamba_ssm_dtype", "linear_*")),
    BuiltinModel("Qwen/Qwen3.5-397B-A17B",
                 _qwen3_5(moe=True, hidden=4096, layers=60, value_heads=64, heads=32, kv_heads=2),
                 "S", ("mamba_ssm_dtype", "linear_*")),
    BuiltinModel("moonshotai/Kimi-Linear-48B-A3B-Instruct", _kimi_linear(), "S",
                 ("num_attention_heads (S)", "model_max_length (S)")),
    BuiltinModel("moonshotai/Kimi-Linear-48B-A3B-Base", _kimi_linear(), "S",
                 ("num_attention_heads (S)", "model_max_length (S)")),
)

_BY_ID = {model.repo_id.lower(): model for model in _MODELS}


def list_builtin() -> list[BuiltinModel]:
    """Every built-in model, in the order of docs/models.md."""
    return list(_MODELS)


def closest_builtin(repo_id: str) -> BuiltinModel | None:
    """The built-in model whose repo id is a letter or two from `repo_id` (case-insensitive), if any: what a
    mistyped repo id most likely meant."""
    wanted = repo_id.strip().lower()
    close = difflib.get_close_matches(wanted, list(_BY_ID), n=1, cutoff=0.9)
    return _BY_ID[close[0]] if close and close[0] != wanted else None


def get_builtin(repo_id: str) -> BuiltinModel | None:
    """The built-in model for a repo id (case-insensitive), or None."""
    return _BY_ID.get(repo_id.strip().lower())
