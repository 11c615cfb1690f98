"""`gdr_check.capture()`: records live calls through the engines' import paths, restores everything, writes
atomically. The engines are stand-ins (tests/fake_engine) with the real function names and signatures,
installed under the real module paths for each test."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

import gdr_check
import gdr_check.engines.profiles as profiles
import gdr_check.pipeline.capture as capture_module
from fake_engine import SGLANG_GDN_CALLER, install
from gdr_check.base.report import LIMITS_DOCS_URL
from gdr_check.call.recording import RecordingError, load_recording
from gdr_check.pipeline.capture import Capture, CaptureError

GDN = "fused_recurrent_gated_delta_rule_packed_decode"
KDA = "fused_recurrent_kda_packed_decode"
# Small GDN geometry: B rows, H=2 key heads, HV=4 value heads, K=V=8, S slots.
B, H, HV, K, V, S = 3, 2, 4, 8, 8, 6


def torch_or_skip():
    """torch, or a skip: the torch-free CI runs (no kernel extra) still run the tests that build no tensor."""
    return pytest.importorskip("torch")


def gdn_arguments(*, mixed_qkv=None) -> dict:
    """A GDN call with the engines' awkward-but-valid layouts: gates as column blocks of one fused buffer,
    the pool as one layer's view of a stacked [layers, slots, HV, V, K] pool."""
    torch = torch_or_skip()
    ba = torch.zeros(B, 2 * HV, dtype=torch.bfloat16)
    stacked = torch.zeros(2, S, HV, V, K)
    return dict(
        mixed_qkv=torch.zeros(B, 2 * H * K + HV * V, dtype=torch.bfloat16) if mixed_qkv is None else mixed_qkv,
        a=ba[:, HV:], b=ba[:, :HV], A_log=torch.zeros(HV), dt_bias=torch.zeros(HV, dtype=torch.bfloat16),
        scale=K ** -0.5, initial_state=stacked[1], out=torch.empty(B, 1, HV, V, dtype=torch.bfloat16),
        ssm_state_indices=torch.tensor([4, 1, 2], dtype=torch.int32),
    )


def kda_arguments() -> dict:
    torch = torch_or_skip()
    arguments = gdn_arguments()
    arguments["mixed_qkv"] = torch.zeros(B, 3 * HV * K, dtype=torch.bfloat16)
    arguments["a"] = torch.zeros(B, HV * K, dtype=torch.bfloat16)
    arguments["dt_bias"] = torch.zeros(HV * K)
    return arguments


@pytest.fixture
def engine(monkeypatch):
    return install(monkeypatch)


def read(path) -> dict:
    return json.loads(path.read_text())


def test_records_every_argument_from_a_by_name_call_site(engine, tmp_path):
    path = tmp_path / "rec.json"
    arguments = gdn_arguments()
    with gdr_check.capture(path):
        engine.gdn_caller.forward_decode(**arguments)

    document = read(path)
    assert document["schema_version"] == 1 and document["tool"]["name"] == "gdr-check"
    [entry] = document["calls"]
    assert (entry["function"], entry["engine"], entry["variant"]) == (GDN, "sglang", "gdn")
    assert entry["caller"]["module"] == SGLANG_GDN_CALLER and entry["caller"]["function"] == "forward_decode"
    call = entry["call"]
    assert call["mixed_qkv"]["shape"] == [B, 2 * H * K + HV * V] and call["mixed_qkv"]["dtype"] == "bfloat16"
    assert call["a"]["shape"] == [B, HV] and call["a"]["stride"] == [2 * HV, 1]
    assert call["a"]["offset"] == HV and call["a"]["storage"] == call["b"]["storage"]
    assert call["initial_state"]["shape"] == [S, HV, V, K]
    assert call["initial_state"]["stride"] == [HV * V * K, V * K, K, 1]
    assert call["initial_state"]["offset"] == S * HV * V * K  # layer 1 of the stacked pool
    assert call["initial_state"]["dtype"] == "float32" and call["A_log"]["dtype"] == "float32"
    assert call["ssm_state_indices"] == {**call["ssm_state_indices"], "shape": [B], "dtype": "int32",
                                         "values": [4, 1, 2]}
    assert call["scale"] == pytest.approx(K ** -0.5) and call["use_qk_l2norm_in_kernel"] is True
    holders = {h for p in document["patched"] if p["function"] == GDN and p["engine"] == "sglang" for h in p["holders"]}
    assert holders == {f"sglang.kernels.ops.attention.fla.fused_recurrent.{GDN}", f"{SGLANG_GDN_CALLER}.{GDN}"}


