"""Executable examples of the rules, as data: a small input that triggers each one.

Kernel-call rules (GDR2xx): a packed-decode call, `CallExample`. Dry-run rules (GDR3xx): a synthetic result
of the dry-run child, `DryRunExample` (`RanksExample` for `--ranks all`), or a config the dry-run refuses
before any child runs, `RefusedDryRunExample`. Model rules (GDR1xx): a config and
its tensors, `ModelExample`; a recorded call against a model (GDR16x): `CompareExample`. Source rules (GDR0xx)
keep theirs with the readers (`sources.examples.CheckpointExample`).

An example here is its input and its `text` (what the docs show); running it goes through the stage that
reports the rule, which may sit above the rules (the model check, the dry-run's diagnosis), so the runner is
`gdr_check.pipeline.example_runner` at the diagnostics layer.

The kernel-call examples:

Every example starts from one valid base call (B=4 rows, 8 state slots, K=V=8; GDN with H=2 key and HV=4
value heads, KDA with H=HV=4) on `cuda:0` and changes a few arguments. It is described by TensorSpecs, so it
runs without torch or a GPU; the runner puts it through the contract engine. The docs show `text`, and
tests/test_rule_examples.py asserts that each example fires its own rule and no other error.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..base.records import dataclass
from ..base.tensor_spec import TensorSpec
from ..base.variants import variant_spec
from ..call.expected import expected_call
from ..call.packed_call import PackedDecodeCall, Variant
from ..deployment.settings import Deployment, resolve
from ..models.adapters import select_adapter
from ..models.description import describe
from ..sources.checkpoint import Checkpoint

BATCH, SLOTS, HEAD_K, HEAD_V, VALUE_HEADS = 4, 8, 8, 8, 4
KEY_HEADS = 2  # H of a variant with fewer key heads than value heads (GDN); a symmetric one (KDA) has H = HV
BASE_TEXT = (f"the base call: B={BATCH}, {SLOTS} slots, K=V={HEAD_K}, HV={VALUE_HEADS} value heads (GDN: H=2 "
             f"key heads, KDA: H=HV), activations bf16 except `b` (fp32), A_log/dt_bias/state fp32, int32 slots "
             f"3, 1, 5, 2, scale K**-0.5, use_qk_l2norm_in_kernel=True, on cuda:0")


@dataclass(frozen=True)
class Tensor:
    """A changed tensor argument; fields left None keep the base argument's dtype, device and storage."""

    shape: tuple[int, ...]
    dtype: str | None = None
    stride: tuple[int, ...] | None = None
    device: str | None = None
    values: tuple[int | float, ...] | None = None
    storage: int | None = None

    def text(self, base: TensorSpec) -> str:
        parts = [f"{self.dtype or base.dtype} [{', '.join(map(str, self.shape))}]"]
        if self.stride is not None:
            parts.append(f"strides ({', '.join(map(str, self.stride))})")
        if self.device is not None:
            parts.append(f"on {self.device}")
        if self.values is not None:
            parts.append(f"values {list(self.values)}")
        if self.storage is not None:
            parts.append(f"in the buffer of `{_STORAGE_NAMES[self.storage]}`")
        return ", ".join(parts)


def tensor(*shape: int, dtype: str | None = None, stride: tuple[int, ...] | None = None, device: str | None = None,
         values: tuple[int | float, ...] | None = None, storage: str | None = None) -> Tensor:
    """A changed tensor of `shape`; `storage` names the base argument whose buffer it lies in."""
    return Tensor(tuple(shape), dtype, stride, device, values, _STORAGES[storage] if storage else None)


_ARGUMENT_ORDER = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")
_STORAGES = {name: number for number, name in enumerate(_ARGUMENT_ORDER, 1)}
_STORAGE_NAMES = {number: name for name, number in _STORAGES.items()}


