"""The packed-decode variants as data (`gdr_check.base.variants`): the facts each record holds, read from the
engines' released wheels, and a scan of the package that fails on a new branch on a variant's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gdr_check.base.variants import GDN, KDA, VARIANTS, variant_spec
from gdr_check.engines.profiles import profile_for

SRC = Path(__file__).resolve().parents[1] / "src" / "gdr_check"


# -- the facts ---------------------------------------------------------------------------------------------------
def test_each_variant_is_one_record_by_its_name():
    assert VARIANTS == {"gdn": GDN, "kda": KDA}
    assert [variant_spec(name).label for name in ("gdn", "kda")] == ["GDN", "KDA"]
    with pytest.raises(KeyError):
        variant_spec("mamba2")


def test_layer_facts_match_the_engines_models():
    # sglang 0.5.23 srt/models/kimi_linear.py:559-564 builds `self.self_attn = KimiDeltaAttention(...)` and
    # :385-389 its `dt_bias` with `dtype=torch.float32` (vLLM 0.33 kimi_gdn_linear_attn.py:237-239 alike); :60-64
    # raises `ValueError` when tp does not divide `num_heads`. Qwen3-Next's GDN layer is `linear_attn`, and its
    # `dt_bias` takes the default (model) dtype.
    assert (KDA.mixer, KDA.dt_bias_dtype, KDA.layer_checks_heads) == ("self_attn", "float32", True)
    assert (GDN.mixer, GDN.dt_bias_dtype, GDN.layer_checks_heads) == ("linear_attn", None, False)


@pytest.mark.parametrize("engine,variant,grid_limit", [
    ("sglang@0.5.17", "kda", 65535),  # Triton KDA grid (NV, B*HV) before 0.5.19
    ("sglang@0.5.23", "kda", None),  # (NV, B, HV) from 0.5.19
    ("sglang@0.5.23", "gdn", 65535),  # (NV, B*HV)
    ("vllm@0.18", "gdn", 65535),  # (NV, B*HV) before 0.28
    ("vllm@0.33", "gdn", None),  # split into (NV, HV, B) when B*HV > 65535 from 0.28
])
def test_the_release_grid_limit_is_picked_by_variant(engine: str, variant: str, grid_limit: int | None):
    assert profile_for(engine).decode_of(variant).grid_limit == grid_limit


def test_the_kda_state_is_its_own_and_the_gdn_state_the_engines_ssm_state():
    # vLLM 0.33 mamba_utils.py: `kda_state_dtype` keeps auto at float32 and refuses anything but float32 and
    # bfloat16; `gated_delta_net_state_dtype` is the shared `_mamba_state_dtype` (auto follows the conv dtype).
    kda, gdn = profile_for("vllm@0.33").decode_of("kda"), profile_for("vllm@0.33").decode_of("gdn")
    assert (kda.own_state_dtype, kda.state_dtypes) == ("float32", ("float32", "bfloat16"))
    assert kda.state_dtype_refusal == ("ValueError: KDA recurrent state supports only auto, float32, and bfloat16; "
                                       "got {dtype}")
    assert (gdn.own_state_dtype, gdn.state_dtypes, gdn.state_dtype_refusal) == (None, None, None)


# -- no branches on a variant's name -----------------------------------------------------------------------------
# What code once did with `if model.kind == "kda"` is a field of `VariantSpec` or of `EngineProfile.decode_of`.
# Left: the places where each variant is a different procedure (a kernel, a layer layout, a decode route), each a
# table keyed by the name or one branch, listed here with the reason. A new name branch elsewhere fails the scan.
_N = "(?:gdn|kda)"
_Q = rf"['\"]{_N}['\"]"
_BRANCH = re.compile(
    rf"(?:==|!=)\s*{_Q}|{_Q}\s*(?:==|!=)"  # kind == "kda", "gdn" != variant
    rf"|\bin\s*[(\[{{]\s*{_Q}"  # kind in ("gdn", ...)
    rf"|{_Q}\s*:(?!\S)"  # {"gdn": ...}: a table keyed by the name
    r"|\b(?:kind|variant)\.upper\(\)"  # the name made into a label (`VariantSpec.label`)
    r"|(?:\bis(?:\s+not)?|==|!=)\s*(?:GDN|KDA)\s*(?:[:)\],]|$|\band\b|\bor\b|\belse\b)"  # spec is KDA
)
ALLOWED: dict[str, dict[str, str]] = {
    "engines/profiles.py": {
        'if variant == "kda":': "decode_of: the one place that maps a name to the profile's gdn_*/kda_* fields",
    },
    "engines/launch_flags.py": {
        'if variant == "gdn" else False': "prefill_checkpoints: the same, for the launch defaults' GDN field",
    },
    "kernel/ops.py": {
        "CHECKED:": "each variant's kernels are its own op folder (kernel/gdn, kernel/kda)",
        "LAUNCHERS:": "each variant's kernels are its own op folder",
        '"gdn": naive_packed_decode': "each variant's float64 reference is its own op folder's",
    },
    "kernel/tiling.py": {
        "_TABLES =": "tile configurations measured per kernel",
    },
    "checks/hotpath.py": {
        "CONTRACT_CHECKS:": "the contract check of each kernel's own signature",
    },
    "deployment/decode_path.py": {
        '"gdn": _gdn_path': "the engines route GDN layers (packed-decode switch) and KDA ones (safe gate) apart",
    },
    "models/quant_groups.py": {
        '"gdn": _gdn_projections': "each variant's projection layout in the engines' layers",
    },
    "models/quant_blocks.py": {
        'model.kind != "gdn"': "the FP8 block check models GDN's merged projections only",
    },
    "checks/rules_pasted.py": {
        'model_kind(context) == "kda"': "GDR402 explains KDA's grids (Triton and CUDA kernels) in prose of its own",
    },
}


def _branches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _BRANCH.search(line)]


def test_the_branch_pattern_catches_the_usual_spellings():
    caught = ['if model.kind == "kda":', "x = 1 if variant != 'gdn' else 2", 'if "kda" == ctx.variant:',
              'ok = kind in ("gdn", "kda")', 'TABLE = {"gdn": 2, "kda": 4}', 'label = model.kind.upper()',
              "if spec is KDA:", "return 1 if spec is not GDN else 2"]
    assert _branches("\n".join(caught)) == caught
    kept = ['spec = variant_spec(model.kind)', 'layer i is KDA iff (i+1) is listed', 'variant: str = "gdn"',
            'if self.recorded.variant == self.model.kind:', 'LAYER_KINDS = frozenset({"kda", "gdn"})']
    assert _branches("\n".join(kept)) == []


def test_no_branches_on_a_variant_name_outside_the_listed_procedures():
    found: dict[str, list[str]] = {}
    used: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative == "base/variants.py":
            continue
        allowed = ALLOWED.get(relative, {})
        for line in _branches(path.read_text()):
            match = [snippet for snippet in allowed if snippet in line]
            used.update((relative, snippet) for snippet in match)
            if not match:
                found.setdefault(relative, []).append(line)
    assert found == {}
    # every listed procedure is still there: a stale entry would let a new branch in unseen
    assert {(f, s) for f, snippets in ALLOWED.items() for s in snippets} == used