def test_kda_keywords_and_lower_bound_and_vllm_engine(engine, tmp_path):
    path = tmp_path / "rec.json"
    with gdr_check.capture(path):
        engine.kda_caller.forward_decode(**kda_arguments(), lower_bound=-5.0)
        engine.vllm_caller.forward_decode(**gdn_arguments())
    kda, vllm = read(path)["calls"]
    assert (kda["function"], kda["variant"], kda["engine"]) == (KDA, "kda", "sglang")
    assert kda["call"]["lower_bound"] == -5.0 and kda["call"]["a"]["shape"] == [B, HV * K]
    assert (vllm["function"], vllm["engine"], vllm["index"]) == (GDN, "vllm", 1)
    assert vllm["call"]["use_qk_l2norm_in_kernel"] is True  # passed positionally


def test_originals_are_restored_everywhere(engine, tmp_path):
    original = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode
    session = gdr_check.capture(tmp_path / "rec.json")
    with session:
        assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is not original
        late = engine.load("sglang.srt.models.late_caller", "gdn_caller.py")  # imported during the capture
        assert late.fused_recurrent_gated_delta_rule_packed_decode is not original
    for module in (engine.sglang_kernels, engine.gdn_caller, late):
        assert module.fused_recurrent_gated_delta_rule_packed_decode is original
    assert (engine.kda_caller.fused_recurrent_kda_packed_decode
            is engine.sglang_kernels.fused_recurrent_kda_packed_decode)
    engine.gdn_caller.forward_decode(**gdn_arguments())  # after exit: not recorded
    assert len(session.calls) == 0


def test_a_failing_call_is_recorded_and_the_error_propagates(engine, tmp_path):
    path = tmp_path / "rec.json"
    original = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode
    torch = torch_or_skip()
    arguments = gdn_arguments(mixed_qkv=torch.zeros(B, 1, 2 * H * K + HV * V, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="stand-in kernel"):
        with gdr_check.capture(path):
            engine.gdn_caller.forward_decode(**arguments)
    assert read(path)["calls"][0]["call"]["mixed_qkv"]["shape"] == [B, 1, 2 * H * K + HV * V]
    assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is original


def test_decorator_form_accumulates_and_restores_between_calls(engine, tmp_path):
    path = tmp_path / "rec.json"
    original = engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode

    @gdr_check.capture(path, max_calls=3)
    def decode_step():
        engine.gdn_caller.forward_decode(**gdn_arguments())
        return "done"

    assert decode_step.__name__ == "decode_step"
    assert decode_step() == "done"
    assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is original
    assert len(read(path)["calls"]) == 1
    decode_step(), decode_step(), decode_step()
    document = read(path)
    assert [c["index"] for c in document["calls"]] == [0, 1, 2]
    assert (document["calls_seen"], document["calls_dropped"]) == (4, 1)


def test_a_recording_gets_the_mode_a_plain_write_would(engine, tmp_path):
    """Not mkstemp's 0600 (the report files are 0644 under the usual umask): the umask's mode for a new file, and
    the old file's mode for one written over."""
    umask = os.umask(0o022)
    try:
        with gdr_check.capture(tmp_path / "new.json"):
            pass
        assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == 0o644
        (tmp_path / "kept.json").write_text("{}")
        os.chmod(tmp_path / "kept.json", 0o640)
        with gdr_check.capture(tmp_path / "kept.json"):
            pass
        assert stat.S_IMODE(os.stat(tmp_path / "kept.json").st_mode) == 0o640
    finally:
        os.umask(umask)


def test_the_write_is_atomic(engine, tmp_path):
    path = tmp_path / "rec.json"
    path.write_text("previous recording")
    arguments = gdn_arguments()  # before the block: without torch the test skips here, not inside the recording

    def failing_replace(source, target):
        raise OSError("disk full")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capture_module.os, "replace", failing_replace)
        with pytest.raises(CaptureError, match=r"^cannot write the recording to `.*rec\.json`: disk full$"):
            with gdr_check.capture(path):
                engine.gdn_caller.forward_decode(**arguments)
    assert path.read_text() == "previous recording"
    assert os.listdir(tmp_path) == ["rec.json"]  # no temporary file left behind
    with gdr_check.capture(path):
        pass
    assert read(path)["calls"] == [] and os.listdir(tmp_path) == ["rec.json"]


