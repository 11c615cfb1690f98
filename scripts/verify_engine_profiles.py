"""Read an engine release's facts from its released wheel and compare them with gdr-check's profile of it.

    python scripts/verify_engine_profiles.py sglang@0.5.23 [--wheel PATH] [--write tests/data/engine_facts]
    python scripts/verify_engine_profiles.py --all [--download-dir DIR] [--write DIR] [--delete-vllm]
    python scripts/verify_engine_profiles.py --newest [--wheels DIR ...] [--delete-vllm]

For each release the wheel is downloaded (`pip download --no-deps --only-binary=:all:`) unless `--wheel` gives it
or a `--wheels` folder holds it. `--newest` reads the newest release of each engine: the newest final release
on the index (`pip index versions`) when it is at or after the newest verified one, else the newest verified.
Nothing of the engine is imported or run: its files are read from the wheel (a zip) and parsed with `ast`:
- the packed decode wrappers and kernels: every `raise` (its condition and message template), the comparison that
  skips a row, how beta = sigmoid(b) is formed, the launch grids and the conditions between them;
- the layers' decode call: which decode functions the GDN and KDA layers call and under which condition;
- the environment switch of vLLM's GDN packed decode and its default; the state allocator's first free slot;
- the argument definitions: the state flags' names, choices, defaults, deprecations.

The facts are a JSON-able dict (`extract`). `compare` lists every disagreement between the facts and the profile
that `--engine name@version` selects; the script fails (exit 1) on any. `--write DIR` stores the facts as
DIR/<engine>-<version>.json with the wheel's sha256 and each file read, so the tests compare the profiles with
facts taken from the wheels. Exit 2: a wheel that cannot be had or read.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FACTS_DIR = ROOT / "tests" / "data" / "engine_facts"

GDN_PACKED = "fused_recurrent_gated_delta_rule_packed_decode"
KDA_PACKED = "fused_recurrent_kda_packed_decode"
HELION_KDA_PACKED = "helion_fused_recurrent_kda_packed_decode"  # sglang's Helion KDA decode backend (0.5.18 on)
# The functions a runtime guard or a capture wraps, wherever a release defines them.
PACKED_FUNCTIONS = (GDN_PACKED, KDA_PACKED, HELION_KDA_PACKED)
# The packed-decode contract's arguments (gdr_check.call.packed_call.ARGUMENTS, written out: the script reads the
# wheel without gdr-check's code): a definition with all of them takes the contract's API.
CONTRACT_ARGUMENTS = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out",
                      "ssm_state_indices")

def matrix() -> list[str]:
    """The releases the whole matrix reads: those the profile module records as verified
    (`VERIFIED_RELEASES`: every sglang release from 0.5.9, the last before the packed decode, and the vLLM releases
    that open an epoch, with others between them and the newest; post-releases are not read)."""
    from gdr_check.engines.profiles import VERIFIED_RELEASES

    return [f"{engine}@{release}" for engine, releases in VERIFIED_RELEASES.items() for release in releases]

# Where each engine keeps what is read, by release layout (the first path present is read).
SGLANG_FLA = ("sglang/kernels/ops/attention/fla/fused_recurrent.py",
              "sglang/srt/layers/attention/fla/fused_recurrent.py")
SGLANG_KDA_CUDA = "sglang/kernels/ops/attention/kda_packed_decode.py"
SGLANG_GDN_LAYER = "sglang/srt/layers/attention/linear/gdn_backend.py"
SGLANG_KDA_LAYER = "sglang/srt/layers/attention/linear/kda_backend.py"
SGLANG_HYBRID_BACKEND = "sglang/srt/layers/attention/hybrid_linear_attn_backend.py"  # before the packed decode
VLLM_QWEN3_NEXT = "vllm/model_executor/models/qwen3_next.py"
SGLANG_GDN_TRITON = "sglang/srt/layers/attention/linear/kernels/gdn_triton.py"
SGLANG_KDA_TRITON = "sglang/srt/layers/attention/linear/kernels/kda_triton.py"
VLLM_GDN_FLA = ("vllm/third_party/flash_linear_attention/ops/fused_recurrent.py",
                "vllm/model_executor/layers/fla/ops/fused_recurrent.py")
VLLM_KDA_OP = "vllm/models/kimi_k3/nvidia/ops/third_party/kda/fused_recurrent.py"
VLLM_KDA_LAYERS = ("vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py",
                   "vllm/model_executor/layers/kda.py")
VLLM_ENVS = "vllm/envs.py"
VLLM_PADDING = "vllm/v1/attention/backends/gdn_attn.py"
VLLM_CACHE_CONFIG = "vllm/config/cache.py"
VLLM_ARGS = "vllm/engine/arg_utils.py"
VLLM_PACKED_ENV = "VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE"

# The decode functions a layer may call (what the decode path reports).
DECODE_FUNCTIONS = (GDN_PACKED, KDA_PACKED, "packed_decode", "fused_recurrent_kda",
                    "fused_sigmoid_gating_delta_rule_update", "fused_recurrent_gated_delta_rule")

# The flags the profiles record, by the server-argument / cache-config field they set.
SGLANG_FLAG_FIELDS = ("mamba_ssm_dtype", "max_mamba_cache_size", "mamba_full_memory_ratio",
                      "mamba_scheduler_strategy", "mamba_radix_cache_strategy", "linear_attn_backend",
                      "linear_attn_decode_backend")
VLLM_FLAG_FIELDS = ("mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_cache_mode", "mamba_block_size",
                    "enable_prefix_caching")


class WheelError(Exception):
    """A wheel that cannot be had or read: exit 2 with one line."""


# --- reading the wheel -------------------------------------------------------------------------------------------
class Wheel:
    """The `.py` files of a wheel, read on demand; every file read is recorded with its sha256."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = path.read_bytes()
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile as error:
            raise WheelError(f"{path}: not a wheel ({error})") from None
        self.names = frozenset(self._zip.namelist())
        self.read: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}

    def text(self, name: str) -> str | None:
        if name not in self.names:
            return None
        data = self._zip.read(name)
        self.read[name] = hashlib.sha256(data).hexdigest()
        return data.decode("utf-8")

    def raw(self, name: str) -> bytes:
        """A file's bytes, not recorded as read (for a text search before parsing)."""
        return self._zip.read(name)

    def tree(self, name: str) -> ast.Module | None:
        if name not in self._trees:
            text = self.text(name)
            if text is None:
                return None
            self._trees[name] = ast.parse(text, filename=name)
        return self._trees[name]

    def first(self, names: Iterable[str]) -> str | None:
        return next((name for name in names if name in self.names), None)

    def under(self, prefix: str) -> list[str]:
        return sorted(name for name in self.names if name.startswith(prefix) and name.endswith(".py"))


