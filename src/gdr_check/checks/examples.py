"""Executable examples of the rules: a small input that triggers each one.

Kernel-call rules (GDR2xx): a packed-decode call, `CallExample`. Dry-run rules (GDR3xx): a synthetic result
of the dry-run child, `DryRunExample`. Model rules (GDR1xx) and source rules (GDR0xx): a checkpoint,
`CheckpointExample` (files written to a temporary directory and checked as `gdr-check DIR` would).

The kernel-call examples:

Every example starts from one valid base call (B=4 rows, 8 state slots, K=V=8; GDN with H=2 key and HV=4
value heads, KDA with H=HV=4) on `cuda:0` and changes a few arguments. It is described by TensorSpecs, so it
runs without torch or a GPU; `diagnostics` puts it through the contract engine. The docs show `text`, and
tests/test_rule_examples.py asserts that each example fires its own rule and no other error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tensors import TensorSpec

if TYPE_CHECKING:
    from ..report import Diagnostic
    from .registry import RuleSet

BATCH, SLOTS, HEAD_K, HEAD_V, VALUE_HEADS = 4, 8, 8, 8, 4
KEY_HEADS = {"gdn": 2, "kda": 4}  # KDA (Kimi style): H = HV
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
    H, HV, K, V, B = KEY_HEADS[variant], VALUE_HEADS, HEAD_K, HEAD_V, BATCH
    gate = HV * K if variant == "kda" else HV
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
    if variant == "kda":
        arguments["lower_bound"] = None
    return arguments


@dataclass(frozen=True)
class CallExample:
    """The base call of `variant` with `changes` (argument -> `tensor(...)` or a value), checked for `engine`.

    `reachable=False` marks a check no call can trigger (GDR220): its example shows the call that comes
    closest, and the test asserts that it stays quiet."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    variant: str = "gdn"
    engine: str = "sglang"
    device: str = "cuda:0"
    reachable: bool = True

    @property
    def text(self) -> str:
        head = f"{self.variant.upper()} call, {self.engine}"
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

    def call(self) -> Any:
        from .call import PackedDecodeCall

        arguments = base_arguments(self.variant, self.device)
        for name, value in self.changes.items():
            if isinstance(value, Tensor):
                base: TensorSpec = arguments[name]
                value = TensorSpec.of(
                    value.shape, value.dtype or base.dtype, value.device or base.device, stride=value.stride,
                    values=value.values, storage=value.storage if value.storage is not None else base.storage,
                )
            arguments[name] = value
        return PackedDecodeCall(variant=self.variant, **arguments)  # type: ignore[arg-type]

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        from .call import CallContext
        from .contract import _diagnostics

        return _diagnostics(CallContext.build(self.call(), self.engine), rules=rules)


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

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        from ..runner.diagnose import dryrun_diagnostics
        from ..runner.launch import ChildOutcome

        result = None if self.result is None else dict(self.result)
        return dryrun_diagnostics(ChildOutcome(result, self.returncode, self.stderr), self.backend)


@dataclass(frozen=True)
class RanksExample:
    """What `dry-run --ranks all` gathered at tp=2: rank 0's result (`result`), or, with `result` None, rank 1
    raising `failure` while rank 0 waits; turned into diagnostics as the CLI does."""

    result: Mapping[str, Any] | None
    note: str = ""
    failure: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        import json

        if self.result is None:
            return f"# rank 1 of 2 raised; its last event: {json.dumps(dict(self.failure or {}))}"
        head = "# rank 0's gathered result at tp=2" + (f": {self.note}" if self.note else "")
        return f"{head}\nresult = {json.dumps(self.result)}"

    def __str__(self) -> str:
        return self.text

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        from ..runner.ranks import RankOutcome, RanksOutcome
        from ..runner.ranks_api import ranks_diagnostics

        if self.result is None:
            failed = RankOutcome(1, 1, [{"event": "failed", **dict(self.failure or {})}], "")
            waiting = RankOutcome(0, -15, [{"event": "gather", "step": 0}], "", killed=True)
            outcome = RanksOutcome(2, [waiting, failed], first_failure=1)
        else:
            outcome = RanksOutcome(2, [RankOutcome(0, 0, [{"event": "result", **dict(self.result)}], ""),
                                       RankOutcome(1, 0, [], "")])
        return ranks_diagnostics(outcome, 2)


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