def test_a_checkpoints_files_are_never_replaced_by_a_recording(engine, tmp_path):
    """Refused when the block is entered, before the engine runs, as the CLI refuses such a report path."""
    (tmp_path / "config.json").write_text('{"model_type": "qwen3_next"}')
    for name in ("config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        with pytest.raises(CaptureError, match=rf"^cannot record to `.*{name}`: it is named as a checkpoint's file "
                                               r"\(a config or weights\), which a recording must not replace or pose "
                                               r"as: name the recording otherwise$"):
            with gdr_check.capture(tmp_path / name):
                raise AssertionError("the block must not run")
    assert (tmp_path / "config.json").read_text() == '{"model_type": "qwen3_next"}'
    assert sorted(os.listdir(tmp_path)) == ["config.json"]


def test_a_recording_is_never_written_into_the_hugging_face_cache(engine, tmp_path):
    snapshot = tmp_path / "models--org--name" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    with pytest.raises(CaptureError, match=r"^cannot record to `.*calls\.json`: it lies in the Hugging Face cache "
                                           r"repository `models--org--name`, whose files a recording must not "
                                           r"replace or add to: write the recording elsewhere$"):
        with gdr_check.capture(snapshot / "calls.json"):
            pass
    assert os.listdir(snapshot) == []


def test_a_recording_goes_through_a_link_and_into_a_fifo_in_place(engine, tmp_path):
    """As the CLI writes a report: the file a link names is replaced whole and the link stays; a FIFO (or a
    device) is written in place, never replaced by a regular file."""
    (tmp_path / "kept.json").write_text("old")
    (tmp_path / "link.json").symlink_to("kept.json")
    with gdr_check.capture(tmp_path / "link.json"):
        engine.gdn_caller.forward_decode(**gdn_arguments())
    assert (tmp_path / "link.json").is_symlink() and len(read(tmp_path / "kept.json")["calls"]) == 1
    os.mkfifo(tmp_path / "pipe")
    received = []
    reader = threading.Thread(target=lambda: received.append((tmp_path / "pipe").read_text()))
    reader.start()
    with gdr_check.capture(tmp_path / "pipe"):
        engine.gdn_caller.forward_decode(**gdn_arguments())
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "pipe").st_mode) and len(json.loads(received[0])["calls"]) == 1


def test_a_path_that_cannot_take_the_recording_fails_on_enter(engine, tmp_path):
    (tmp_path / "file").write_text("")
    cases = {tmp_path: "it is a directory", tmp_path / "file" / "calls.json": f"`{tmp_path / 'file'}` is not a "
                                                                               "directory"}
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases[locked / "new" / "calls.json"] = f"`{locked}` is not writable"
    for path, problem in cases.items():
        with pytest.raises(CaptureError) as raised:
            with gdr_check.capture(path):
                raise AssertionError("the block must not run")
        assert str(raised.value) == f"cannot record to `{path}`: {problem}"
    assert sorted(os.listdir(tmp_path)) == ["file", "locked"] or os.geteuid() == 0