def index_newest(engine: str) -> str | None:
    """The newest final release of `engine` on the package index pip is configured with (`pip index versions`,
    which leaves pre-releases out); None when pip cannot tell (no index reachable, an answer it does not print)."""
    command = [sys.executable, "-m", "pip", "index", "versions", "--disable-pip-version-check", engine]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(rf"^{re.escape(engine)} \(([0-9][0-9A-Za-z.+-]*)\)$", done.stdout, re.MULTILINE)
    return found.group(1) if done.returncode == 0 and found else None


def newest_release(engine: str, on_index: str | None) -> tuple[str, str]:
    """The release `--newest` verifies for `engine` and a line saying why: the newest release on the index when
    it is at or after the newest verified one (`NEWEST_VERIFIED`; a newer one is checked against the newest
    profile, as `--engine` checks it), else the newest verified one."""
    from gdr_check.engines.profiles import NEWEST_VERIFIED, _version_key

    verified = NEWEST_VERIFIED[engine]
    if on_index is None:
        return verified, (f"{engine}: the index gave no newest release; verifying the newest verified one, "
                          f"{verified}")
    key, verified_key = _version_key(on_index), _version_key(verified)
    if key is None or verified_key is None or key < verified_key:
        return verified, (f"{engine}: the index's newest release, {on_index}, is older than the newest verified "
                          f"one; verifying {verified}")
    if key == verified_key:
        return on_index, f"{engine}: {on_index} is the newest release on the index and the newest verified"
    return on_index, (f"{engine}: {on_index} on the index is newer than the newest verified release, {verified}: "
                      f"it is checked against the newest profile (add it to VERIFIED_RELEASES and "
                      f"tests/data/engine_facts once it agrees)")


def download(engine: str, version: str, directory: Path, have: Iterable[Path] = ()) -> Path:
    """The release's wheel: one already in a folder of `have`, else in `directory`, downloaded with pip unless it
    is there already."""
    for folder in have:
        found = sorted(folder.glob(f"{engine}-{version}-*.whl"))
        if found:
            return found[0]
    directory.mkdir(parents=True, exist_ok=True)
    found = sorted(directory.glob(f"{engine}-{version}-*.whl"))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                   "--no-cache-dir", f"{engine}=={version}", "-d", str(directory)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        found = sorted(directory.glob(f"{engine}-{version}-*.whl"))
        if done.returncode or not found:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise WheelError(f"{engine}=={version}: pip download failed: {last}")
    return found[0]


# --- ast helpers -------------------------------------------------------------------------------------------------
def _text(node: ast.AST) -> str:
    """Source text of an expression, spaces removed (`B * HV` and `B*HV` are one grid axis)."""
    return ast.unparse(node).replace(" ", "")


