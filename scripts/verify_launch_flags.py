#!/usr/bin/env python3
"""Check gdr-check's launch-flag tables against each engine release's own argument definitions.

For a release's wheel, reads every option string its parser defines (sglang: `parser.add_argument("--x", ...)`
literals in `srt/server_args.py` and `srt/arg_groups/`, and the `A[type, Arg(...)]` dataclass fields that
`arg_groups/arg_utils.py:add_cli_args_from_dataclass` turns into `--field-name` and its `aliases`; vLLM:
`add_argument` literals in `vllm/engine/arg_utils.py` and `vllm/entrypoints/openai/cli_args.py`), and compares them
with `gdr_check.engines.launch_flags.table_for_profile(profile_for("<engine>@<version>"))`:

- every spelling the table reads is defined by the release;
- every spelling the table rejects is not defined by the release (argparse refuses it), except an abbreviation
  argparse finds ambiguous, which must be a prefix of two or more defined options;
- every spelling the table maps with a note (an alias the release keeps) is defined.

For sglang it also reads the state-pool facts the profiles carry for `deployment/state_pool.py` (`pool_facts`), and
for both engines the start-up defaults each table carries (`LaunchDefaults`: `defaults_facts`).
It complements scripts/verify_engine_profiles.py (which reads the state-pool flags' choices and defaults into the
profiles the tables are keyed off). Usage:

    python scripts/verify_launch_flags.py WHEEL [WHEEL ...]        # exit 1 on any disagreement
    python scripts/verify_launch_flags.py --write DIR WHEEL ...    # also store DIR/<engine>-<version>.json

The stored facts (tests/data/launch_flags/) let tests/test_launch_flag_tables.py compare every table without the
wheels.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_SGLANG_FILES = ("sglang/srt/server_args.py",)
_SGLANG_DIRS = ("sglang/srt/arg_groups/",)
_VLLM_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")


def _release(path: Path) -> tuple[str, str]:
    match = re.match(r"(sglang|vllm)-(\d+\.\d+\.\d+)", path.name)
    if match is None:
        raise SystemExit(f"{path}: not an sglang or vLLM wheel name")
    return match.group(1), match.group(2)


def _sources(archive: zipfile.ZipFile, engine: str) -> Iterable[tuple[str, ast.Module]]:
    names = set(archive.namelist())
    files = list(_SGLANG_FILES if engine == "sglang" else _VLLM_FILES)
    if engine == "sglang":
        files += sorted(n for n in names if n.startswith(_SGLANG_DIRS) and n.endswith(".py"))
    for name in files:
        if name in names:
            yield name, ast.parse(archive.read(name).decode("utf-8"), filename=name)


def _strings(nodes: Iterable[ast.expr]) -> list[str]:
    return [node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _field_options(node: ast.AnnAssign) -> list[str]:
    """The options of an `A[T, "help"]` / `A[T, Arg(...)]` dataclass field (`add_cli_args_from_dataclass`)."""
    annotation = node.annotation
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name)
            and annotation.value.id in ("A", "Annotated") and isinstance(annotation.slice, ast.Tuple)
            and isinstance(node.target, ast.Name)):
        return []
    meta = annotation.slice.elts[1] if len(annotation.slice.elts) > 1 else None
    name = "--" + node.target.id.replace("_", "-")
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return [name]
    if not (isinstance(meta, ast.Call) and isinstance(meta.func, ast.Name) and meta.func.id == "Arg"):
        return []
    keywords = {keyword.arg: keyword.value for keyword in meta.keywords if keyword.arg}
    no_cli = keywords.get("no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return []
    cli = keywords.get("cli_name")
    if isinstance(cli, ast.Constant) and isinstance(cli.value, str):
        name = cli.value
    aliases = keywords.get("aliases")
    return [name] + (_strings(aliases.elts) if isinstance(aliases, (ast.List, ast.Tuple)) else [])


def defined_options(wheel: Path) -> dict[str, str]:
    """Every option string the release's parser defines -> the file that defines it."""
    engine, _ = _release(wheel)
    found: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as archive:
        for name, tree in _sources(archive, engine):
            for node in ast.walk(tree):
                options: list[str] = []
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "add_argument"):
                    options = [text for text in _strings(node.args) if text.startswith("-")]
                elif isinstance(node, ast.AnnAssign) and engine == "sglang":
                    options = _field_options(node)
                for option in options:
                    found.setdefault(option, name)
    return found