def base_arguments(variant: str, device: str = "cuda:0") -> dict[str, Any]:
    """The keyword arguments of the valid base call (TensorSpecs and values)."""
    spec = variant_spec(variant)
    H, HV, K, V, B = VALUE_HEADS if spec.symmetric_heads else KEY_HEADS, VALUE_HEADS, HEAD_K, HEAD_V, BATCH
    gate = spec.gate_width(HV, K)
    shapes = {
        "mixed_qkv": ((B, 2 * H * K + HV * V), "bfloat16"), "a": ((B, gate), "bfloat16"), "b": ((B, HV), "float32"),
        "A_log": ((HV,), "float32"), "dt_bias": ((gate,), "float32"),
        "initial_state": ((SLOTS, HV, V, K), "float32"), "out": ((B, 1, HV, V), "bfloat16"),
        "ssm_state_indices": ((B,), "int32"),
    }
    arguments: dict[str, Any] = {
        name: TensorSpec.of(shape, dtype, device, storage=_STORAGES[name],
                            values=(3, 1, 5, 2) if name == "ssm_state_indices" else None)
        for name, (shape, dtype) in shapes.items()
    }
    arguments.update(scale=K ** -0.5, use_qk_l2norm_in_kernel=True)
    if variant_spec(variant).has_lower_bound:
        arguments["lower_bound"] = None
    return arguments


