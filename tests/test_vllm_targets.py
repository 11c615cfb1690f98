"""The vLLM profile's targets against the source of a real vLLM release (GDR_CHECK_VLLM_PATH: a wheel or a tree).

The release is read as text (tests/vllm_real.py, `packed_decode_sites`): where it defines the packed decodes and
which modules import them by name, following re-exports. Nothing of it is imported, so this runs without torch.
"""

from __future__ import annotations

import pytest

import vllm_real
from gdr_check.call.packed_call import ARGUMENTS
from gdr_check.engines.profiles import profile_for
from gdr_check.pipeline.capture import GDN_FUNCTION, KDA_FUNCTION, _split_target, engine_targets


@pytest.fixture(scope="module")
def sites() -> vllm_real.Sites:
    path = vllm_real.release()
    if path is None:
        pytest.skip("set GDR_CHECK_VLLM_PATH to a vLLM wheel (e.g. 0.33.0) or a tree holding vllm/")
    return vllm_real.packed_decode_sites(path, (GDN_FUNCTION, KDA_FUNCTION))


def _release() -> str:
    """The release GDR_CHECK_VLLM_PATH holds: `vllm@X.Y.Z` from a wheel's name (vllm-X.Y.Z-...whl), else `vllm`."""
    path = vllm_real.release()
    parts = path.name.split("-") if path is not None and path.suffix == ".whl" else []
    return f"vllm@{parts[1]}" if len(parts) > 2 and parts[0] == "vllm" else "vllm"


def _targets(function: str, targets: tuple[str, ...] | None = None) -> set[str]:
    chosen = engine_targets(_release()) if targets is None else targets
    return {module for module, name in map(_split_target, chosen) if name == function}


def _has_contract_api(parameters: list[str]) -> bool:
    return all(name in parameters for name in ARGUMENTS)


def test_every_packed_decode_vllm_can_call_with_the_contracts_api_is_a_target(sites):
    # Each function vLLM imports somewhere, followed back to the module that defines it.
    called = {name: {m for m in sites.reached(name) if _has_contract_api(sites.defined[name][m])}
              for name in (GDN_FUNCTION, KDA_FUNCTION)}
    assert called[GDN_FUNCTION], "vLLM imports no GDN packed decode with the contract's API"
    assert called[GDN_FUNCTION] <= _targets(GDN_FUNCTION)
    # vLLM's KDA packed decodes (Kimi K3's, 0.27 onwards) take another API (raw gates, `state_indices`): the guard
    # cannot check them, and a target would make it import the Kimi K3 model package on entry.
    assert called[KDA_FUNCTION] == set()
    assert all(not _has_contract_api(parameters) for parameters in sites.defined.get(KDA_FUNCTION, {}).values())
    # The release's own KDA packed ops are the profile's other-API targets: known, never wrapped.
    other = _targets(KDA_FUNCTION, profile_for(_release()).other_api_targets)
    assert sites.reached(KDA_FUNCTION) == other and not other & _targets(KDA_FUNCTION)


def test_a_target_module_in_the_release_defines_its_function(sites):
    # A target whose module the release has but which does not define the function there is a stale path.
    for module, name in map(_split_target, engine_targets(_release())):
        if module in sites.modules:
            assert module in sites.defined.get(name, {}), f"{module} has no {name}"


def _uncovered_attribute_reads(sites: vllm_real.Sites, targets: tuple[str, ...] | None = None) -> list[str]:
    """`module.fused_recurrent_..._packed_decode(...)` goes through the defining module's binding, which the guard
    replaces only for targets: if a release reads the name that way anywhere, every definition with the
    contract's API must be a target. The definitions that are not."""
    problems = []
    for name in (GDN_FUNCTION, KDA_FUNCTION):
        if sites.attribute_users.get(name, set()) - set(sites.defined.get(name, {})):
            contract = {m for m, parameters in sites.defined.get(name, {}).items() if _has_contract_api(parameters)}
            problems += sorted(f"{module}:{name}" for module in contract - _targets(name, targets))
    return problems


def test_a_packed_decode_read_as_a_module_attribute_is_a_target_wherever_it_is_defined(sites):
    assert _uncovered_attribute_reads(sites) == []


def test_an_attribute_read_of_a_definition_that_is_no_target_is_found(tmp_path):
    ops = tmp_path / "vllm" / "third_party" / "flash_linear_attention" / "ops"
    ops.mkdir(parents=True)
    parameters = ", ".join([*ARGUMENTS, "use_qk_l2norm_in_kernel=False"])
    (ops / "fused_recurrent.py").write_text(f"def {GDN_FUNCTION}({parameters}):\n    pass\n")
    other = tmp_path / "vllm" / "models" / "other"
    other.mkdir(parents=True)
    (other / "ops.py").write_text(f"def {GDN_FUNCTION}({parameters}):\n    pass\n")
    (other / "layer.py").write_text(f"from vllm.models.other import ops\nops.{GDN_FUNCTION}()\n")
    sites = vllm_real.packed_decode_sites(tmp_path, (GDN_FUNCTION, KDA_FUNCTION))
    # (the tree has the newest releases' layout: the newest profile's targets)
    assert _uncovered_attribute_reads(sites, engine_targets("vllm")) == [f"vllm.models.other.ops:{GDN_FUNCTION}"]
