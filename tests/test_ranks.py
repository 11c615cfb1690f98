"""`gdr-check dry-run --ranks all`: the sharding plan (torch-free) and end-to-end runs of every TP rank.

End-to-end runs go through the real CLI: one `python -m gdr_check.pipeline.dryrun.rank_worker` process per rank, gloo
on the CPU under the Triton interpreter, tiny sizes (H=2, HV=4 / H=HV=4, K=V=16; batch 1, one step). The
mis-sharding and fault runs install their faults in the rank processes by monkeypatching (child_faults.py).
The launcher's timeout and kill paths are tested with a stand-in worker module.
"""

from __future__ import annotations

import importlib.util
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

import child_faults
from checkpoint_builders import (
    kimi_config,
    kimi_tensors,
    qwen3_5_config,
    qwen3_next_config,
    qwen_tensors,
    write_checkpoint,
)
from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment
from gdr_check.models.sharding import LayerDims, find_misshards, ranges, sharding_plan
from gdr_check.pipeline.dryrun import ranks as launcher
from gdr_check.pipeline.dryrun.plan import plan_for
from gdr_check.pipeline.model_check import check_model
from misshardings import inject

MISSHARD = child_faults.RANKS_MISSHARD
FAULT = child_faults.RANKS_FAULT
REPORT_SCHEMA = json.loads((resources.files("gdr_check") / "schema" / "report-v1.json").read_text(encoding="utf-8"))
SMALL = ("--device", "cpu", "--batch", "1", "--steps", "1", "--ranks", "all")


# -- the sharding plan -------------------------------------------------------------------------------------------

# The torch-free CI runs (Python 3.10/3.13, dependency floors) install no kernel extra: the rank processes need it.
KERNEL_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "triton", "numpy"))
needs_kernel_extra = pytest.mark.skipif(not KERNEL_EXTRA, reason="the kernel extra (torch, triton) is not installed")