@dataclass(frozen=True)
class ModelExample:
    """A checkpoint checked for a deployment (`deployment`: the `Deployment` fields, e.g. tp), as
    `gdr-check DIR --tp N` does: `config` (as `config.json` holds it) and, when `weights` is given, the
    linear-attention tensors of the Qwen3-Next config `weights` with `tensor_changes` (name -> (dtype, shape),
    or None to drop it)."""

    config: Mapping[str, Any]
    note: str = ""
    deployment: Mapping[str, Any] = field(default_factory=dict)
    weights: Mapping[str, Any] | None = None
    tensor_changes: Mapping[str, Any] = field(default_factory=dict)

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
                         + (", with" if self.tensor_changes else ""))
            for name, change in self.tensor_changes.items():
                lines.append(f"{name}: " + ("(absent)" if change is None else f"{change[0]} {list(change[1])}"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        from ..models.check import check_checkpoint
        from ..models.deployment import Deployment
        from ..sources import Checkpoint, TensorInfo

        tensors: dict[str, Any] = {}
        if self.weights is not None:
            shapes = {**qwen3_next_weights(self.weights), **self.tensor_changes}
            tensors = {name: TensorInfo(name, spec[0], tuple(spec[1]), "model.safetensors")
                       for name, spec in shapes.items() if spec is not None}
        checkpoint = Checkpoint(target="config.json", root=None, kind="config-only", config=dict(self.config),
                                config_file="config.json", tensors=tensors)
        return list(check_checkpoint(checkpoint, Deployment(**self.deployment)).report)


# -- checkpoints on disk (GDR0xx) ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """A symbolic link to `target`."""

    target: str

    def __str__(self) -> str:
        return f"-> {self.target}"


@dataclass(frozen=True)
class Folder:
    """An empty directory."""

    def __str__(self) -> str:
        return "(a directory)"


@dataclass(frozen=True)
class Safetensors:
    """A safetensors file: the 8-byte length prefix (`length`, default the header's), the JSON `header` (a dict
    or raw bytes), then `data` bytes of tensor data (default what the header's offsets need), written sparse;
    `size` overrides the file's size (to truncate or extend it)."""

    header: Mapping[str, Any] | bytes
    data: int | None = None
    length: int | None = None
    size: int | None = None

    def raw(self) -> bytes:

        return self.header if isinstance(self.header, bytes) else json.dumps(self.header).encode()

    def write(self, path: Any) -> None:

        raw = self.raw()
        data = self.data
        if data is None and isinstance(self.header, Mapping):
            data = max((entry["data_offsets"][1] for key, entry in self.header.items() if key != "__metadata__"),
                       default=0)
        with open(path, "wb") as handle:
            handle.write(struct.pack("<Q", len(raw) if self.length is None else self.length))
            handle.write(raw)
            handle.truncate(8 + len(raw) + (data or 0) if self.size is None else self.size)

    def __str__(self) -> str:
        text = f"safetensors, header {self.raw().decode('utf-8', 'backslashreplace')}"
        if self.length is not None:
            text += f", length prefix {self.length}"
        if self.size is not None:
            text += f", {self.size} bytes in all"
        return text


@dataclass(frozen=True)
class Sparse:
    """A file of `size` bytes that holds nothing (sparse)."""

    size: int

    def __str__(self) -> str:
        return f"({self.size:,} bytes)"


def tensor_entry(dtype: str = "F32", shape: tuple[int, ...] = (2,), offsets: tuple[int, ...] = (0, 8)
                 ) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@dataclass(frozen=True)
class CheckpointExample:
    """Files (path -> text, bytes, `Link`, `Folder`, `Safetensors` or `Sparse`) written to an empty directory,
    then `gdr-check TARGET` run there (`target` a path in it, or a repo id looked up in its `hub/` cache)."""

    files: Mapping[str, Any]
    target: str
    note: str = ""
    repo_id: bool = False  # `target` is an `org/name` id, looked up in the cache `hub/`

    @property
    def text(self) -> str:
        cache = "HF_HUB_CACHE=hub " if self.repo_id else ""
        lines = [f"# {cache}gdr-check {self.target}" + (f": {self.note}" if self.note else "")]
        for name, content in self.files.items():
            shown = repr(content) if isinstance(content, (str, bytes)) else str(content)
            lines.append(f"{name}: {shown}" if not isinstance(content, Link) else f"{name} {content}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def write(self, root: Any) -> None:

        root = Path(root)
        for name, content in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Link):
                os.symlink(content.target, path)
            elif isinstance(content, Folder):
                path.mkdir(exist_ok=True)
            elif isinstance(content, Safetensors):
                content.write(path)
            elif isinstance(content, Sparse):
                with open(path, "wb") as handle:
                    handle.truncate(content.size)
            else:
                path.write_bytes(content if isinstance(content, bytes) else content.encode())

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:

        from ..errors import SourceError
        from ..sources import open_checkpoint

        with tempfile.TemporaryDirectory(prefix="gdr-check-example-") as scratch:
            root = Path(scratch)
            self.write(root)
            target = self.target if self.repo_id else str(root / self.target)
            try:
                checkpoint = open_checkpoint(target, cache_dir=str(root / "hub"))
            except SourceError as error:
                return [error.diagnostic()]
        return list(checkpoint.diagnostics)  # the notes of a checkpoint read anyway (GDR013)


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

        lines = [f"# gdr-check call REC.json --model config.json --tp {self.tp}" + (f": {self.note}" if self.note else ""),
                 f"config = {json.dumps(self.config)}",
                 "# REC.json: the call the engine makes for this rank" + (", with" if self.changes else "")]
        expected = self._expected().call
        for name, value in self.changes.items():
            base = getattr(expected, name)
            lines.append(f"{name} = {value.text(base) if isinstance(value, Tensor) else repr(value)}")
        if self.also:
            lines.append(f"# also reported: {', '.join(self.also)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def _expected(self) -> Any:
        from ..models.check import check_checkpoint
        from ..models.deployment import Deployment
        from ..sources import Checkpoint

        checkpoint = Checkpoint(target="config.json", root=None, kind="config-only", config=dict(self.config),
                                config_file="config.json", tensors={})
        return check_checkpoint(checkpoint, Deployment(tp=self.tp, engine=self.engine))

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        from .call import CallContext
        from .compare import ModelGeometry, compare_call, contract_arguments
        from .contract import _diagnostics

        check = self._expected()
        expected = check.call
        changes: dict[str, Any] = {}
        for name, value in self.changes.items():
            if isinstance(value, Tensor):
                base = getattr(expected, name)
                value = TensorSpec.of(value.shape, value.dtype or base.dtype, value.device or base.device,
                                      stride=value.stride, values=value.values,
                                      storage=value.storage if value.storage is not None else base.storage)
            changes[name] = value
        recorded = dataclasses.replace(expected, **changes)
        found = _diagnostics(CallContext.build(recorded, self.engine), rules=rules)
        geometry = ModelGeometry.from_model(check.model, "config.json", self.config.get("head_dim"))
        comparison = compare_call(recorded, expected, geometry, tp=self.tp, engine=self.engine,
                                  state_dtype_reason=check.settings.state_dtype_reason if check.settings else None,
                                  contract_flagged=contract_arguments(found))
        return [d for d in found if d.code not in comparison.supersedes] + comparison.diagnostics