@dataclass(frozen=True)
class CallExample:
    """The base call of `variant` with `changes` (argument -> `tensor(...)` or a value), checked for `engine`.

    `reachable=False` marks a check no call can trigger (GDR220): its example shows the call that comes
    closest, and the test asserts that it stays quiet."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    variant: Variant = "gdn"
    engine: str = "sglang"
    device: str = "cuda:0"
    reachable: bool = True

    @property
    def text(self) -> str:
        head = f"{variant_spec(self.variant).label} call, {self.engine}"
        if self.device != "cuda:0":
            head += f", every tensor on {self.device}"
        lines = [f"# {head}: the base call" + (" with" if self.changes else "")]
        base = base_arguments(self.variant, self.device)
        for name, value in self.changes.items():
            lines.append(f"{name} = {value.text(base[name]) if isinstance(value, Tensor) else repr(value)}")
        if self.note:
            lines.append(f"# {self.note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def call(self) -> PackedDecodeCall:
        arguments = base_arguments(self.variant, self.device)
        for name, value in self.changes.items():
            if isinstance(value, Tensor):
                base: TensorSpec = arguments[name]
                value = TensorSpec.of(
                    value.shape, value.dtype or base.dtype, value.device or base.device, stride=value.stride,
                    values=value.values, storage=value.storage if value.storage is not None else base.storage,
                )
            arguments[name] = value
        return PackedDecodeCall(variant=self.variant, **arguments)


@dataclass(frozen=True)
class DryRunExample:
    """A dry-run child's JSON result (`result`; None for a child that died with `returncode` and `stderr`),
    turned into diagnostics as the CLI does for `backend`."""

    result: Mapping[str, Any] | None
    note: str = ""
    backend: str = "builtin"
    returncode: int | None = None
    stderr: str = ""

    @property
    def text(self) -> str:
        if self.result is None:
            head = f"# the dry-run child exited with status {self.returncode} without a result; stderr: {self.stderr!r}"
            return head + (f"\n# {self.note}" if self.note else "")
        lines = [f"# dry-run child result (backend {self.backend})" + (f": {self.note}" if self.note else ""),
                 f"result = {json.dumps(self.result)}"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class RefusedDryRunExample:
    """A config dry-run for a deployment (`deployment`: the `Deployment` fields, e.g. engine) with `backend`, as
    `gdr-check dry-run config.json` does, where the dry-run is refused before any child runs."""

    config: Mapping[str, Any]
    note: str = ""
    deployment: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "builtin"

    @property
    def text(self) -> str:
        options = [f"--{key.replace('_', '-')} {value}" for key, value in self.deployment.items()]
        if self.backend != "builtin":
            options.append(f"--backend {self.backend}")
        command = " ".join(["gdr-check dry-run config.json", *options])
        head = f"# config.json, dry-run with `{command}`" + (f": {self.note}" if self.note else "")
        return "\n".join([head, f"config = {json.dumps(self.config)}"])

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class RanksExample:
    """What `dry-run --ranks all` gathered at tp=2: rank 0's result (`result`), or, with `result` None, rank 1
    raising `failure` while rank 0 waits; turned into diagnostics as the CLI does."""

    result: Mapping[str, Any] | None
    note: str = ""
    failure: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        if self.result is None:
            return f"# rank 1 of 2 raised; its last event: {json.dumps(dict(self.failure or {}))}"
        head = "# rank 0's gathered result at tp=2" + (f": {self.note}" if self.note else "")
        return f"{head}\nresult = {json.dumps(self.result)}"

    def __str__(self) -> str:
        return self.text


def qwen3_next_config(**changes: Any) -> dict[str, Any]:
    """A small, valid Qwen3-Next config (8 layers, every 4th full attention; H=2, HV=4, K=V=16) with
    `changes` (a key set to None is removed)."""
    config: dict[str, Any] = {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 64,
        "num_hidden_layers": 8, "full_attention_interval": 4, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 256,
        "torch_dtype": "bfloat16",
    }
    config.update(changes)
    return {key: value for key, value in config.items() if value is not None}


def kimi_linear_config() -> dict[str, Any]:
    """A small, valid Kimi-Linear config: 4 layers, KDA in layers 1-3 (1-based), H=HV=4, K=V=16."""
    return {"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 64,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
            "linear_attn_config": {"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4,
                                   "kda_layers": [1, 2, 3], "full_attn_layers": [4]},
            "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
            "torch_dtype": "bfloat16"}


def qwen3_next_weights(config: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The linear-attention tensors (name -> (dtype, shape)) of a Qwen3-Next config's linear layers."""
    H, HV, K, V, W, hidden = (config["linear_num_key_heads"], config["linear_num_value_heads"],
                              config["linear_key_head_dim"], config["linear_value_head_dim"],
                              config["linear_conv_kernel_dim"], config["hidden_size"])
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for layer in range(config["num_hidden_layers"]):
        if (layer + 1) % config.get("full_attention_interval", 4) == 0:
            continue
        p = f"model.layers.{layer}.linear_attn."
        tensors.update({
            f"{p}in_proj_qkvz.weight": ("BF16", (2 * H * K + 2 * HV * V, hidden)),
            f"{p}in_proj_ba.weight": ("BF16", (2 * HV, hidden)),
            f"{p}conv1d.weight": ("BF16", (2 * H * K + HV * V, 1, W)),
            f"{p}A_log": ("BF16", (HV,)), f"{p}dt_bias": ("BF16", (HV,)), f"{p}norm.weight": ("BF16", (V,)),
            f"{p}out_proj.weight": ("BF16", (hidden, HV * V)),
        })
    return tensors


def config_checkpoint(config: Mapping[str, Any], tensors: Mapping[str, Any] | None = None) -> Checkpoint:
    """A checkpoint read from `config.json` alone (with `tensors`, name -> `TensorInfo`, when given)."""
    return Checkpoint(target="config.json", root=None, kind="config-only", config=dict(config),
                      config_file="config.json", tensors=dict(tensors or {}))


def expected_model_call(config: Mapping[str, Any], tp: int, engine: str) -> PackedDecodeCall:
    """The packed-decode call the engine makes on one rank for the model `config` describes."""
    checkpoint = config_checkpoint(config)
    selection = select_adapter(checkpoint.config, checkpoint.tensors)
    if selection.adapter is None:
        raise ValueError(f"no adapter describes the example config: {selection.reason}")
    model = describe(checkpoint, selection.adapter, selection.identity)
    if model is None:
        raise ValueError("the example config has no linear-attention layers")
    call = expected_call(model, resolve(model, Deployment(tp=tp, engine=engine)))
    if call is None:
        raise ValueError(f"the example config gives no packed-decode call at tp={tp}")
    return call