def test_graph_capture_skips_index_values_and_compile_skips_the_call(engine, tmp_path, monkeypatch):
    path = tmp_path / "rec.json"
    monkeypatch.setattr(capture_module, "_torch_state", lambda: (False, True))
    with gdr_check.capture(path):
        engine.gdn_caller.forward_decode(**gdn_arguments())
    [entry] = read(path)["calls"]
    assert entry["values_read"] is False and "values" not in entry["call"]["ssm_state_indices"]
    monkeypatch.setattr(capture_module, "_torch_state", lambda: (True, False))
    with gdr_check.capture(path):
        engine.gdn_caller.forward_decode(**gdn_arguments())
    assert read(path)["calls"] == []


def test_extra_targets_and_other_apis(engine, tmp_path):
    engine.load("myengine.ops", "kernels.py")
    engine.load("myengine.other", "other_api.py")
    path = tmp_path / "rec.json"
    targets = [f"myengine.ops:{GDN}", "myengine.other:fused_recurrent_kda_packed_decode"]
    with gdr_check.capture(path, targets=targets, engine="vllm"):
        sys.modules["myengine.ops"].fused_recurrent_gated_delta_rule_packed_decode(**gdn_arguments())
    document = read(path)
    [entry] = document["calls"]
    assert entry["module"] == "myengine.ops" and entry["engine"] == "vllm"  # `engine` labels every call
    [skipped] = document["skipped_targets"]
    assert skipped["target"] == targets[1] and "`a`, `b`" in skipped["reason"]


@pytest.mark.parametrize("target", ["no_colon.at.all", "pkg.mod:", ":f", "pkg mod:f"])
def test_bad_targets_fail_at_construction(target, tmp_path):
    with pytest.raises(CaptureError, match="package.module:function_name"):
        gdr_check.capture(tmp_path / "rec.json", targets=[target])


def test_explicit_targets_that_do_not_resolve_fail_on_enter(engine, tmp_path):
    with pytest.raises(CaptureError, match="cannot import"):
        with gdr_check.capture(tmp_path / "rec.json", targets=["gdr_check_no_such_module:f"]):
            pass
    with pytest.raises(CaptureError, match="has no function"):
        with gdr_check.capture(tmp_path / "rec.json", targets=["gdr_check.base.tensor_spec:no_such_function"]):
            pass
    assert not (tmp_path / "rec.json").exists()


def _sglang_targets(monkeypatch, *targets: str) -> None:
    """`engine="sglang"` (and no engine, nothing installed) selects a profile whose release keeps its packed decodes
    at `targets`."""
    newest = profiles.profile_for("sglang")
    monkeypatch.setitem(profiles._BY_SPEC, "sglang", dataclasses.replace(newest, decode_targets=targets))


def test_a_guards_explicit_targets_that_do_not_resolve_are_refused_on_enter_in_the_captures_words(monkeypatch):
    """Not only the "found no ... function to guard" warning: that is for the engine's default locations."""
    from gdr_check.pipeline.guard import GuardError, GuardTargetError

    _sglang_targets(monkeypatch, "gdr_check_absent_engine.ops:f")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(GuardTargetError) as raised:
            with gdr_check.guard(targets=["nomod_xyz:f"]):
                pass
        assert isinstance(raised.value, GuardError) and isinstance(raised.value, ValueError)
        assert str(raised.value) == ("cannot import 'nomod_xyz' for guard target 'nomod_xyz:f': No module named "
                                     "'nomod_xyz'")
        with pytest.raises(GuardTargetError) as raised:
            with gdr_check.guard(targets=["gdr_check.base.tensor_spec:no_such_function"]):
                pass
        assert str(raised.value) == ("guard target 'gdr_check.base.tensor_spec:no_such_function': "
                                     "gdr_check.base.tensor_spec has no function 'no_such_function'")
    with pytest.warns(RuntimeWarning, match="found no sglang packed-decode function to guard"):
        with gdr_check.guard():  # a default location this version lacks: a warning, as before
            pass