def test_fused_qkvz_plan_takes_key_head_groups_and_reorders_them():
    d = LayerDims(H=2, HV=4, K=2, V=3)  # group G=2: per key head [q 2 | k 2 | v 6 | z 6] = 16 columns
    plan = sharding_plan("gdn-fused-qkvz", "gdn", d, 2)
    qkv = plan.tensors["mixed_qkv"]
    assert qkv.source_width == 32
    assert qkv.columns[0] == (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    assert qkv.columns[1] == (16, 17, 18, 19, 20, 21, 22, 23, 24, 25)
    assert plan.unsharded().tensors["mixed_qkv"].columns[0] == (0, 1, 16, 17, 2, 3, 18, 19, *range(4, 10),
                                                                *range(20, 26))
    # in_proj_ba: [b G | a G] per key head
    assert plan.tensors["b"].columns == ((0, 1), (4, 5))
    assert plan.tensors["a"].columns == ((2, 3), (6, 7))


def test_split_and_kda_plans_slice_each_part_and_the_gate_by_hv_times_k():
    d = LayerDims(H=2, HV=4, K=2, V=3)
    split = sharding_plan("gdn-split-qkv", "gdn", d, 2)
    assert split.tensors["mixed_qkv"].columns[1] == (2, 3, 6, 7, 14, 15, 16, 17, 18, 19)
    assert split.tensors["a"].columns == ((0, 1), (2, 3))
    kda = sharding_plan("kda", "kda", LayerDims(H=4, HV=4, K=2, V=2), 2)
    assert kda.tensors["a"].columns == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert kda.tensors["dt_bias"].columns == kda.tensors["a"].columns
    assert kda.tensors["A_log"].columns == ((0, 1), (2, 3))


def test_ranges():
    assert ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7–8"


@pytest.mark.parametrize("kind, layout, variant, expected", [
    ("a-head-block", "gdn-fused-qkvz", "gdn",
     ["rank 1 received value heads 0–1 of `a` but holds value heads 2–3 of the pool"]),
    ("unsliced-A_log", "gdn-split-qkv", "gdn",
     [("rank 0 received 4 entries of `A_log` (value heads 0–3: unsliced) where its kernel takes 2; the kernel reads "
       "the first 2, value heads 0–1, but the rank holds value heads 0–1 of the pool"),
      ("rank 1 received 4 entries of `A_log` (value heads 0–3: unsliced) where its kernel takes 2; the kernel reads "
       "the first 2, value heads 0–1, but the rank holds value heads 2–3 of the pool")]),
    ("kda-gate-by-hv", "kda", "kda",
     [("rank 1 received columns 2–9 (value heads 0–2, cut mid-head) of `a` but holds value heads 2–3 of the pool: "
       "its block starts at column 2, not on a head boundary of 4 columns (sliced by HV instead of HV*K)"),
      ("rank 1 received columns 2–9 (value heads 0–2, cut mid-head) of `dt_bias` but holds value heads 2–3 of the "
       "pool: its block starts at column 2, not on a head boundary of 4 columns (sliced by HV instead of HV*K)")]),
    ("unsplit-qkv", "gdn-split-qkv", "gdn",
     [("rank 0 received the wrong columns of `mixed_qkv`: its k columns hold q of key head 1 (expected k of key "
       "head 0); its v columns hold k of key heads 0–1 (expected v of value heads 0–1); the rank holds value heads "
       "0–1 of the pool"),
      ("rank 1 received the wrong columns of `mixed_qkv`: its q columns hold v of value head 0 (expected q of key "
       "head 1); its k columns hold v of value head 1 (expected k of key head 1); the rank holds value heads 2–3 "
       "of the pool")]),
])
def test_each_misshard_is_named(kind, layout, variant, expected):
    dims = LayerDims(H=4, HV=4, K=4, V=4) if variant == "kda" else LayerDims(H=2, HV=4, K=4, V=4)
    correct = sharding_plan(layout, variant, dims, 2)
    assert find_misshards(correct, correct) == []
    assert [m.detail for m in find_misshards(correct, inject(correct, kind))] == expected


# -- end to end through the CLI ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ranks")
    gdn = qwen3_next_config(layers=4, H=2, HV=4, K=16, V=16)
    split = qwen3_5_config(layers=4, H=4, HV=8, K=16, V=16)
    kda = kimi_config(layers=4, H=4, D=16)
    return {
        "gdn": write_checkpoint(root / "gdn", gdn, qwen_tensors(gdn)),
        "split": write_checkpoint(root / "split", split, qwen_tensors(split)),
        "kda": write_checkpoint(root / "kda", kda, kimi_tensors(kda)),
    }


def run_json(capsys, *args: str) -> tuple[int, dict]:
    """The `--ranks all` JSON document, valid against report-v1.json (it lacked the check's own record: model,
    deployment, shapes, call, pools, memory)."""
    code = main(["dry-run", *args, *SMALL, "--output-format", "json"])
    document = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)
    return code, document


def messages(document: dict, code: str) -> list[str]:
    return [d["message"] for d in document["diagnostics"] if d["code"] == code]