_ARCH_LISTS = ("_MAMBA_EXTRA_BUFFER_ARCHS",)  # sglang arg_groups/overrides.py from 0.5.15


def pool_facts(wheel: Path) -> dict[str, Any] | None:
    """sglang's state-pool facts the profiles carry (`extra_buffer_architectures`, `no_buffer_refuses_overlap`,
    `pool_cap_warns`), read from the wheel: the architectures `auto` may resolve to extra_buffer for (the
    `_MAMBA_EXTRA_BUFFER_ARCHS` set, or 0.5.14's `_support_mamba_cache_extra_buffer` list; none before: `auto` is
    no_buffer), whether an explicit no_buffer asserts the overlap schedule off, whether the cap logs a warning."""
    engine, _ = _release(wheel)
    if engine != "sglang":
        return None
    archs: set[str] = set()
    refuses = warns = False
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith("sglang/srt/") and n.endswith(".py")
                 and ("arg_groups" in n or "server_args" in n or "kv_cache" in n)]
        for name in names:
            text = archive.read(name).decode("utf-8")
            refuses = refuses or "no_buffer do not support overlap schedule" in text
            warns = warns or "max_running_requests is capped to" in text
            if "_MAMBA_EXTRA_BUFFER_ARCHS" not in text and "_support_mamba_cache_extra_buffer" not in text:
                continue
            tree = ast.parse(text, filename=name)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _ARCH_LISTS
                                                         for t in node.targets)):
                    archs |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                              and isinstance(c.value, str)}
                if isinstance(node, ast.FunctionDef) and node.name == "_support_mamba_cache_extra_buffer":
                    for compare_node in ast.walk(node):
                        if isinstance(compare_node, ast.Compare) and isinstance(compare_node.comparators[0], ast.List):
                            archs |= set(_strings(compare_node.comparators[0].elts))
    return {"extra_buffer_architectures": sorted(archs), "no_buffer_refuses_overlap": refuses,
            "pool_cap_warns": warns}


def compare_pool(found: dict[str, Any] | None, profile: Any, described: set[str]) -> list[str]:
    """Disagreements between a profile's state-pool facts and the release's (for the architectures gdr-check
    describes)."""
    if found is None:
        return []
    release = f"{profile.name} {found.get('version', profile.version)}"
    problems = []
    listed = set(found["extra_buffer_architectures"]) & described
    if set(profile.extra_buffer_architectures) != listed:
        problems.append(f"{release}: extra_buffer architectures {sorted(profile.extra_buffer_architectures)} in the "
                        f"profile, {sorted(listed)} in the release")
    for key in ("no_buffer_refuses_overlap", "pool_cap_warns"):
        if getattr(profile, key) != found[key]:
            problems.append(f"{release}: {key} is {getattr(profile, key)} in the profile, {found[key]} in the release")
    return problems


_TIER = re.compile(r"gpu_mem < (\d+) \* 1024:")
_CHUNKED = re.compile(r"chunked_prefill_size\s*=\s*(\d+)")
_MAX_BS = re.compile(r"(?:cuda_graph_max_bs|max_bs)\s*=\s*(\d+)\b")
_SPECULATIVE = re.compile(
    r'if self\.speculative_algorithm == "STANDALONE":[^\n]*\n(?:\s*#[^\n]*\n)*\s*reserved_mem \+= (\d+) \* 1024\s*\n'
    r'\s*elif self\.speculative_algorithm != "NGRAM":[^\n]*\n(?:\s*#[^\n]*\n)*\s*reserved_mem \+= (\d+) \* 1024')
_VLLM_UTILIZATION = re.compile(r"gpu_memory_utilization: float = Field\(default=([\d.]+)")