def test_a_captures_explicit_target_refusal_is_exact(tmp_path):
    with pytest.raises(CaptureError) as raised:
        with gdr_check.capture(tmp_path / "rec.json", targets=["nomod_q:fn"]):
            pass
    assert str(raised.value) == "cannot import 'nomod_q' for capture target 'nomod_q:fn': No module named 'nomod_q'"


def test_nothing_to_patch_warns_and_writes_nothing(tmp_path, monkeypatch):
    """With no function to record, the session writes no file: an earlier recording at the path (a good one, from
    a run where the engine was installed) is kept, not replaced by an empty one that `gdr-check call` refuses."""
    _sglang_targets(monkeypatch, "gdr_check_absent_engine.ops:f")
    kept = tmp_path / "kept.json"
    kept.write_text("an earlier recording")
    for path in (tmp_path / "rec.json", kept):
        with pytest.warns(RuntimeWarning, match="no packed-decode function to record .*, so it writes no "
                                                "recording \\(an existing file is left as it is\\)"):
            with gdr_check.capture(path, engine="sglang") as session:
                pass
        assert session.path is None
    assert not (tmp_path / "rec.json").exists() and kept.read_text() == "an earlier recording"


def test_path_placeholders(engine, tmp_path):
    (tmp_path / "sub").mkdir()
    with gdr_check.capture(tmp_path / "sub" / "rec-{pid}.json") as session:
        pass
    assert session.path == tmp_path / "sub" / f"rec-{os.getpid()}.json" and session.path.exists()
    with pytest.raises(CaptureError, match="placeholder"):
        gdr_check.capture(tmp_path / "rec-{host}.json")
    for template, why in (("{rank[0]}.json", "'int' object is not subscriptable"),
                          ("{pid.x}.json", "'int' object has no attribute 'x'")):
        with pytest.raises(CaptureError) as refused:
            gdr_check.capture(template)
        assert str(refused.value) == f"bad placeholder in capture path {template!r}: use {{pid}} or {{rank}} ({why})"


@pytest.mark.parametrize("relative", ["missing/rec.json", "missing/{pid}/rec.json", "sub/{rank}-missing/rec.json"])
def test_a_missing_folder_is_refused_on_entry_not_created(engine, tmp_path, monkeypatch, relative):
    """As `-o` refuses it, after the placeholders are filled in; nothing is created (it used to make the tree)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    session = gdr_check.capture(relative)
    folder = str(tmp_path / relative.format(pid=os.getpid(), rank=0)).rsplit("/", 1)[0]
    with pytest.raises(CaptureError) as refused:
        with session:
            pytest.fail("entered")
    assert str(refused.value) == (f"cannot record to `{folder}/rec.json`: folder `{folder}` does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"] and not any((tmp_path / "sub").iterdir())


def test_a_folder_removed_inside_the_block_is_refused_when_writing(engine, tmp_path):
    (tmp_path / "gone").mkdir()
    with pytest.raises(CaptureError) as refused:
        with gdr_check.capture(tmp_path / "gone" / "rec.json"):
            (tmp_path / "gone").rmdir()
    assert str(refused.value) == (f"cannot write the recording to `{tmp_path}/gone/rec.json`: folder "
                                  f"`{tmp_path}/gone` does not exist")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("path, shown", [(3, "3 (an int)"), (None, "None"), (2.5, "2.5 (a float)")])
def test_a_path_that_is_no_path_is_a_capture_error_naming_path(path, shown):
    """Not os.fspath's "expected str, bytes or os.PathLike object, not int"."""
    with pytest.raises(CaptureError) as refused:
        gdr_check.capture(path)
    assert isinstance(refused.value, TypeError)
    assert str(refused.value) == f"path is {shown}: must be the recording's file path (a str, bytes or os.PathLike)"