def _template(node: ast.expr) -> str | None:
    """A message as its source builds it: literal text, `{expression}` where it formats a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    return None


def _function(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    if tree is None:
        return None
    return next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name), None)


def _parents(root: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(root) for child in ast.iter_child_nodes(node)}


def _raises(function: ast.FunctionDef) -> list[dict[str, str]]:
    """Every `raise Error(message)` of a wrapper, in source order, with the condition of the `if` around it."""
    parents = _parents(function)
    out = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
            continue
        parent = parents.get(node)
        condition = ast.unparse(parent.test) if isinstance(parent, ast.If) else ""
        message = _template(node.exc.args[0]) if node.exc.args else ""
        out.append({"line": str(node.lineno), "error": ast.unparse(node.exc.func), "condition": condition,
                    "message": message if message is not None else ast.unparse(node.exc.args[0])})
    out.sort(key=lambda item: int(item["line"]))
    return [{key: value for key, value in item.items() if key != "line"} for item in out]


def _skip(kernel: ast.FunctionDef) -> int | None:
    """The kernel's skip rule as the largest index it skips: `idx < 0` -> -1, `idx <= 0` -> 0. The first `if`
    comparing a loaded index with a constant whose body returns."""
    for node in ast.walk(kernel):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        if len(test.ops) != 1 or not isinstance(test.comparators[0], ast.Constant):
            continue
        if not any(isinstance(child, ast.Return) for child in ast.walk(node)):
            continue
        if not isinstance(test.left, ast.Name) or "idx" not in test.left.id:
            continue
        value = test.comparators[0].value
        if not isinstance(value, int):
            continue
        if isinstance(test.ops[0], ast.Lt):
            return value - 1
        if isinstance(test.ops[0], ast.LtE):
            return value
    return None


def _beta(kernel: ast.FunctionDef) -> str | None:
    """"b.dtype" when the kernel rounds sigmoid(b) to b's dtype before widening it, "fp32" when it keeps it in
    float32; None when it forms no beta (the first assignment to a name holding "beta" that calls sigmoid)."""
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "beta" in t.id for t in node.targets):
            text = _text(node.value)
            if "sigmoid(" in text:
                return "b.dtype" if re.search(r"\.to\(\w+\.dtype\.element_ty\)", text) else "fp32"
    return None


def _grids(wrapper: ast.FunctionDef) -> list[list[str]]:
    """Every launch grid the wrapper may use, in source order: `grid = (...)`, both arms of `a if c else b`."""
    out: list[list[str]] = []

    def add(value: ast.expr) -> None:
        if isinstance(value, ast.IfExp):
            add(value.body)
            add(value.orelse)
        elif isinstance(value, ast.Tuple):
            # `cdiv(V, BV)` is the NV of the other wrappers
            out.append([re.sub(r"^(triton\.)?cdiv\(V,BV\)$", "NV", _text(element)) for element in value.elts])

    for node in ast.walk(wrapper):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "grid" for t in node.targets):
            add(node.value)
    return out


def _grid_condition(wrapper: ast.FunctionDef) -> str | None:
    """The condition choosing between two grids (`grid = a if c else b`, c a name resolved to its assignment)."""
    for node in ast.walk(wrapper):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "grid" for t in node.targets):
            if isinstance(node.value, ast.IfExp):
                test = node.value.test
                if isinstance(test, ast.Name):
                    for other in ast.walk(wrapper):
                        if isinstance(other, ast.Assign) and any(
                                isinstance(t, ast.Name) and t.id == test.id for t in other.targets):
                            return ast.unparse(other.value)
                return ast.unparse(test)
    return None


def _parameters(function: ast.FunctionDef) -> list[str]:
    return [argument.arg for argument in (*function.args.args, *function.args.kwonlyargs)]


def _packed_facts(wheel: Wheel, path: str | None, wrapper_name: str) -> dict[str, Any] | None:
    if path is None:
        return None
    tree = wheel.tree(path)
    wrapper = _function(tree, wrapper_name)
    kernel = _function(tree, wrapper_name + "_kernel")
    if wrapper is None or kernel is None:
        return None
    return {"file": path, "parameters": _parameters(wrapper), "raises": _raises(wrapper),
            "skip_at_or_below": _skip(kernel), "beta": _beta(kernel), "grids": _grids(wrapper),
            "grid_condition": _grid_condition(wrapper)}


def _calls(tree: ast.Module | None, names: Iterable[str]) -> list[str]:
    """Which of `names` the module calls (as `f(...)` or `obj.f(...)`), sorted."""
    if tree is None:
        return []
    wanted, seen = set(names), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in wanted:
                seen.add(name)
    return sorted(seen)


def _method_calls(tree: ast.Module | None, method: str, names: Iterable[str]) -> list[str]:
    """Which of `names` the functions called `method` of the module call, sorted."""
    if tree is None:
        return []
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == method]
    return sorted({name for function in functions
                   for name in _calls(ast.Module(body=[function], type_ignores=[]), names)})


def _class_mentions(tree: ast.Module | None, names: Iterable[str]) -> dict[str, list[str]]:
    """Per class of the module, which of `names` its body calls or refers to (`self._kernel_func = f`), sorted;
    only classes that mention one."""
    if tree is None:
        return {}
    wanted, out = set(names), {}
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            seen = {node.id for node in ast.walk(cls) if isinstance(node, ast.Name) and node.id in wanted}
            if seen:
                out[cls.name] = sorted(seen)
    return out


def _packed_call_condition(tree: ast.Module | None) -> str | None:
    """The condition of the `if` that guards the layer's `...packed_decode(` call (the innermost `if` around it),
    with `self.`/`cfg.` prefixes kept as written."""
    if tree is None:
        return None
    parents = _parents(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "packed_decode":
            parent = parents.get(node)
            while parent is not None and not isinstance(parent, ast.If):
                parent = parents.get(parent)
            if isinstance(parent, ast.If):
                return ast.unparse(parent.test)
    return None


def _backend_names(tree: ast.Module | None, variable: str) -> list[str]:
    """The backends a dispatcher accepts for `variable`: the `X` of every `variable.is_X()` call, sorted."""
    if tree is None:
        return []
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("is_")
                and isinstance(node.func.value, ast.Name) and node.func.value.id == variable):
            out.add(node.func.attr[3:])
    return sorted(out)


# --- flags -------------------------------------------------------------------------------------------------------
def _literal(node: ast.expr | None, constants: dict[str, Any]) -> Any:
    """A literal value, a list of literals, or a module constant named by `node`; "<expr>" text otherwise."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return f"<{ast.unparse(node)}>"
    return list(value) if isinstance(value, (list, tuple)) else value


def _constants(trees: Iterable[ast.Module]) -> dict[str, Any]:
    """Module-level `NAME = [literals]` / `NAME = Literal[...]` of the given modules."""
    out: dict[str, Any] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, node.value
                if (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                        and value.value.id == "Literal"):
                    inner = value.slice
                    items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                    out[name] = [ast.literal_eval(item) for item in items]
                    continue
                try:
                    literal = ast.literal_eval(value)
                except ValueError:
                    continue
                if isinstance(literal, (list, tuple)) and all(isinstance(item, str) for item in literal):
                    out[name] = list(literal)
    return out


def _flag(name: str, choices: Any, default: Any, *, replaced_by: str | None = None,
          no_effect: bool = False) -> dict[str, Any]:
    return {"name": name, "choices": choices, "default": default, "replaced_by": replaced_by,
            "no_effect": no_effect}


def _sglang_flags(wheel: Wheel) -> dict[str, dict[str, Any]]:
    names = [name for name in ("sglang/srt/server_args.py",) if name in wheel.names]
    names += wheel.under("sglang/srt/arg_groups/")
    trees = [tree for tree in (wheel.tree(name) for name in names) if tree is not None]
    constants = _constants(trees)
    fields: dict[str, dict[str, Any]] = {}  # dataclass field -> choices, default
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            choices: Any = None
            annotation = node.annotation
            if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple):
                for part in annotation.slice.elts[1:]:
                    if isinstance(part, ast.Call):
                        for keyword in part.keywords:
                            if keyword.arg == "choices":
                                choices = _literal(keyword.value, constants)
            fields[node.target.id] = {"choices": choices, "default": _literal(node.value, constants)}
    flags: dict[str, dict[str, Any]] = {}
    for field in SGLANG_FLAG_FIELDS:  # fields declared as annotated dataclass fields: `--field-name`
        if field in fields and any(isinstance(tree, ast.Module) for tree in trees):
            flags[field] = _flag("--" + field.replace("_", "-"), fields[field]["choices"], fields[field]["default"])
    for tree in trees:  # `parser.add_argument("--flag", ...)`: explicit definitions, deprecated aliases
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                continue
            flag = node.args[0].value
            keywords = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
            field = flag.lstrip("-").replace("-", "_")
            if field not in SGLANG_FLAG_FIELDS:
                continue
            default_node = keywords.get("default")
            default: Any = _literal(default_node, constants)
            if (isinstance(default_node, ast.Attribute) and isinstance(default_node.value, ast.Name)
                    and default_node.value.id == "ServerArgs"):
                default = fields.get(default_node.attr, {}).get("default")
            replaced = keywords.get("new_flag")
            choices = _literal(keywords["choices"], constants) if "choices" in keywords else None
            dest = _literal(keywords["dest"], constants) if "dest" in keywords else None
            if replaced is not None and choices is None and isinstance(dest, str):
                choices = fields.get(dest, {}).get("choices")
            flags[field] = _flag(flag, choices, default,
                                 replaced_by=_literal(replaced, constants) if replaced is not None else None)
    return {flags[field]["name"]: flags[field] for field in SGLANG_FLAG_FIELDS if field in flags}