def _text(archive: zipfile.ZipFile, name: str) -> str:
    return archive.read(name).decode("utf-8") if name in set(archive.namelist()) else ""


def defaults_facts(wheel: Path) -> dict[str, Any]:
    """The start-up defaults a release resolves from the GPU (`LaunchDefaults`), read from its source text.

    sglang (`_handle_gpu_memory_settings`, in srt/server_args.py or srt/arg_groups/memory_hook.py): for each GPU-memory
    tier below 20/35/60/90/160 GiB its chunked prefill size and decode CUDA-graph max batch at TP < 4 and >= 4, and
    the speculative reserve (MiB) for STANDALONE and any other algorithm but NGRAM, where the release adds one.
    vLLM: `--gpu-memory-utilization`'s default (config/cache.py), whether `get_batch_defaults` has the 160 GiB tier
    (engine/arg_utils.py), the capture ceiling on SM100 (config/vllm.py), what the release does with capture sizes
    or sequences above the Mamba blocks (config/compilation.py: a ValueError, a capped list, or nothing) and whether
    the GDN prefill takes FlashInfer checkpoints (`FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`)."""
    engine, _ = _release(wheel)
    with zipfile.ZipFile(wheel) as archive:
        if engine == "sglang":
            text = _text(archive, "sglang/srt/arg_groups/memory_hook.py")
            if "_handle_gpu_memory_settings" not in text or "gpu_mem < 35 * 1024" not in text:
                text = _text(archive, "sglang/srt/server_args.py")
            tiers = []
            marks = list(_TIER.finditer(text))
            for mark, following in zip(marks, marks[1:] + [None], strict=True):
                end = following.start() if following else text.find("B200", mark.end())  # the open tier's comment
                segment = text[mark.end(): end if end > 0 else mark.end()]
                chunked, bs = _CHUNKED.search(segment), _MAX_BS.findall(segment)
                if chunked and bs:
                    tiers.append([int(mark.group(1)), int(chunked.group(1)), int(bs[0]), int(bs[-1])])
            spec = _SPECULATIVE.search(text)
            reserve = [["STANDALONE", int(spec.group(1)) * 1024], ["*", int(spec.group(2)) * 1024]] if spec else []
            return {"graph_tiers": tiers[:5], "speculative_reserve_mib": reserve}
        utilization = _VLLM_UTILIZATION.search(_text(archive, "vllm/config/cache.py"))
        compilation = _text(archive, "vllm/config/compilation.py")
        names = archive.namelist()
        checkpoints = any("FLASHINFER_GDN_CHECKPOINT_ALIGNMENT" in _text(archive, name) for name in names
                          if name.startswith("vllm/model_executor/layers/mamba/gdn/") and name.endswith(".py"))
        return {
            "memory_fraction": float(utilization.group(1)) if utilization else None,
            "seqs_160_gib_tier": "device_memory >= 160 * GiB_bytes" in _text(archive, "vllm/engine/arg_utils.py"),
            "graph_ceiling_sm100": 1024 if "1024 if current_platform.is_device_capability_family(100)"
            in _text(archive, "vllm/config/vllm.py") else 512,
            "mamba_blocks_at_capture": ("refuse" if "exceeds available Mamba cache" in compilation else "cap"
                                        if "adjust_cudagraph_sizes_for_mamba_cache" in compilation else "assert"),
            "gdn_prefill_checkpoints": checkpoints,
        }


def compare_defaults(found: dict[str, Any] | None, table: Any) -> list[str]:
    """Disagreements between a table's `LaunchDefaults` and the release's (none for facts stored before they were
    read)."""
    if not found:
        return []
    defaults, release = table.defaults, f"{table.engine} {table.version}"
    if table.engine == "sglang":
        expected: dict[str, Any] = {
            "graph_tiers": [[tier.below_gib, tier.chunked_prefill, tier.graph_bs_small_tp, tier.graph_bs_large_tp]
                            for tier in defaults.graph_tiers if tier.below_gib is not None],
            "speculative_reserve_mib": [list(item) for item in defaults.speculative_reserve_mib]}
    else:
        expected = {"memory_fraction": defaults.memory_fraction,
                    "seqs_160_gib_tier": any(tier.min_gib == 160 for tier in defaults.seqs_tiers),
                    "graph_ceiling_sm100": defaults.graph_ceiling_sm100,
                    "mamba_blocks_at_capture": defaults.mamba_blocks_at_capture,
                    "gdn_prefill_checkpoints": defaults.gdn_prefill_checkpoints}
    return [f"{release}: {key} is {value!r} in the table, {found.get(key)!r} in the release"
            for key, value in expected.items() if found.get(key) != value]


