"""Table (markdown) and plot (PNG) of a `decode_vs_sglang.py` run, from its JSON.

    python benchmarks/plot_decode.py decode_vs_sglang.json --png docs/decode_vs_sglang.png > table.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

RIVALS = ("sglang", "sglang_cuda", "sglang_helion", "cute")
LABELS = {"ours": "gdr-check", "checked": "gdr-check checked", "sglang": "sglang Triton",
          "sglang_cuda": "sglang CUDA", "sglang_helion": "sglang Helion", "cute": "sglang CuTe DSL",
          "copy": "D2D copy (same bytes)", "slot_copy": "slot-indexed copy (state rows)",
          "slot_copy_plain": "slot-indexed copy, launched plainly"}


def fastest_rival(p: dict[str, Any]) -> tuple[str, float] | None:
    rivals = {k: v for k, v in p["graph_us"].items() if k in RIVALS}
    return min(rivals.items(), key=lambda kv: kv[1]) if rivals else None


def geometry_label(p: dict[str, Any]) -> str:
    return f"{p['model'].split('/')[-1]} tp{p['tp']} ({p['variant'].upper()} H={p['H']}, HV={p['HV']})"


def moved_bytes(p: dict[str, Any], name: str) -> float:
    """Bytes an implementation moves per call: the kernel's count, except the slot copy's (the state rows only,
    read and written)."""
    if not name.startswith("slot_copy"):
        return float(p["bytes"])
    itemsize = 4 if p["state"] == "fp32" else 2
    return 2.0 * p["B"] * p["HV"] * p["V"] * p["K"] * itemsize


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(data: dict[str, Any]) -> str:
    roofline = data["environment"]["copy_roofline_tbps"]
    lines = []
    current = None
    for p in data["points"]:
        label = geometry_label(p)
        if label != current:
            current = label
            lines += ["", f"**{label}**", "",
                      "| state | B | ours µs (spread) | checked µs | sglang Triton µs | sglang CUDA µs | "
                      "sglang Helion µs | CuTe µs | copy µs | slot copy µs (plain) | vs fastest sglang | ours / copy | "
                      "ours / slot copy | checked / ours | "
                      "HBM roofline | eager µs ours / sglang | tiling |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        t, spread, eager = p["graph_us"], p["graph_spread"], p.get("eager_us", {})
        ours = t.get("ours")
        rival = fastest_rival(p)
        speedup = rival[1] / ours if rival and ours else None
        tbps = p["bytes"] / (ours * 1e-6) / 1e12 if ours else None
        bad = [k for k, v in p["verify"].items() if not v["ok"]]
        lines.append(
            f"| {p['state']} | {p['B']} | {fmt(ours)} (±{fmt(100 * spread.get('ours', float('nan')) / 2, '.1f')}%)"
            f" | {fmt(t.get('checked'))} | {fmt(t.get('sglang'))} | {fmt(t.get('sglang_cuda'))}"
            f" | {fmt(t.get('sglang_helion'))} | {fmt(t.get('cute'))}"
            f" | {fmt(t.get('copy'))} | {fmt(t.get('slot_copy'))} ({fmt(t.get('slot_copy_plain'))})"
            f" | {'**' if speedup and speedup >= 1 else ''}{fmt(speedup)}×"
            f"{' (' + LABELS[rival[0]] + ')' if rival and rival[0] != 'sglang' else ''}"
            f"{'**' if speedup and speedup >= 1 else ''} | {fmt(ours / t['copy'] if ours and t.get('copy') else None)}"
            f" | {fmt(ours / t['slot_copy'] if ours and t.get('slot_copy') else None)}"
            f" | {fmt(t['checked'] / ours if ours and t.get('checked') else None, '.3f')}"
            f" | {fmt(tbps / roofline if tbps else None, '.1%')}"
            f" | {fmt(eager.get('ours'), '.1f')} / {fmt(eager.get('sglang'), '.1f')} | {p['config']}"
            f"{' | wrong: ' + ', '.join(bad) if bad else ''} |")
    return "\n".join(lines)


def plot(data: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roofline = data["environment"]["copy_roofline_tbps"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in data["points"]:
        groups.setdefault((geometry_label(p), p["state"]), []).append(p)
    geometries = list(dict.fromkeys(label for label, _ in groups))
    states = list(dict.fromkeys(state for _, state in groups))
    # Rows: per state dtype, time then fraction of the copy roofline; columns: geometries.
    fig, axes = plt.subplots(2 * len(states), len(geometries), figsize=(3.4 * len(geometries), 2.6 * 2 * len(states)),
                             squeeze=False)
    styles = {"ours": ("C0", "o"), "checked": ("C0", "x"), "sglang": ("C1", "s"), "sglang_cuda": ("C2", "^"),
              "sglang_helion": ("C4", "D"), "cute": ("C3", "v"), "copy": ("0.4", ""), "slot_copy": ("0.6", "")}
    for col, geometry in enumerate(geometries):
        for s_index, state in enumerate(states):
            points = sorted(groups.get((geometry, state), []), key=lambda p: p["B"])
            top, bottom = axes[2 * s_index][col], axes[2 * s_index + 1][col]
            for name, (colour, marker) in styles.items():
                xs = [p["B"] for p in points if name in p["graph_us"]]
                if not xs:
                    continue
                times = [p["graph_us"][name] for p in points if name in p["graph_us"]]
                fraction = [moved_bytes(p, name) / (p["graph_us"][name] * 1e-6) / 1e12 / roofline for p in points
                            if name in p["graph_us"]]
                style = {"copy": "--", "slot_copy": "-.", "checked": ":"}.get(name, "-")
                top.plot(xs, times, style, color=colour, marker=marker, label=LABELS[name], markersize=4)
                bottom.plot(xs, fraction, style, color=colour, marker=marker, label=LABELS[name], markersize=4)
            for ax in (top, bottom):
                ax.set_xscale("log", base=2)
                ax.grid(alpha=0.3)
                ax.tick_params(labelsize=7)
            top.set_yscale("log")
            bottom.set_ylim(0, 1.05)
            top.set_title(f"{geometry}\n{state} state", fontsize=8)
            bottom.set_xlabel("B", fontsize=8)
            if col == 0:
                top.set_ylabel("µs per call\n(graph replay, cold L2)", fontsize=8)
                bottom.set_ylabel("fraction of the\ncopy roofline", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in [a for row in axes for a in row]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9)
    env = data["environment"]
    fig.suptitle(f"Packed decode, {env['device']}, torch {env['torch']}, triton {env['triton']}, "
                 f"copy roofline {roofline:.2f} TB/s", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("json")
    parser.add_argument("--png")
    args = parser.parse_args(argv)
    with open(args.json) as handle:
        data = json.load(handle)
    print(table(data))
    if args.png:
        plot(data, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