def _vllm_flags(wheel: Wheel) -> dict[str, dict[str, Any]]:
    cache, args = wheel.tree(VLLM_CACHE_CONFIG), wheel.tree(VLLM_ARGS)
    if cache is None or args is None:
        return {}
    constants = _constants([cache])
    fields: dict[str, dict[str, Any]] = {}
    for node in ast.walk(cache):
        if isinstance(node, ast.ClassDef) and node.name == "CacheConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    annotation = item.annotation
                    choices = constants.get(annotation.id) if isinstance(annotation, ast.Name) else None
                    value = item.value
                    if isinstance(value, ast.Call):  # Field(default=...)
                        value = next((k.value for k in value.keywords if k.arg == "default"), None)
                    fields[item.target.id] = {"choices": choices, "default": _literal(value, constants)}
    messages = {node.targets[0].id: _template(node.value) for node in args.body
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and _template(node.value) is not None}
    flags: dict[str, dict[str, Any]] = {}
    for node in ast.walk(args):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        flag = str(node.args[0].value)
        field = flag.lstrip("-").replace("-", "_")
        if field not in VLLM_FLAG_FIELDS or field not in fields:
            continue
        entry = dict(fields[field])
        deprecated = ""
        for keyword in node.keywords:  # `**{**cache_kwargs[...], "default": None, "help": MESSAGE}`
            if keyword.arg is None and isinstance(keyword.value, ast.Dict):
                for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "default":
                        entry["default"] = _literal(value, constants)
                    if isinstance(key, ast.Constant) and key.value == "help":
                        deprecated = messages.get(value.id, "") if isinstance(value, ast.Name) else ""
        flags[flag] = _flag(flag, entry["choices"], entry["default"],
                            no_effect="deprecated" in deprecated and "no effect" in deprecated)
    return dict(sorted(flags.items()))


# --- per engine --------------------------------------------------------------------------------------------------
def _sm100_flashinfer(wheel: Wheel) -> dict[str, Any] | None:
    """The start-up rule that moves decode to flashinfer on SM100+ with a bf16 SSM state (sglang 0.5.11 on): the
    `if` assigning `linear_attn_decode_backend` "flashinfer" whose condition reads `mamba_ssm_dtype == "bfloat16"`."""
    names = [name for name in ("sglang/srt/server_args.py",) if name in wheel.names]
    names += [name for name in wheel.under("sglang/srt/arg_groups/") if name.endswith("attention_hook.py")]
    for name in names:
        tree = wheel.tree(name)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.If):
                continue
            test = _text(node.test)
            body = "".join(_text(statement) for statement in node.body)
            if ("mamba_ssm_dtype=='bfloat16'" in test and "sm100" in test
                    and "linear_attn_decode_backend" in body and "'flashinfer'" in body):
                condition = re.sub(r"\b(self|cfg)\.", "", ast.unparse(node.test))
                # `is_sm100_supported()` / `is_sm100`: compute capability major 10
                return {"file": name, "condition": condition, "sm_major": 10 if "sm100" in condition else None,
                        "exempt_backend": "helion" if "linear_attn_backend != 'helion'" in condition else None}
    return None


def _first_free_slot(wheel: Wheel) -> int | None:
    """The first slot sglang's mamba allocator hands out: `self.free_slots = torch.arange(START, ...)` in a mamba
    pool or allocator."""
    for name in wheel.under("sglang/srt/mem_cache/"):
        text = wheel.text(name)
        if text is None or "class Mamba" not in text or "free_slots" not in text:
            continue
        tree = wheel.tree(name)
        assert tree is not None
        for cls in ast.walk(tree):
            if not (isinstance(cls, ast.ClassDef) and "Mamba" in cls.name):
                continue
            for node in ast.walk(cls):
                if (isinstance(node, ast.Assign) and _text(node.targets[0]) == "self.free_slots"
                        and isinstance(node.value, ast.Call) and _text(node.value.func).endswith("arange")
                        and len(node.value.args) >= 2 and isinstance(node.value.args[0], ast.Constant)):
                    start = node.value.args[0].value
                    return start if isinstance(start, int) else None
    return None


def _sglang(wheel: Wheel) -> dict[str, Any]:
    fla = wheel.first(SGLANG_FLA)
    gdn_layer, kda_layer = wheel.tree(SGLANG_GDN_LAYER), wheel.tree(SGLANG_KDA_LAYER)
    cuda = wheel.tree(SGLANG_KDA_CUDA)
    return {
        "gdn_packed": _packed_facts(wheel, fla, GDN_PACKED),
        "kda_packed": _packed_facts(wheel, fla, KDA_PACKED),
        "kda_cuda_fast_path": _function(cuda, "covered") is not None,
        "decode": {
            "gdn_layer_calls": _calls(gdn_layer, DECODE_FUNCTIONS),
            "kda_layer_calls": _calls(kda_layer, DECODE_FUNCTIONS),
            "gdn_triton_decode_calls": _method_calls(wheel.tree(SGLANG_GDN_TRITON), "decode", DECODE_FUNCTIONS),
            "kda_triton_decode_calls": _method_calls(wheel.tree(SGLANG_KDA_TRITON), "decode", DECODE_FUNCTIONS),
            "kda_packed_condition": _packed_call_condition(kda_layer),
            "hybrid_backend_decode": _class_mentions(wheel.tree(SGLANG_HYBRID_BACKEND)
                                                     if gdn_layer is None else None, DECODE_FUNCTIONS),
            "kda_decode_backends": _backend_names(kda_layer, "decode_backend"),
            "sm100_bf16_state": _sm100_flashinfer(wheel),
        },
        "first_free_slot": _first_free_slot(wheel),
        "flags": _sglang_flags(wheel),
    }


def _env_default(wheel: Wheel, variable: str) -> str | None:
    """The default of `os.getenv(variable, DEFAULT)` in vLLM's envs table."""
    tree = wheel.tree(VLLM_ENVS)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and _text(node.func) in ("os.getenv", "os.environ.get")
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value == variable
                and isinstance(node.args[1], ast.Constant)):
            return str(node.args[1].value)
    return None