def facts(wheel: Path, table: Any) -> dict[str, Any]:
    """What the release defines of the spellings `table` names (read, mapped, rejected, abbreviated)."""
    engine, version = _release(wheel)
    options = defined_options(wheel)
    named = sorted({name for flag in table.flags for name in flag.names} | set(table.rejected)
                   | set(table.aliases) | set(table.abbreviations) | set(table.abbreviations.values()))
    return {"engine": engine, "version": version, "wheel": wheel.name, "pool": pool_facts(wheel),
            "defaults": defaults_facts(wheel),
            "defined": {name: options.get(name) for name in named},
            "prefixes": {name: sorted(o for o in options if o.startswith(name) and o != name)
                         for name in sorted(set(table.rejected) | set(table.abbreviations))}}


def compare(found: dict[str, Any], table: Any) -> list[str]:
    """Disagreements between the table and the release's definitions (empty: they agree)."""
    release = f"{found['engine']} {found['version']}"
    defined, prefixes = found["defined"], found["prefixes"]
    named = {name for flag in table.flags for name in flag.names} | set(table.rejected) | set(table.aliases) \
        | set(table.abbreviations) | set(table.abbreviations.values())
    unread = sorted(named - set(defined))
    if unread:  # stored facts older than the table: read the wheel again
        return [f"{release}: not read from the wheel: {', '.join(unread)} (run scripts/verify_launch_flags.py)"]
    problems = []
    for flag in table.flags:
        for name in flag.names:
            if defined.get(name) is None:
                problems.append(f"{release}: the table reads {name} ({flag.setting}), which the release does not "
                                "define")
    for name in table.aliases:
        if defined.get(name) is None:
            problems.append(f"{release}: the table maps {name}, which the release does not define")
    for name, words in table.rejected.items():
        if defined.get(name) is not None:
            problems.append(f"{release}: the table rejects {name}, which the release defines ({defined[name]})")
        elif "ambiguous option" in words and len(prefixes.get(name, [])) < 2:
            problems.append(f"{release}: the table calls {name} ambiguous, but it prefixes {prefixes.get(name)}")
    for short, full in table.abbreviations.items():
        if defined.get(short) is not None:
            continue  # defined in its own right: not an abbreviation, still read
        if defined.get(full) is None or [o for o in prefixes.get(short, []) if o != full]:
            problems.append(f"{release}: {short} is no unique prefix of {full} ({prefixes.get(short)})")
    return problems


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gdr_check.engines.launch_flags import table_for_profile
    from gdr_check.engines.profiles import profile_for
    from gdr_check.models.adapters import ADAPTERS

    described = {name for adapter in ADAPTERS for name in adapter.architectures}

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--write", type=Path, help="store the facts as DIR/<engine>-<version>.json")
    arguments = parser.parse_args(argv)
    failed = False
    for wheel in arguments.wheels:
        engine, version = _release(wheel)
        profile = profile_for(f"{engine}@{version}")
        table = table_for_profile(profile, version)
        found = facts(wheel, table)
        problems = (compare(found, table) + compare_pool(found["pool"], profile, described)
                    + compare_defaults(found["defaults"], table))
        for problem in problems:
            print(problem)
        failed = failed or bool(problems)
        print(f"{engine} {version}: {'disagrees' if problems else 'agrees'} (table {table.version})")
        if arguments.write is not None:
            arguments.write.mkdir(parents=True, exist_ok=True)
            (arguments.write / f"{engine}-{version}.json").write_text(json.dumps(found, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