@dataclass(frozen=True)
class ModelExample:
    """A checkpoint checked for a deployment (`deployment`: the `Deployment` fields, e.g. tp), as
    `gdr-check DIR --tp N` does: `config` (as `config.json` holds it) and, when `weights` is given, the
    linear-attention tensors of the Qwen3-Next config `weights` with `tensor_changes` (name -> (dtype, shape),
    or None to drop it), stored under `weights_namespace` instead of `model.`."""

    config: Mapping[str, Any]
    note: str = ""
    deployment: Mapping[str, Any] = field(default_factory=dict)
    weights: Mapping[str, Any] | None = None
    tensor_changes: Mapping[str, Any] = field(default_factory=dict)
    weights_namespace: str = "model."

    def tensor_shapes(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """The example's weights: name -> (dtype, shape), with `tensor_changes` applied."""
        if self.weights is None:
            return {}
        shapes = {**qwen3_next_weights(self.weights), **self.tensor_changes}
        return {self.weights_namespace + name.removeprefix("model."): (spec[0], tuple(spec[1]))
                for name, spec in shapes.items() if spec is not None}

    @property
    def text(self) -> str:
        flags = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in self.deployment.items())
        what = "config.json" if self.weights is None else "DIR"
        head = f"# {what}, checked with `gdr-check {what}{' ' + flags if flags else ''}`"
        lines = [head + (f": {self.note}" if self.note else ""), f"config = {json.dumps(self.config)}"]
        if self.weights is not None:
            lines.append("# weights: the linear-attention tensors of "
                         + ("the same config" if self.weights == self.config
                            else f"the config {json.dumps(self.weights)}")
                         + (f", under `{self.weights_namespace}`" if self.weights_namespace != "model." else "")
                         + (", with" if self.tensor_changes else ""))
            for name, change in self.tensor_changes.items():
                lines.append(f"{name}: " + ("(absent)" if change is None else f"{change[0]} {list(change[1])}"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text


# -- a recorded call against a model (GDR16x) ----------------------------------------------------------------------
@dataclass(frozen=True)
class CompareExample:
    """A recorded call compared with the call the engine makes for a model, as `gdr-check call REC.json --model
    config.json --tp N` does: the recording is the model's own call for one rank with `changes` (argument ->
    `tensor(...)` or a value)."""

    changes: Mapping[str, Any]
    note: str = ""
    config: Mapping[str, Any] = field(default_factory=lambda: qwen3_next_config())
    tp: int = 2
    engine: str = "sglang"
    # Errors the same call necessarily gets too: a wrong shape the comparison explains is usually one the
    # wrapper rejects as well.
    also: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        title = f"# gdr-check call REC.json --model config.json --tp {self.tp}"
        lines = [title + (f": {self.note}" if self.note else ""),
                 f"config = {json.dumps(self.config)}",
                 "# REC.json: the call the engine makes for this rank" + (", with" if self.changes else "")]
        expected = self.expected()
        for name, value in self.changes.items():
            base = getattr(expected, name)
            lines.append(f"{name} = {value.text(base) if isinstance(value, Tensor) else repr(value)}")
        if self.also:
            lines.append(f"# also reported: {', '.join(self.also)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def expected(self) -> PackedDecodeCall:
        """The call the engine makes for the config on one rank (the recording before `changes`)."""
        return expected_model_call(self.config, self.tp, self.engine)

    def recorded(self) -> PackedDecodeCall:
        """The expected call with `changes`: what REC.json holds."""
        expected = self.expected()
        changes: dict[str, Any] = {}
        for name, value in self.changes.items():
            if isinstance(value, Tensor):
                base = getattr(expected, name)
                value = TensorSpec.of(value.shape, value.dtype or base.dtype, value.device or base.device,
                                      stride=value.stride, values=value.values,
                                      storage=value.storage if value.storage is not None else base.storage)
            changes[name] = value
        return dataclasses.replace(expected, **changes)