def _vllm_gdn_layers(wheel: Wheel) -> dict[str, dict[str, Any]]:
    """The model/layer modules that call the GDN packed decode, and whether the env switch guards the call."""
    out = {}
    for name in (*wheel.under("vllm/model_executor/"), *wheel.under("vllm/models/")):
        if "/ops/" in name or "/fla/" in name:
            continue
        data = wheel.raw(name)
        if GDN_PACKED.encode() not in data:
            continue
        tree = wheel.tree(name)
        if GDN_PACKED in _calls(tree, [GDN_PACKED]):
            out[name] = {"env_switch": VLLM_PACKED_ENV in data.decode("utf-8")}
    return out


def _vllm(wheel: Wheel) -> dict[str, Any]:
    kda_layers = {name: _calls(wheel.tree(name), DECODE_FUNCTIONS) for name in VLLM_KDA_LAYERS
                  if name in wheel.names}
    padding = wheel.text(VLLM_PADDING)
    sentinel = None
    if padding is not None:
        found = re.findall(r"\.fill_\((PAD_SLOT_ID|NULL_BLOCK_ID)\)", padding)
        sentinel = sorted(set(found))
    return {
        "gdn_packed": _packed_facts(wheel, wheel.first(VLLM_GDN_FLA), GDN_PACKED),
        "kda_packed": _packed_facts(wheel, VLLM_KDA_OP if VLLM_KDA_OP in wheel.names else None, KDA_PACKED),
        "decode": {
            "gdn_layers": _vllm_gdn_layers(wheel),
            "env_switch": {"name": VLLM_PACKED_ENV, "default": _env_default(wheel, VLLM_PACKED_ENV)},
            "qwen3_next_decode_calls": _calls(wheel.tree(VLLM_QWEN3_NEXT), DECODE_FUNCTIONS),
            "kda_layer_calls": kda_layers,
        },
        "padding_sentinel": sentinel,
        "flags": _vllm_flags(wheel),
    }


SGLANG_MAMBA_UTILS = "sglang/srt/configs/mamba_utils.py"
VLLM_MAMBA_UTILS = "vllm/model_executor/layers/mamba/mamba_utils.py"