@pytest.mark.parametrize("path", ["a\x00b.json", b"a\x00b.json"])
def test_a_null_byte_in_the_path_is_a_capture_error_showing_it_escaped(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CaptureError) as refused:
        gdr_check.capture(path)
    assert str(refused.value) == "cannot record to `a\\x00b.json`: a path cannot hold a null byte"
    assert list(tmp_path.iterdir()) == []


def test_a_guard_model_that_is_no_path_is_a_type_error_naming_model():
    with pytest.raises(TypeError) as refused:
        gdr_check.guard(model=3)
    assert str(refused.value) == ("model is 3 (an int): must be a model id or checkpoint path (a str or "
                                  "os.PathLike), or None")


def test_a_path_ending_with_a_slash_is_refused(tmp_path):
    with pytest.raises(CaptureError) as refused:
        gdr_check.capture(f"{tmp_path}/new/")
    assert str(refused.value) == (f"cannot record to `{tmp_path}/new/`: it ends with a slash, so it names a folder: "
                                  "name the recording's file")
    assert not (tmp_path / "new").exists()


def test_an_empty_path_is_refused_in_the_words_of_an_empty_report_path():
    # (it said "cannot record to `<cwd>`: it is a directory")
    with pytest.raises(CaptureError, match=r"^an empty path names no recording file$"):
        gdr_check.capture("")


def test_a_bytes_path_is_a_path(engine, tmp_path):
    with gdr_check.capture(os.fsencode(tmp_path / "rec.json")) as session:
        engine.gdn_caller.forward_decode(**gdn_arguments())
    assert session.path == tmp_path / "rec.json" and len(read(session.path)["calls"]) == 1


def test_a_relative_path_is_the_directory_s_at_entry(engine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    with gdr_check.capture("rec.json") as session:
        os.chdir(tmp_path / "elsewhere")  # an engine that changes directory while it runs
    assert session.path == tmp_path / "rec.json" and session.path.exists()
    assert not (tmp_path / "elsewhere" / "rec.json").exists()


@pytest.mark.parametrize(("max_calls", "message"), [
    (2.5, "max_calls is 2.5: must be a whole number in"),
    (True, "max_calls is True (a bool): must be a whole number in"),
    ("4", "max_calls is '4' (a str): must be a whole number in"),
    (-1, "max_calls is -1: must be in"),
    (2**21, "max_calls is 2097152: must be in"),
])
def test_max_calls_outside_its_limit_is_refused(max_calls, message):
    with pytest.raises(CaptureError) as refused:
        gdr_check.capture("rec.json", max_calls=max_calls)
    assert str(refused.value) == f"{message} 0..2**20 (kernel calls a capture records); see {LIMITS_DOCS_URL}"


def test_recordings_round_trip_through_the_reader(engine, tmp_path):
    path = tmp_path / "rec.json"
    with gdr_check.capture(path) as session:
        engine.gdn_caller.forward_decode(**gdn_arguments())
        engine.kda_caller.forward_decode(**kda_arguments())
    recording = load_recording(path)
    assert [c.call.to_dict() for c in recording.calls] == [c["call"] for c in session.calls]
    assert recording.calls[0].caller.startswith(SGLANG_GDN_CALLER + ":forward_decode:")
    assert recording.calls[0].call.ssm_state_indices.values == (4, 1, 2)


def test_a_versioned_engine_labels_the_calls_and_reads_back(engine, tmp_path):
    path = tmp_path / "rec.json"
    with gdr_check.capture(path, engine="sglang@0.5.23"):
        engine.gdn_caller.forward_decode(**gdn_arguments())
    [call] = load_recording(path).calls
    assert call.engine == "sglang@0.5.23"
    with pytest.raises(CaptureError, match=r"^no vLLM profile for version '0\.1' \(engine 'vllm@0\.1'\)"):
        gdr_check.capture(path, engine="vllm@0.1")


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ("[]", "top level is a list"),
    ('{"calls": []}', "not a gdr-check recording"),
    ('{"schema_version": 9, "calls": []}', "schema_version 9"),
    ('{"schema_version": 1, "calls": {}}', "`calls` must be a list"),
    ('{"schema_version": 1, "calls": [{"call": {"variant": "gdn"}}]}', "has no `mixed_qkv`"),
])
def test_the_reader_rejects_malformed_files_in_one_line(tmp_path, text, message):
    path = tmp_path / "rec.json"
    path.write_text(text)
    with pytest.raises(RecordingError, match=message) as error:
        load_recording(path)
    assert "\n" not in str(error.value)