@needs_kernel_extra
@pytest.mark.parametrize("model, tp, engine", [("gdn", 2, "sglang"), ("kda", 4, "sglang"), ("split", 2, "vllm")])
def test_every_rank_matches_the_unsharded_layer(capsys, checkpoints, model, tp, engine):
    code, document = run_json(capsys, str(checkpoints[model]), "--tp", str(tp), "--engine", engine, "--weights")
    assert code == 0, document["diagnostics"]
    assert document["passed"] is True
    assert set(document["weights"]["tensors"]) == {"A_log", "dt_bias"}
    assert document["transport"]["backend"] == "gloo" and document["transport"]["device"] == "cpu"
    assert [r["rank"] for r in document["per_rank"]] == list(range(tp))
    assert document["slowest_rank"] in range(tp)
    assert all(r["memory_bytes"] > 0 for r in document["per_rank"])
    assert [step["step"] for step in document["steps"]] == list(range(1, len(document["steps"]) + 1))  # as one rank
    if model == "gdn":  # bf16 arguments under the interpreter: said as the one-rank dry-run says it
        assert [d["code"] for d in document["diagnostics"] if d["code"] in ("GDR321", "GDR322")][:1] == ["GDR321"]
    run = document["steps"][0]["kernels"]["builtin"]
    assert run["state"]["error"] <= 1e-5 and run["state"]["passed"] and run["output"]["passed"]
    HV = document["layer"]["HV"]
    assert [r["heads"] for r in run["per_rank"]] == [[r * HV // tp, (r + 1) * HV // tp - 1] for r in range(tp)]


def test_vllm_kda_runs_nothing(capsys, checkpoints):
    # The same GDR314 as the one-rank dry-run: exit 1 with the error that says why, in the text and the JSON.
    code = main(["dry-run", str(checkpoints["kda"]), "--tp", "2", "--engine", "vllm", *SMALL])
    out = capsys.readouterr().out
    assert code == 1
    assert ("error[GDR314]: nothing to dry-run: under vLLM 0.33 the decode step calls its own "
            "`fused_recurrent_kda_packed_decode` (another argument list), not the contract's packed decode "
            "kernel") in out
    assert "dry-run --ranks all not launched: nothing to run (GDR314); 1 error(s), 0 warning(s), 0 note(s)" in out
    code, document = run_json(capsys, str(checkpoints["kda"]), "--tp", "2", "--engine", "vllm")
    assert code == 1 and document["passed"] is False and document["refused_because"] == ["GDR314"]
    assert [d["code"] for d in document["diagnostics"]] == ["GDR314"] and document["processes"] is None


@needs_kernel_extra
def test_misshardings_and_nan_are_named_from_real_ranks(capsys, checkpoints, monkeypatch):
    child_faults.enable(monkeypatch)
    monkeypatch.setenv(MISSHARD, "a-head-block,unsliced-A_log,unsplit-qkv")
    monkeypatch.setenv(FAULT, "0:nan")  # one run for both: each rank process costs seconds
    code, document = run_json(capsys, str(checkpoints["split"]), "--tp", "2")
    assert code == 1
    named = messages(document, "GDR332")
    assert "mis-sharded `a` on rank 1: rank 1 received value heads 0–3 of `a` but holds value heads 4–7 of the pool" \
        in named
    assert sum("`A_log` (value heads 0–7: unsliced)" in m for m in named) == 2
    assert sum(m.startswith("mis-sharded `mixed_qkv` on rank") for m in named) == 2
    [mismatch] = messages(document, "GDR331")
    assert "match no reference head" in mismatch
    assert messages(document, "GDR333") == [
        "rank 0 of 2 returned NaN at step 1 (64 in `out`, 0 in the state of touched slots, gdr-check kernel)"]


@needs_kernel_extra
def test_kda_gate_sliced_by_hv_is_named(capsys, checkpoints, monkeypatch):
    child_faults.enable(monkeypatch)
    monkeypatch.setenv(MISSHARD, "kda-gate-by-hv")
    code, document = run_json(capsys, str(checkpoints["kda"]), "--tp", "2")
    assert code == 1
    assert messages(document, "GDR332")[0] == (
        "mis-sharded `a` on rank 1: rank 1 received columns 2–33 (value heads 0–2, cut mid-head) of `a` but holds "
        "value heads 2–3 of the pool: its block starts at column 2, not on a head boundary of 16 columns (sliced "
        "by HV instead of HV*K)")
    [mismatch] = messages(document, "GDR331")
    assert "computed by rank 1" in mismatch


@needs_kernel_extra
def test_a_rank_that_raises_is_named_and_the_others_stopped(capsys, checkpoints, monkeypatch):
    child_faults.enable(monkeypatch)
    monkeypatch.setenv(FAULT, "1:raise")
    code, document = run_json(capsys, str(checkpoints["gdn"]), "--tp", "2")
    assert code == 1
    [failed] = messages(document, "GDR333")
    assert failed.startswith("rank 1 of 2 raised RankFault: simulated failure on rank 1")
    assert document["processes"]["first_failure"] == 1


def test_ranks_without_torch_is_one_environment_error_not_a_ranks_failure(capsys, checkpoints, monkeypatch):
    """As the one-rank dry-run says it (exit 2), not as rank 1 of 2 raising ModuleNotFoundError (exit 1)."""
    from gdr_check.pipeline.dryrun import rank_run as ranks_api

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(ranks_api.importlib.util, "find_spec",
                        lambda name, *rest: None if name == "torch" else real_find_spec(name, *rest))
    monkeypatch.setattr(ranks_api, "run_ranks", lambda *args, **kwargs: pytest.fail("launched"))
    assert main(["dry-run", str(checkpoints["gdn"]), "--tp", "2", "--ranks", "all"]) == 2
    assert capsys.readouterr().err == ("error: torch is not importable (No module named 'torch'); the dry-run needs "
                                       "`pip install 'gdr-check[kernel]'`\n")


def test_bad_ranks_value_is_a_usage_error(capsys, checkpoints):
    assert main(["dry-run", str(checkpoints["gdn"]), "--ranks", "some"]) == 2
    assert "expected one or all, got 'some'" in capsys.readouterr().err


@pytest.mark.parametrize(("ranks", "weights", "message"), [
    ("some", False, "ranks: expected one or all, got 'some'"),
    ("one", True, "weights: --weights is read by --ranks all"),
    ("all", "yes", "weights: expected True or False, got 'yes'"),
])
def test_library_dry_run_refuses_what_the_cli_refuses(checkpoints, monkeypatch, ranks, weights, message):
    """In the CLI's words, before anything runs (it used to run the one-rank dry-run, `weights` ignored)."""
    from gdr_check.pipeline.dryrun import driver as runner_api
    from gdr_check.pipeline.dryrun import entry as api

    monkeypatch.setattr(runner_api, "dry_run_check", lambda *args, **kwargs: pytest.fail("ran"))
    with pytest.raises(api.DryRunOptionError) as raised:
        api.dry_run(str(checkpoints["gdn"]), tp=4, batch=2, steps=1, device="cpu", ranks=ranks, weights=weights)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == message


def test_cli_refuses_weights_without_ranks_all(capsys, checkpoints):
    assert main(["dry-run", str(checkpoints["gdn"]), "--weights"]) == 2
    assert "--weights is read by --ranks all" in capsys.readouterr().err


# -- the launcher's stop paths, with a stand-in worker (no torch) --------------------------------------------------
STAND_IN = '''
import json, os, sys, time
rank = int(os.environ["RANK"])
print(json.dumps({"rank": rank, "event": "step", "step": 0}), flush=True)
behaviour = os.environ["STAND_IN"]
if behaviour == "abort" and rank == 1:
    os.abort()
if behaviour == "hang" and rank == 1:
    time.sleep(60)
print(json.dumps({"rank": rank, "event": "gather", "step": 0}), flush=True)
time.sleep(60)  # stuck in the collective
'''


@pytest.mark.parametrize("behaviour", ["abort", "hang"])
def test_launcher_stops_every_rank(tmp_path, monkeypatch, behaviour):
    (tmp_path / "stand_in_worker.py").write_text(STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("STAND_IN", behaviour)
    monkeypatch.setattr(launcher, "WORKER_MODULE", "stand_in_worker")
    monkeypatch.setattr(launcher, "GRACE_S", 0.2)
    plan = plan_for(check_model("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=2)), device="cpu")
    outcome = launcher.run_ranks(plan, layout="gdn-split-qkv", tp=3, timeout=1.0 if behaviour == "hang" else 30.0)
    assert outcome.wall_s < 10
    assert outcome.result is None
    assert all(rank.returncode is not None for rank in outcome.ranks)
    if behaviour == "abort":
        assert outcome.first_failure == 1 and not outcome.timed_out
        assert outcome.ranks[1].how() == "was killed by SIGABRT (started step 0)"
        assert {r.rank for r in outcome.ranks if r.killed} == {0, 2}
    else:
        assert outcome.timed_out
        behind = min(outcome.ranks, key=lambda r: len(r.events))
        assert behind.rank == 1 and behind.last_event == "started step 0"



# -- --weights: one layer's real parameters from the safetensors bytes ---------------------------------------------
def _fill(where: dict, values: list[float]) -> None:
    """Write `values` into the tensor's byte span, in its dtype."""
    import torch

    data = torch.tensor(values, dtype=getattr(torch, where["dtype"])).view(torch.uint8).numpy().tobytes()
    assert len(data) == where["nbytes"]
    with open(where["path"], "r+b") as handle:
        handle.seek(where["offset"])
        handle.write(data)


@needs_kernel_extra
def test_weights_are_read_from_the_header_offsets(checkpoints):
    from gdr_check.pipeline.dryrun.rank_worker import _real_parameter
    from gdr_check.pipeline.dryrun.weights import layer_parameters

    check = check_model(str(checkpoints["kda"]), Deployment(tp=2))
    located = layer_parameters(check)
    assert located["layer"] == check.model.linear_layers[0]
    a_log, dt_bias = located["tensors"]["A_log"], located["tensors"]["dt_bias"]
    assert a_log["name"].endswith(f"layers.{located['layer']}.self_attn.A_log")
    _fill(a_log, [0.5, 1.0, 1.5, 2.0])
    _fill(dt_bias, [float(i) / 8 for i in range(64)])
    import torch

    assert _real_parameter(a_log, 4, torch.float32).tolist() == [0.5, 1.0, 1.5, 2.0]
    assert _real_parameter(dt_bias, 32, torch.float32).tolist() == [float(i) / 8 for i in range(32)]
    with pytest.raises(ValueError, match="holds 4 values; the layer needs 8"):
        _real_parameter(a_log, 8, torch.float32)


@needs_kernel_extra
@pytest.mark.parametrize(("parameter", "bad", "what"), [("A_log", float("nan"), "NaN"),
                                                        ("dt_bias", float("-inf"), "inf")])
def test_weights_that_are_not_finite_are_refused_before_launching(capsys, tmp_path, monkeypatch, parameter, bad,
                                                                 what):
    """Every rank used to return NaN and GDR331 hinted at mis-sharding; now one line names the tensor and file."""
    from gdr_check.pipeline.dryrun import rank_run as ranks_api
    from gdr_check.pipeline.dryrun.weights import layer_parameters

    config = qwen3_next_config(layers=4, H=2, HV=4, K=16, V=16)
    root = write_checkpoint(tmp_path / "gdn", config, qwen_tensors(config))
    located = layer_parameters(check_model(str(root), Deployment(tp=2)))["tensors"][parameter]
    count = located["shape"][0]
    _fill(located, [0.5] * (count - 2) + [bad, 0.5])
    monkeypatch.setattr(ranks_api, "run_ranks", lambda *args, **kwargs: pytest.fail("launched"))
    code = main(["dry-run", str(root), "--tp", "2", "--ranks", "all", "--weights", "--device", "cpu"])
    assert (code, capsys.readouterr().err) == (2, (
        f"error: --weights: `{located['name']}` in model.safetensors holds {what} (entry {count - 2}): the dry-run "
        "needs finite A_log and dt_bias; check or download the checkpoint again\n"))


def test_weights_need_a_checkpoint(capsys):
    code = main(["dry-run", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "2", "--weights", *SMALL])
    assert code == 2
    assert "--weights needs a safetensors checkpoint" in capsys.readouterr().err


@needs_kernel_extra
def test_the_text_verdict_counts_warnings_and_notes_as_the_one_rank_dry_run_does(capsys, checkpoints):
    code = main(["dry-run", str(checkpoints["gdn"]), "--tp", "2", *SMALL])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert re.fullmatch(r"dry-run --ranks all passed: \d+ step\(s\) on 2 ranks; 0 error\(s\), [1-9]\d* warning\(s\), "
                        r"\d+ note\(s\); \d+\.\d s", lines[-1]), lines[-1]
    assert any(line.startswith("warning[GDR321]: bfloat16 ") for line in lines)