def _torch_dtype(node: ast.expr | None) -> str | None:
    """"float32" for `torch.float32`; None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    return None


def _sglang_state_dtypes(wheel: Wheel) -> dict[str, Any] | None:
    """sglang's state dtype defaults (`mamba2_state_dtype`): the SSM state's default, the conv state's (the
    fallback of its environment lookup), the config names it takes (its `dtype_map`) and whether an unknown config
    name raises (else it logs and keeps the default)."""
    function = _function(wheel.tree(SGLANG_MAMBA_UTILS), "mamba2_state_dtype")
    if function is None:
        return None
    out: dict[str, Any] = {"file": SGLANG_MAMBA_UTILS, "ssm_default": None, "conv_default": None, "config_names": {},
                           "unknown_config_raises": any(isinstance(node, ast.Raise) for node in ast.walk(function))}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name == "ssm_dtype" and out["ssm_default"] is None and _torch_dtype(value):
            out["ssm_default"] = _torch_dtype(value)
        elif name == "conv_dtype" and isinstance(value, ast.Call) and len(value.args) == 2:
            out["conv_default"] = _torch_dtype(value.args[1])
        elif name == "dtype_map" and isinstance(value, ast.Dict):
            out["config_names"] = {key.value: _torch_dtype(item) for key, item in zip(value.keys, value.values,
                                                                                      strict=True)
                                   if isinstance(key, ast.Constant)}
    return out


def _vllm_state_dtypes(wheel: Wheel) -> dict[str, Any] | None:
    """vLLM's state dtypes (`MambaStateDtypeCalculator`): whether the conv state takes `--mamba-cache-dtype` through
    `get_kv_cache_torch_dtype` ("auto": the model dtype), whether an "auto" SSM state takes the conv state's dtype,
    and the KDA recurrent state's dtype (the last of `kda_state_dtype`'s tuple) and whether it reads the SSM
    cache dtype at all."""
    tree = wheel.tree(VLLM_MAMBA_UTILS)
    gdn, kda = _function(tree, "_mamba_state_dtype"), _function(tree, "kda_state_dtype")
    if gdn is None or kda is None:
        return None
    follows = any(isinstance(node, ast.If) and _text(node.test) == "mamba_ssm_cache_dtype=='auto'"
                  and any(isinstance(item, ast.Assign) and _text(item.value) == "conv_state_dtype"
                          for item in node.body) for node in ast.walk(gdn))
    conv = any(isinstance(node, ast.Assign) and _text(node.targets[0]) == "conv_state_dtype"
               and _text(node.value).startswith("get_kv_cache_torch_dtype(mamba_cache_dtype,")
               for node in ast.walk(gdn))
    returned = [node.value for node in ast.walk(kda) if isinstance(node, ast.Return)]
    last = returned[0].elts[-1] if returned and isinstance(returned[0], ast.Tuple) else None
    kda_state = _torch_dtype(last)
    for node in ast.walk(kda):  # 0.30 on: `if mamba_ssm_cache_dtype == "auto": recurrent_state_dtype = torch.X`
        if isinstance(node, ast.If) and _text(node.test) == "mamba_ssm_cache_dtype=='auto'":
            kda_state = next((_torch_dtype(item.value) for item in node.body if isinstance(item, ast.Assign)), None)
    return {"file": VLLM_MAMBA_UTILS, "conv_from_cache_dtype": conv, "ssm_auto_follows_conv": follows,
            "kda_state": kda_state, "kda_reads_ssm_cache_dtype": "mamba_ssm_cache_dtype" in _parameters(kda)}


def _module_of(name: str) -> str:
    """The module a wheel file defines: "pkg/sub/mod.py" -> "pkg.sub.mod", "pkg/sub/__init__.py" -> "pkg.sub"."""
    parts = name[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_from(name: str, node: ast.ImportFrom) -> str:
    """The absolute module an `from ... import` in the file `name` reads (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = _module_of(name).split(".")
    if not name.endswith("/__init__.py"):
        package = package[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _decode_sites(wheel: Wheel, engine: str) -> dict[str, list[Any]]:
    """Where the release defines the packed-decode functions (`PACKED_FUNCTIONS`) and with which parameters, which
    of those definitions any module imports by name (`from module import function`, inside a function too), and
    the classes whose instances keep one as an attribute (`self.x = function`). Files that do not name a packed
    function are not read."""
    definitions, imported, holders = [], set(), set()
    for name in wheel.under(engine + "/"):
        data = wheel.raw(name)
        if not any(function.encode() in data for function in PACKED_FUNCTIONS):
            continue
        tree = wheel.tree(name)
        assert tree is not None
        module = _module_of(name)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in PACKED_FUNCTIONS:
                definitions.append({"target": f"{module}:{node.name}", "parameters": _parameters(node)})
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _imported_from(name, node)
                imported.update(f"{source}:{alias.name}" for alias in node.names if alias.name in PACKED_FUNCTIONS)
            elif isinstance(node, ast.ClassDef):
                if any(isinstance(item, ast.Assign) and isinstance(item.value, ast.Name)
                       and item.value.id in PACKED_FUNCTIONS
                       and any(isinstance(t, ast.Attribute) and _text(t.value) == "self" for t in item.targets)
                       for item in ast.walk(node)):
                    holders.add(f"{module}:{node.name}")
    return {"definitions": sorted(definitions, key=lambda item: item["target"]), "imported": sorted(imported),
            "holders": sorted(holders)}


def extract(engine: str, version: str, wheel_path: Path) -> dict[str, Any]:
    """Every fact the profiles record, read from the release's wheel."""
    wheel = Wheel(wheel_path)
    facts = _sglang(wheel) if engine == "sglang" else _vllm(wheel)
    facts["decode_sites"] = _decode_sites(wheel, engine)
    facts["state_dtypes"] = _sglang_state_dtypes(wheel) if engine == "sglang" else _vllm_state_dtypes(wheel)
    return {"engine": engine, "version": version, "wheel": wheel_path.name, "wheel_sha256": wheel.sha256,
            **facts, "files": dict(sorted(wheel.read.items()))}


# --- comparison with the profile ---------------------------------------------------------------------------------
def _normalized(message: str) -> str:
    """A message template with every formatted value as `{}`: the wheel's `{tuple(out.shape)}` and a rule's
    `{got}` compare equal."""
    return re.sub(r"\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", "{}", message.replace("{{", "\0").replace("}}", "\1")) \
        .replace("\0", "{").replace("\1", "}")


def _lists(grids: Any) -> list[list[str]]:
    return [list(grid) for grid in grids]


def expected(facts: dict[str, Any]) -> dict[str, Any]:
    """The profile fields (and derived values) that the facts read from one release's wheel imply."""
    engine, gdn, kda, decode = facts["engine"], facts["gdn_packed"], facts["kda_packed"], facts["decode"]
    flags = sorted((dict(flag) for flag in facts["flags"].values()), key=lambda flag: flag["name"])
    if gdn is None:  # a release before the packed decode: which kernels its layers decode with, and its flags
        if engine == "sglang":
            hybrid = decode.get("hybrid_backend_decode") or {}
            gdn_kernel = "/".join(hybrid.get("GDNAttnBackend", []))
            kda_kernel = "/".join(hybrid.get("KimiLinearAttnBackend", []))
        else:
            gdn_kernel = "/".join(decode.get("qwen3_next_decode_calls", []))
            kda_kernel = "/".join(sorted({call for calls in decode["kda_layer_calls"].values() for call in calls}))
        if not gdn_kernel:
            raise WheelError(f"{engine} {facts['version']}: neither a packed GDN decode nor a GDN decode call found")
        return {"kernel_file": None, "gdn_decode_kernel": gdn_kernel, "kda_decode_kernel": kda_kernel or None,
                "flags": flags}
    grids = gdn["grids"]
    out: dict[str, Any] = {
        "kernel_file": gdn["file"],
        "skip_at_or_below": gdn["skip_at_or_below"],
        "gdn_beta_rounding": "b.dtype" if gdn["beta"] == "b.dtype" else None,
        "gdn_grids": grids,
        # CUDA caps gridDim.y at 65535: an unsplit (NV, B*HV) launch limits B*HV; a split one, B and HV.
        "grid_dim_limit": 65535 if grids == [["NV", "B*HV"]] else None,
        "gdn_split_condition": gdn["grid_condition"],
        "gdn_wrapper_messages": [_normalized(r["message"]) for r in gdn["raises"]],
        "gdn_wrapper_errors": sorted({r["error"] for r in gdn["raises"]}),
    }
    if engine == "sglang":
        kda_packed = kda is not None and "packed_decode" in decode["kda_layer_calls"]
        condition = decode["kda_packed_condition"] or ""
        rule = decode["sm100_bf16_state"]
        out.update({
            "kda_grids": kda["grids"] if kda_packed else [],
            "kda_takes_lower_bound": kda_packed and "lower_bound" in kda["parameters"],
            "kda_skip_at_or_below": kda["skip_at_or_below"] if kda_packed else None,
            "kda_beta": kda["beta"] if kda_packed else None,
            "kda_wrapper_messages": [_normalized(r["message"]) for r in kda["raises"]] if kda_packed else [],
            "kda_decode_kernel": None if kda_packed else "/".join(decode["kda_triton_decode_calls"]),
            "gdn_decode_kernel": None if "packed_decode" in decode["gdn_layer_calls"] else "not the packed decode",
            "kda_fast_path": bool(facts["kda_cuda_fast_path"]),
            "safe_gate_route": ("switch" if "supports_packed_decode_safe_gate" in condition else
                                "unfused" if "lower_bound" in condition or not kda_packed else "packed"),
            "kda_decode_backends": decode["kda_decode_backends"],
            "gpu_decode_rule": None if rule is None else {
                "sm_major": rule["sm_major"], "state_dtype": "bfloat16", "backend": "flashinfer",
                "unless_backend": rule["exempt_backend"],
                "unless_speculative": "speculative_algorithm is None" in rule["condition"]},
            "reserved_slot_zero": facts["first_free_slot"] == 1,
            "packed_decode_env": None, "packed_decode_env_default": None,
        })
    else:
        layers = decode["kda_layer_calls"]
        kda_packed = kda is not None and any("fused_recurrent_kda_packed_decode" in calls for calls in layers.values())
        gdn_layers = decode["gdn_layers"]
        switched = bool(gdn_layers) and all(layer["env_switch"] for layer in gdn_layers.values())
        out.update({
            "kda_grids": kda["grids"] if kda_packed else [],
            "kda_takes_lower_bound": kda_packed and "lower_bound" in kda["parameters"],
            "kda_skip_at_or_below": kda["skip_at_or_below"] if kda_packed else None,
            "kda_beta": kda["beta"] if kda_packed else None,
            "kda_wrapper_messages": [],  # another API: not the contract's (kda_other_api)
            "kda_decode_kernel": "fused_recurrent_kda_packed_decode" if kda_packed else "fused_recurrent_kda",
            "gdn_decode_kernel": None if gdn_layers else "not the packed decode",
            "kda_fast_path": False,
            "safe_gate_route": "unfused",
            "kda_decode_backends": [],
            "gpu_decode_rule": None,
            # Block 0 is vLLM's null block; padding rows point at PAD_SLOT_ID (-1) or NULL_BLOCK_ID (0).
            "reserved_slot_zero": False,
            "padding_row_value": -1 if facts["padding_sentinel"] == ["PAD_SLOT_ID"] else 0,
            "packed_decode_env": decode["env_switch"]["name"] if switched else None,
            "packed_decode_env_default": decode["env_switch"]["default"] if switched else None,
        })
    out["flags"] = flags
    return out


def expected_state_dtypes(facts: dict[str, Any]) -> dict[str, Any]:
    """The profile's state dtype defaults the release's state dtype code implies (none where it was not found)."""
    found = facts.get("state_dtypes")
    if found is None:
        return {}
    if facts["engine"] == "sglang":
        return {"default_state_dtype": found["ssm_default"], "conv_dtype": found["conv_default"],
                "config_ssm_dtype_names": sorted([name, dtype] for name, dtype in found["config_names"].items()),
                "config_ssm_dtype_fails": found["unknown_config_raises"]}
    # vLLM: `--mamba-cache-dtype` and `--mamba-ssm-cache-dtype` default to "auto" (the flags, verified above): the
    # conv state in the model dtype, the SSM state in the conv state's.
    model = found["conv_from_cache_dtype"]
    return {"default_state_dtype": "model" if model and found["ssm_auto_follows_conv"] else None,
            "conv_dtype": "model" if model else None, "kda_state_dtype": found["kda_state"],
            "kda_state_dtype_fixed": not found["kda_reads_ssm_cache_dtype"]}


def expected_targets(facts: dict[str, Any]) -> dict[str, list[str]]:
    """What a guard or a capture wraps in the release, from its decode sites: the packed-decode definitions that
    some module imports (a definition nothing imports is never called: vLLM's GLM-5-Next copy of the GDN decode),
    split by API (the contract's arguments, or another argument list: vLLM's own KDA packed op), and the classes
    whose instances keep one."""
    sites = facts["decode_sites"]
    used = [item for item in sites["definitions"] if item["target"] in sites["imported"]]
    contract = [item["target"] for item in used if all(name in item["parameters"] for name in CONTRACT_ARGUMENTS)]
    return {"decode_targets": sorted(contract),
            "other_api_targets": sorted(item["target"] for item in used if item["target"] not in contract),
            "instance_holders": list(sites["holders"])}


# Steps of the rule registry's wrapper orders that are not a `raise ValueError` of the wrapper: the K = 0 division
# (GDR227) and the KDA wrapper's switch to its CUDA kernel (GDR226).
_NOT_RAISES = frozenset({"GDR226", "GDR227"})


def _registry_messages(variant: str) -> list[str]:
    """The messages of the rules that mirror the reference wrapper's raises, in the wrapper's order."""
    from gdr_check.base.registry import RULE_SET, RULES
    from gdr_check.checks import all_rules  # noqa: F401  (importing registers every rule)

    codes = [code for step in RULE_SET.wrapper_orders[variant]
             for code in ((step,) if isinstance(step, str) else step) if code not in _NOT_RAISES]
    return [_normalized(RULES[code].message) for code in codes]


def profile_facts(profile: Any, engine_kind: str) -> dict[str, Any]:
    """The same keys as `expected`, read from a gdr-check profile (and, for the wrapper messages, from the
    contract's rule registry: the rules gdr-check reports with the wrapper's own messages)."""
    gdn_messages, kda_messages = _registry_messages("gdn"), _registry_messages("kda")
    contract_kda = profile.kda_decode_kernel is None
    rule = profile.gpu_decode_rule
    out: dict[str, Any] = {
        "kernel_file": profile.kernel_file,
        "skip_at_or_below": profile.skip_at_or_below,
        "gdn_beta_rounding": profile.gdn_beta_rounding,
        "gdn_grids": _lists(profile.gdn_grids),
        "grid_dim_limit": profile.grid_dim_limit,
        "gdn_split_condition": "B * HV > 65535" if len(profile.gdn_grids) > 1 else None,
        "gdn_wrapper_messages": gdn_messages,
        "gdn_wrapper_errors": ["ValueError"],
        "kda_grids": _lists(profile.kda_grids),
        "kda_takes_lower_bound": profile.kda_takes_lower_bound,
        # every KDA packed op gdr-check knows skips like the engine's GDN decode and keeps beta in fp32
        "kda_skip_at_or_below": profile.skip_at_or_below if profile.kda_grids else None,
        "kda_beta": "fp32" if profile.kda_grids else None,
        "kda_wrapper_messages": kda_messages if contract_kda and profile.kda_grids else [],
        "kda_decode_kernel": profile.kda_decode_kernel,
        "gdn_decode_kernel": profile.gdn_decode_kernel,
        "kda_fast_path": profile.kda_fast_path is not None,
        "safe_gate_route": profile.safe_gate_route,
        "kda_decode_backends": sorted(profile.kda_decode_backends),
        "gpu_decode_rule": None if rule is None else {
            "sm_major": rule.sm_major, "state_dtype": rule.state_dtype, "backend": rule.backend,
            "unless_backend": rule.unless_backend, "unless_speculative": rule.unless_speculative},
        "reserved_slot_zero": profile.reserved_slot_zero,
        "packed_decode_env": profile.packed_decode_env,
        "packed_decode_env_default": profile.packed_decode_env_default,
        "default_state_dtype": profile.default_state_dtype,
        "conv_dtype": profile.conv_dtype,
        "kda_state_dtype": profile.kda_state_dtype,
        "kda_state_dtype_fixed": profile.kda_state_dtype_fixed,
        "config_ssm_dtype_names": sorted([name, dtype] for name, dtype in profile.config_ssm_dtype_names),
        "config_ssm_dtype_fails": profile.config_ssm_dtype_failure is not None,
        "decode_targets": sorted(profile.decode_targets),
        "other_api_targets": sorted(profile.other_api_targets),
        "instance_holders": sorted(profile.instance_holders),
        "flags": sorted(({"name": f.name, "choices": None if f.choices is None else list(f.choices),
                          "default": f.default, "replaced_by": f.replaced_by, "no_effect": f.no_effect}
                         for f in profile.flags), key=lambda flag: flag["name"]),
    }
    if engine_kind == "vllm":
        out["padding_row_value"] = -1 if profile.skip_at_or_below < 0 else 0
    return out


def compare(facts: dict[str, Any]) -> list[str]:
    """Every field where the profile selected by the facts' `engine@version` says other than the wheel, and every
    flag a profile's role names that the release lacks or ignores."""
    from gdr_check.engines.profiles import UnknownEngineError, profile_for

    try:
        profile = profile_for(f"{facts['engine']}@{facts['version']}")
    except UnknownEngineError as error:
        return [f"{facts['engine']} {facts['version']}: {error}"]
    want = {**expected(facts), **expected_targets(facts), **expected_state_dtypes(facts)}
    have = profile_facts(profile, facts["engine"])
    problems = [f"{profile.spec} ({facts['engine']} {facts['version']}): {key}: profile says {have.get(key)!r}, "
                f"the wheel {want[key]!r}" for key in sorted(want) if have.get(key) != want[key]]
    flags = {flag["name"]: flag for flag in want["flags"]}
    for role in ("state_dtype_flag", "conv_dtype_flag", "cache_size_flag", "memory_ratio_flag",
                 "scheduler_strategy_flag"):
        name = getattr(profile, role)
        if name is None:
            continue
        flag = flags.get(name)
        if flag is None or flag["no_effect"] or flag["replaced_by"]:
            problems.append(f"{profile.spec} ({facts['engine']} {facts['version']}): {role} {name!r} is "
                            f"{'not a flag of the release' if flag is None else 'deprecated there'}")
    switch = profile.safe_gate_packed_switch
    if switch is not None:
        flag_name, _, value = switch.partition(" ")
        flag = flags.get(flag_name)
        if flag is None or (flag["choices"] is not None and value not in flag["choices"]):
            problems.append(f"{profile.spec}: safe_gate_packed_switch {switch!r} is no setting of the release")
    return problems


# --- command line ------------------------------------------------------------------------------------------------
def _spec_of(engine: str, version: str) -> str:
    from gdr_check.engines.profiles import UnknownEngineError, profile_for

    try:
        return profile_for(f"{engine}@{version}").spec
    except UnknownEngineError:
        return "none"


def _releases(arguments: argparse.Namespace) -> Iterator[tuple[str, str]]:
    if arguments.newest:
        for engine in ("sglang", "vllm"):
            version, why = newest_release(engine, index_newest(engine))
            print(why, file=sys.stderr)
            yield engine, version
        return
    for spec in (matrix() if arguments.all else arguments.releases):
        engine, at, version = spec.partition("@")
        if engine not in ("sglang", "vllm") or not at or not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version):
            raise WheelError(f"{spec!r}: expected sglang@X.Y.Z or vllm@X.Y.Z")
        yield engine, version


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", help="engine@version, e.g. sglang@0.5.23 vllm@0.33.0")
    parser.add_argument("--all", action="store_true", help="every release of the matrix")
    parser.add_argument("--newest", action="store_true",
                        help="the newest release of each engine (the index's, else the newest verified)")
    parser.add_argument("--wheel", type=Path, help="the wheel of the one release given (no download)")
    parser.add_argument("--wheels", type=Path, action="append", default=[],
                        help="a folder of wheels already downloaded: a release found there is not downloaded")
    parser.add_argument("--download-dir", type=Path, help="where wheels are downloaded (default: a temp dir)")
    parser.add_argument("--write", type=Path, help="store the facts as DIR/<engine>-<version>.json")
    parser.add_argument("--delete-vllm", action="store_true", help="delete each vLLM wheel once it is read")
    parser.add_argument("--table", action="store_true", help="print the result as a Markdown table row each")
    arguments = parser.parse_args(argv)
    try:
        releases = list(_releases(arguments))
        if not releases:
            parser.error("name a release (engine@version), --all or --newest")
        if arguments.newest and (arguments.all or arguments.releases):
            parser.error("--newest takes no releases and no --all")
        if arguments.wheel is not None and len(releases) != 1:
            raise WheelError("--wheel reads one release: name exactly one")
        problems: list[str] = []
        rows: list[str] = []
        with tempfile.TemporaryDirectory() as scratch:
            for engine, version in releases:
                if arguments.wheel is not None:
                    if not arguments.wheel.is_file():
                        raise WheelError(f"{arguments.wheel}: no such wheel")
                    wheel = arguments.wheel
                else:
                    wheel = download(engine, version, (arguments.download_dir or Path(scratch)) / f"{engine}-{version}",
                                     arguments.wheels)
                facts = extract(engine, version, wheel)
                if (arguments.delete_vllm and engine == "vllm" and arguments.wheel is None
                        and not any(wheel.parent == folder for folder in arguments.wheels)):
                    wheel.unlink()
                if arguments.write is not None:
                    arguments.write.mkdir(parents=True, exist_ok=True)
                    (arguments.write / f"{engine}-{version}.json").write_text(
                        json.dumps(facts, indent=1, sort_keys=False) + "\n", encoding="utf-8")
                found = compare(facts)
                problems += found
                files = hashlib.sha256(json.dumps(facts["files"], sort_keys=True).encode()).hexdigest()[:12]
                rows.append(f"| {engine} {version} | {_spec_of(engine, version)} | "
                            f"`{facts['wheel_sha256'][:12]}` | {len(facts['files'])} files, `{files}` | "
                            f"{'agrees' if not found else f'{len(found)} disagreements'} |")
                print(f"{engine} {version}: {'agrees with the profile' if not found else 'DISAGREES'}",
                      file=sys.stderr)
    except WheelError as error:
        print(f"verify_engine_profiles: {error}", file=sys.stderr)
        return 2
    if arguments.table:
        print(f"Verified {datetime.date.today().isoformat()}:\n")
        print("| release | profile | wheel sha256 | files read (sha256 of their hashes) | result |")
        print("|---|---|---|---|---|")
        print("\n".join(rows))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
