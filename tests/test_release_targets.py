"""The runtime guard and `capture` wrap the packed decodes of the engine release they are given, where that release
keeps them.

The expected locations come from the releases' wheels: the decode sites scripts/verify_engine_profiles.py read
(tests/data/engine_facts/<engine>-<release>.json: where each packed decode is defined, with which parameters, and
which definitions any module imports), never from the profiles. Stand-in modules with the contract's signature are
installed at every location any of these releases uses (sglang's srt/ and kernels/ layouts, its Helion decode,
vLLM's model_executor/ and third_party/ layouts, vLLM's own KDA op), and each release must wrap exactly its own.
No call is made: what is wrapped is read from the guard's sites and the capture's document (no torch needed).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

import gdr_check
from fake_engine import load_module
from gdr_check.engines.profiles import live_engine
from test_engine_epochs import facts, verifier

RELEASES = ("sglang@0.5.10", "sglang@0.5.13", "sglang@0.5.16", "sglang@0.5.23", "vllm@0.20.0", "vllm@0.27.1",
            "vllm@0.34.0")
CONTRACT = ("mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, "
            "use_qk_l2norm_in_kernel=False, lower_bound=None")
OTHER_API = "mixed_qkv, raw_g, raw_beta, A_log, dt_bias, lower_bound, initial_state, state_indices, scale, out"


def expected(spec: str) -> dict[str, list[str]]:
    """What the release's wheel says is wrapped (`decode_targets`) and left alone (`other_api_targets`)."""
    targets: dict[str, list[str]] = verifier().expected_targets(facts(spec))
    return targets


def every_location() -> dict[str, set[str]]:
    """Module -> the packed decodes any of RELEASES defines there, from their wheels (contract API or other)."""
    modules: dict[str, set[str]] = {}
    for spec in RELEASES:
        for item in facts(spec)["decode_sites"]["definitions"]:
            module, _, function = item["target"].partition(":")
            modules.setdefault(module, set()).add(function)
    return modules


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in sys.modules if n.split(".")[0] in ("sglang", "vllm")]:
        monkeypatch.delitem(sys.modules, name)
    for index, (module, functions) in enumerate(sorted(every_location().items())):
        source = tmp_path / f"stand_in_{index}.py"
        source.write_text("".join(
            f"def {function}({OTHER_API if '.kimi_k3.' in module else CONTRACT}):\n    return None\n\n\n"
            for function in sorted(functions)))
        load_module(monkeypatch, module, source)


def test_every_location_is_a_stand_in():
    # The releases span both sglang layouts, the Helion decode, both vLLM layouts and vLLM's own KDA op.
    assert {module.split(".")[1] for module in every_location()} == {"srt", "kernels", "model_executor",
                                                                      "third_party", "models"}


@pytest.mark.parametrize("spec", RELEASES)
def test_a_guard_wraps_the_packed_decodes_of_the_release_it_is_given(spec: str, stand_ins: None):
    want = expected(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a release whose functions are all found: no warning
        with gdr_check.guard(engine=spec, mode="record") as guard:
            wrapped = sorted(site.target for site in guard.sites)
            for target in want["decode_targets"] + want["other_api_targets"]:
                module, _, function = target.partition(":")
                binding = getattr(sys.modules[module], function)
                assert hasattr(binding, "__gdr_check_guard__") == (target in want["decode_targets"]), target
    assert wrapped == want["decode_targets"] and wrapped
    assert (guard.engine, guard.engine_profile_reason) == (spec, "argument")


@pytest.mark.parametrize("spec", RELEASES)
def test_a_capture_wraps_the_packed_decodes_of_the_release_it_is_given(spec: str, stand_ins: None,
                                                                       tmp_path: Path):
    want = expected(spec)
    with gdr_check.capture(tmp_path / "rec.json", engine=spec) as session:
        pass
    document = session.document()
    patched = sorted(f"{entry['module']}:{entry['function']}" for entry in document["patched"])
    assert patched == want["decode_targets"]
    assert {entry["engine"] for entry in document["patched"]} == {spec}  # the calls' label: the release
    assert [(e["engine"], e["reason"]) for e in document["engine_profiles"]] == [(spec, "argument")]
    assert document["engine_profiles"][0]["profile"] == gdr_check.profile_for(spec).spec


def test_a_release_before_the_packed_decode_has_nothing_to_wrap(stand_ins: None):
    assert expected("sglang@0.5.9")["decode_targets"] == []
    with pytest.warns(RuntimeWarning, match=r"^gdr_check\.guard found no sglang@0\.5\.9 packed-decode function"):
        with gdr_check.guard(engine="sglang@0.5.9", mode="record") as guard:
            pass
    assert guard.sites == []


def test_an_engine_name_takes_the_installed_release(monkeypatch: pytest.MonkeyPatch, stand_ins: None):
    """In a process running sglang 0.5.13, `engine="sglang"` wraps 0.5.13's srt/ functions, not the newest
    layout's; a release given is taken as it is."""
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.5.13" if name == "sglang" else real(name))
    assert live_engine("sglang") == ("sglang@0.5.13", "installed")
    assert live_engine(None) == ("sglang@0.5.13", "installed")
    assert live_engine("sglang@0.5.23") == ("sglang@0.5.23", "argument")
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        wrapped = sorted(site.target for site in guard.sites)
    assert wrapped == expected("sglang@0.5.13")["decode_targets"]
    assert (guard.engine, guard.engine_profile, guard.engine_profile_reason) == (
        "sglang@0.5.13", "sglang@0.5.13", "installed")


def test_without_an_engine_or_an_installed_one_the_default_is_said():
    assert live_engine(None) == ("sglang", "default")
    assert live_engine("vllm") == ("vllm", "argument")


# -- each call is checked against the release's own contract -----------------------------------------------------
@pytest.mark.parametrize("spec", ["sglang@0.5.13", "vllm@0.20.0", "vllm@0.34.0"])
def test_a_guarded_call_is_checked_against_the_releases_contract(spec: str, stand_ins: None):
    """Two rows on 32768 value heads (B*HV = 65536) with slot 0 on a live row: the grid limit fails where the
    release's wheel launches an unsplit (NV, B*HV) grid, and slot 0 is a fault where its allocator reserves it
    (the first free slot is 1); beta's rounding is reported where the wheel's kernel rounds sigmoid(b) to b's
    dtype."""
    pytest.importorskip("torch")
    from contract_calls import gdn_call

    data = facts(spec)
    unsplit = data["gdn_packed"]["grids"] == [["NV", "B*HV"]]
    reserves_zero = data.get("first_free_slot") == 1  # (sglang's allocator; vLLM's block 0 is a null block)
    call = gdn_call(B=2, H=1, HV=32768, K=1, V=1, S=4, slots=(0, 1))
    (target,) = [t for t in expected(spec)["decode_targets"] if "gated_delta" in t]
    module, _, function = target.partition(":")
    with gdr_check.guard(engine=spec, mode="record") as guard:
        getattr(sys.modules[module], function)(**call)
    codes = {d.code for d in guard.diagnostics}
    assert ("GDR244" in codes) == unsplit
    assert ("GDR247" in codes) == (reserves_zero and not unsplit)  # (a refused call launches no slot check)
    assert ("GDR253" in codes) == (data["gdn_packed"]["beta"] == "b.dtype")
    assert guard.calls == 1