def test_capture_does_not_import_torch():
    probe = textwrap.dedent("""
        import json, sys, tempfile, warnings, os
        import gdr_check
        import gdr_check.pipeline.capture
        warnings.simplefilter("ignore")
        with gdr_check.capture(os.path.join(tempfile.mkdtemp(), "rec.json")):
            pass
        print(json.dumps({"torch": "torch" in sys.modules}))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"torch": False}


def test_the_module_is_the_capture_factory():
    assert callable(gdr_check.capture) and gdr_check.pipeline.capture.capture is gdr_check.capture
    assert isinstance(gdr_check.capture("unused.json"), Capture)


def test_nested_and_overlapping_captures_leave_the_original_in_place(engine, tmp_path):
    original = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode
    outer, inner = gdr_check.capture(tmp_path / "outer.json"), gdr_check.capture(tmp_path / "inner.json")
    with outer:
        with inner:
            engine.gdn_caller.forward_decode(**gdn_arguments())
        engine.gdn_caller.forward_decode(**gdn_arguments())
    assert (len(outer.calls), len(inner.calls)) == (2, 1)
    assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is original
    first, second = gdr_check.capture(tmp_path / "a.json"), gdr_check.capture(tmp_path / "b.json")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # ends before the capture it encloses
    second.__exit__(None, None, None)
    assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is original
    assert engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode is original


def test_a_default_target_missing_only_its_optional_dependency_is_absent_and_any_other_failure_is_reported(
        monkeypatch, tmp_path):
    """sglang's Helion decode without `helion` is a path the engine cannot take: absent, not news. A default
    target whose module fails on anything else (a missing package of the engine's own, a broken import) is
    reported in `skipped_targets`."""
    package = tmp_path / "gdrfakeeng"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "optional_path.py").write_text("import gdr_missing_optional_dependency\n")
    (package / "broken_path.py").write_text("import gdr_missing_engine_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    optional, broken = f"gdrfakeeng.optional_path:{GDN}", f"gdrfakeeng.broken_path:{GDN}"
    _sglang_targets(monkeypatch, optional, broken)
    monkeypatch.setattr(capture_module, "OPTIONAL_DEPENDENCIES", {optional: ("gdr_missing_optional_dependency",)})
    path = tmp_path / "rec.json"
    with pytest.warns(RuntimeWarning) as warned:  # nothing to record: no file, and the warning names the failure
        with gdr_check.capture(path, engine="sglang") as session:
            pass
    reason = "import failed: ModuleNotFoundError: No module named 'gdr_missing_engine_dependency'"
    assert session.document()["skipped_targets"] == [{"target": broken, "reason": reason}]
    # (among the warnings: where an earlier test in this process left objects frozen, the frozen-heap warning
    # comes after it, as on a GPU worker that ran sglang's helion test first)
    assert any(f"; skipped {broken}: {reason}; pass targets=" in str(w.message) for w in warned)
    assert not path.exists()


def test_only_the_namespaces_holding_a_wanted_object_are_walked():
    """`_holding` keeps exactly the namespaces that hold one of the objects (by identity, not equality), in their
    order: the ones install_wrappers and restore_wrappers then walk name by name."""
    first, second = object(), [1]
    namespaces = [("a", {"x": 1, "y": first}), ("b", {"x": [1]}), ("c", {}), ("d", {"z": second, "w": first})]
    assert [name for name, _ in capture_module._holding(namespaces, {id(second)})] == ["d"]
    assert [name for name, _ in capture_module._holding(namespaces, {id(first), id(second)})] == ["a", "d"]
    assert list(capture_module._holding(namespaces, set())) == []
