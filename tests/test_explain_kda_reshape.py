"""`explain`'s numbers for the KDA wrapper's per-head messages (GDR221-GDR224) and for reshapes of Qwen3-Next's
projections (GDR404), with and without the model (user test).

The KDA messages are the sglang 0.5.23 wrapper's f-strings (`fused_recurrent_kda_packed_decode`) filled with
Kimi-Linear-48B's numbers (32 heads, K = V = 128: HV = 32 at tp 1, 8 at tp 4); the reshape messages are PyTorch's
(`shape '[...]' is invalid for input of size N`) for Qwen3-Next-80B (H = 16, HV = 32, K = V = 128), whose
`in_proj_qkvz` rows are 2*H*K + 2*HV*V = 12288 wide and its [q | k | v] rows 2*H*K + HV*V = 8192, over the TP size.
"""

from __future__ import annotations

import json

import pytest

from gdr_check.checks.explanations import Context, find_all
from gdr_check.cli.main import main
from gdr_check.pipeline.explain_numbers import model_numbers

KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
QWEN = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def _numbers(out: str) -> list[str]:
    """The sentences under `numbers:` in `explain`'s full output."""
    lines = out.splitlines()
    start = lines.index("numbers:") + 1
    return [line.removeprefix("  - ") for line in lines[start:lines.index("", start)]]


# -- the wrapper's messages, as its f-strings print them ----------------------------------------------------------

def a_message(HV: int, K: int, a_shape: tuple[int, ...]) -> str:
    return f"`a` must have shape [B, HV*K] with HV={HV}, K={K} (got a.shape={a_shape})."


def b_message(HV: int, b_shape: tuple[int, ...]) -> str:
    return f"`b` must have shape [B, HV] with HV={HV} (got b.shape={b_shape})."


def a_log_message(HV: int, numel: int) -> str:
    return f"`A_log` must have {HV} elements (got {numel})."


def dt_bias_message(HV: int, K: int, numel: int) -> str:
    return f"`dt_bias` must have {HV * K} elements (got {numel})."


def test_the_messages_are_the_wrappers():
    assert a_message(8, 128, (8, 4096)) == "`a` must have shape [B, HV*K] with HV=8, K=128 (got a.shape=(8, 4096))."
    assert b_message(8, (8, 32)) == "`b` must have shape [B, HV] with HV=8 (got b.shape=(8, 32))."
    assert a_log_message(8, 32) == "`A_log` must have 8 elements (got 32)."
    assert dt_bias_message(8, 128, 4096) == "`dt_bias` must have 1024 elements (got 4096)."


def test_explain_reads_kimi_linears_geometry():
    assert model_numbers(KIMI) == (
        {"num_heads (H = HV)": 32, "mixed_qkv width (2*H*K + HV*V)": 12288, "out/v width (HV*V)": 4096,
         "a/dt_bias width (HV*K)": 4096, "num_attention_heads (full attention)": 32},
        {"head_k_dim (K)": 128, "head_v_dim (V)": 128})


A_EXPECTED_TP4 = ("`a` must be [B, HV*K] = (8, 8*128) = (8, 1024): one gate input per key channel of each of the "
                  "pool's 8 value heads (Kimi-Linear's `f_b_proj` output)")
DT_BIAS_EXPECTED_TP4 = ("`dt_bias` must be [HV*K] = (8*128,) = (1024,): one time-step bias per key channel of each of "
                        "the pool's 8 value heads")
HEADS_TP4 = "8 is the model's num_heads (H = HV) per rank at tp=4 (32/4)"
HEADS_FULL = "32 is the model's num_heads (H = HV) (unsharded, 32)"

KDA_WITH_THE_MODEL = [
    # tp=4: `a` from an unsharded f_b_proj (all 32 heads' channels)
    (a_message(8, 128, (8, 4096)), 4, [
        A_EXPECTED_TP4,
        "4096 = 32 × 128: `a` holds the channels of 32 value heads where the pool has 8",
        "32 = 4 × 8: `a` is unsharded while the pool is sharded for tp=4; pass this rank's 8 heads' channels, 1024 "
        "columns (the column slice [rank*1024:(rank+1)*1024])",
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        HEADS_TP4]),
    # tp=4: a GDN-style gate, one value per head
    (a_message(8, 128, (8, 8)), 4, [
        A_EXPECTED_TP4,
        "8 = HV: one value per head, the layout of `b` (the `b_proj` output) and of GDN's gate: pass the `f_b_proj` "
        "output, (8, 1024) (if `b` holds 1024 columns, `a` and `b` are swapped)",
        HEADS_TP4]),
    # tp=1: a per-head gate of the 32 heads
    (a_message(32, 128, (8, 32)), 1, [
        "`a` must be [B, HV*K] = (8, 32*128) = (8, 4096): one gate input per key channel of each of the pool's 32 "
        "value heads (Kimi-Linear's `f_b_proj` output)",
        "32 = HV: one value per head, the layout of `b` (the `b_proj` output) and of GDN's gate: pass the `f_b_proj` "
        "output, (8, 4096) (if `b` holds 4096 columns, `a` and `b` are swapped)",
        HEADS_FULL]),
    # tp=4: `a` sized for tp=2 (16 heads' channels)
    (a_message(8, 128, (8, 2048)), 4, [
        A_EXPECTED_TP4,
        "2048 = 16 × 128: `a` holds the channels of 16 value heads where the pool has 8",
        "16 = 32/2: sized for tp=2 (the model's 32 value heads over 2 ranks) while the pool holds this rank's 8 at "
        "tp=4; pass this rank's 8 heads' channels, 1024 columns (the column slice [rank*1024:(rank+1)*1024])",
        HEADS_TP4]),
    # tp=4: `a` is the rank's, the pool has all 32 heads
    (a_message(32, 128, (8, 1024)), 4, [
        "`a` must be [B, HV*K] = (8, 32*128) = (8, 4096): one gate input per key channel of each of the pool's 32 "
        "value heads (Kimi-Linear's `f_b_proj` output)",
        "1024 = 8 × 128: `a` holds the channels of 8 value heads where the pool has 32",
        "32 = 4 × 8: `a` is this rank's shard for tp=4 while the pool holds the full 32 value heads; at tp=4 size the "
        "pool (and `b`, `A_log`, `dt_bias`, `out`) with HV_l = 8",
        "1024 is the model's a/dt_bias width (HV*K) per rank at tp=4 (4096/4)",
        HEADS_FULL]),
    (b_message(8, (8, 32)), 4, [
        "`b` must be [B, HV] = (8, 8): one beta logit per value head (the `b_proj` output)",
        "32 = 4 × 8: `b` is unsharded while the pool is sharded for tp=4; pass this rank's 8 columns (the column "
        "slice [rank*8:(rank+1)*8])",
        HEADS_FULL, HEADS_TP4]),
    (b_message(32, (8, 4096)), 1, [
        "`b` must be [B, HV] = (8, 32): one beta logit per value head (the `b_proj` output)",
        "4096 = 32 × 128: `b` holds one value per key channel (HV*K), the width of `a` and of the output gate "
        "(`g_b_proj`): pass the per-head `b_proj` output, (8, 32)",
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        HEADS_FULL]),
    (a_log_message(8, 32), 4, [
        "`A_log` must be [HV] = (8,): one decay rate per value head (Kimi-Linear's parameter is [1, 1, H, 1]: "
        "`A_log.reshape(-1)`)",
        "32 = 4 × 8: `A_log` is unsharded while the pool is sharded for tp=4; pass this rank's 8 values "
        "(`A_log.reshape(-1)[rank*8:(rank+1)*8]`)",
        HEADS_FULL, HEADS_TP4]),
    (a_log_message(32, 4096), 1, [
        "`A_log` must be [HV] = (32,): one decay rate per value head (Kimi-Linear's parameter is [1, 1, H, 1]: "
        "`A_log.reshape(-1)`)",
        "4096 = 32 × 128: HV*K values, the size of KDA's `dt_bias`: `A_log` and `dt_bias` look swapped (`dt_bias` "
        "holds one value per key channel, `A_log` one per head)",
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        HEADS_FULL]),
    (dt_bias_message(8, 128, 4096), 4, [
        DT_BIAS_EXPECTED_TP4,
        "4096 = 32 × 128: `dt_bias` holds the channels of 32 value heads where the pool has 8",
        "32 = 4 × 8: `dt_bias` is unsharded while the pool is sharded for tp=4; pass this rank's 1024 values (the "
        "slice [rank*1024:(rank+1)*1024])",
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        "1024 is the model's a/dt_bias width (HV*K) per rank at tp=4 (4096/4)",
        HEADS_TP4]),
    # a GDN-style per-head `dt_bias` of the model's 32 heads at tp=4: per head and unsharded
    (dt_bias_message(8, 128, 32), 4, [
        DT_BIAS_EXPECTED_TP4,
        "32 is not a multiple of K = 128: one value per head (32 heads), GDN's per-head layout, where KDA's `dt_bias` "
        "holds K = 128 per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model decodes with the GDN kernel)",
        # the slice is of the layer's [HV*K] `dt_bias`, not of the 32 per-head values (it said "pass this rank's 1024
        # values" of them: user test)
        "32 = 4 × 8: the per-head values are unsharded for tp=4 while the pool holds this rank's 8 heads; this rank's "
        "KDA `dt_bias` is HV_l*K = 8*128 = 1024 values (the slice [rank*1024:(rank+1)*1024] of the layer's [HV*K] "
        "`dt_bias`, not of these 32)",
        HEADS_FULL,
        "1024 is the model's a/dt_bias width (HV*K) per rank at tp=4 (4096/4)",
        HEADS_TP4]),
    # per-head values sized for tp=2 on a tp=4 rank
    (dt_bias_message(8, 128, 16), 4, [
        DT_BIAS_EXPECTED_TP4,
        "16 is not a multiple of K = 128: one value per head (16 heads), GDN's per-head layout, where KDA's `dt_bias` "
        "holds K = 128 per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model decodes with the GDN kernel)",
        "16 = 32/2: sized for tp=2 (the model's 32 value heads over 2 ranks) while the pool holds this rank's 8 at "
        "tp=4; this rank's KDA `dt_bias` is HV_l*K = 8*128 = 1024 values (the slice [rank*1024:(rank+1)*1024] of the "
        "layer's [HV*K] `dt_bias`, not of these 16)",
        "1024 is the model's a/dt_bias width (HV*K) per rank at tp=4 (4096/4)",
        HEADS_TP4]),
    # a rank's per-head values where the pool holds all 32 heads
    (dt_bias_message(32, 128, 8), 4, [
        "`dt_bias` must be [HV*K] = (32*128,) = (4096,): one time-step bias per key channel of each of the pool's 32 "
        "value heads",
        "8 is not a multiple of K = 128: one value per head (8 heads), GDN's per-head layout, where KDA's `dt_bias` "
        "holds K = 128 per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model decodes with the GDN kernel)",
        "32 = 4 × 8: the per-head values are this rank's shard for tp=4 while the pool, `a`, `b` and `A_log` hold the "
        "full 32 value heads; at tp=4 size them (and `out`) with HV_l = 8",
        HEADS_TP4,
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        HEADS_FULL]),
    (dt_bias_message(32, 128, 32), 1, [
        "`dt_bias` must be [HV*K] = (32*128,) = (4096,): one time-step bias per key channel of each of the pool's 32 "
        "value heads",
        "32 is not a multiple of K = 128: one value per head (32 heads), GDN's per-head layout, where KDA's `dt_bias` "
        "holds K = 128 per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model decodes with the GDN kernel)",
        HEADS_FULL,
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)"]),
    (dt_bias_message(32, 128, 1024), 4, [
        "`dt_bias` must be [HV*K] = (32*128,) = (4096,): one time-step bias per key channel of each of the pool's 32 "
        "value heads",
        "1024 = 8 × 128: `dt_bias` holds the channels of 8 value heads where the pool has 32",
        "32 = 4 × 8: `dt_bias` is this rank's shard for tp=4 while the pool, `a`, `b` and `A_log` hold the full 32 "
        "value heads; at tp=4 size them (and `out`) with HV_l = 8",
        "1024 is the model's a/dt_bias width (HV*K) per rank at tp=4 (4096/4)",
        "4096 is the model's a/dt_bias width (HV*K) (unsharded, 4096)",
        HEADS_FULL]),
]


@pytest.mark.parametrize("message,tp,numbers", KDA_WITH_THE_MODEL,
                         ids=[f"{message.split()[0]}-{message.rsplit('got ', 1)[1][:-2]}-tp{tp}"
                              for message, tp, _ in KDA_WITH_THE_MODEL])
def test_the_kda_messages_get_the_numbers_with_the_model(capsys, message, tp, numbers):
    # as sglang logs it on the rank that failed
    assert main(["explain", f"[2026-11-30 10:00:00 TP0] ValueError: {message}", "--model", KIMI, "--tp", str(tp)]) == 0
    assert _numbers(capsys.readouterr().out) == numbers


@pytest.mark.parametrize("message,numbers", [
    (a_message(8, 128, (8, 4096)), [
        A_EXPECTED_TP4,
        "4096 = 32 × 128: `a` holds the channels of 32 value heads where the pool has 8",
        "32 = 4 × 8: `a` is unsharded while the pool is sharded for tp=4; pass this rank's 8 heads' channels, 1024 "
        "columns (the column slice [rank*1024:(rank+1)*1024])"]),
    (a_message(8, 128, (8, 128)), [
        A_EXPECTED_TP4,
        "128 = K: one head's channels, the width of Kimi-Linear's low-rank `f_a_proj` output: `a` is `f_b_proj` "
        "applied to it, (8, 1024)"]),
    (a_message(8, 128, (8, 32)), [
        A_EXPECTED_TP4,
        "32 = 4 × 8: one value per head of 32 heads, a per-head gate (`b`'s or GDN's layout) unsharded for tp=4: pass "
        "this rank's `f_b_proj` output, (8, 1024)"]),
    (b_message(8, (8, 1024)), [
        "`b` must be [B, HV] = (8, 8): one beta logit per value head (the `b_proj` output)",
        "1024 = 8 × 128: `b` holds one value per key channel (HV*K), the width of `a` and of the output gate "
        "(`g_b_proj`): pass the per-head `b_proj` output, (8, 8)"]),
    (a_log_message(32, 8), [
        "`A_log` must be [HV] = (32,): one decay rate per value head (Kimi-Linear's parameter is [1, 1, H, 1]: "
        "`A_log.reshape(-1)`)",
        "32 = 4 × 8: `A_log` is this rank's shard for tp=4 while the pool, `a` and `b` hold the full 32 value heads; "
        "at tp=4 size them (and `dt_bias`, `out`) with HV_l = 8"]),
    (dt_bias_message(8, 128, 4096), [
        "`dt_bias` must be [HV*K] = (1024,): one time-step bias per key channel of each value head",
        "4096 = 4 × 1024: `dt_bias` is unsharded while the pool is sharded for tp=4; pass this rank's 1024 values "
        "(the slice [rank*1024:(rank+1)*1024])"]),
    # without K, a factor of 128 is more values per head than any TP split: the per-head layout
    (dt_bias_message(8, 128, 8), [
        "`dt_bias` must be [HV*K] = (1024,): one time-step bias per key channel of each value head",
        "1024 = 8 × 128: `dt_bias` holds one value per head (8 heads, GDN's layout) where KDA's holds K = 128 per "
        "head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model decodes with the GDN kernel)"]),
    # a factor of 32 is K over the TP size or a tp=32 shard: only the model's K tells
    (dt_bias_message(8, 128, 32), [
        "`dt_bias` must be [HV*K] = (1024,): one time-step bias per key channel of each value head",
        "1024 = 32 × 32: one value per head (32 heads, GDN's layout) or a shard for tp=32; with --model gdr-check "
        "reads it against the model's K and head count"]),
    (dt_bias_message(32, 128, 1024), [
        "`dt_bias` must be [HV*K] = (4096,): one time-step bias per key channel of each value head",
        "4096 = 4 × 1024: `dt_bias` is this rank's shard for tp=4 while the pool holds the full heads; at tp=4 size "
        "the pool (and `a`, `b`, `A_log`, `out`) with HV/4 heads"]),
], ids=["a-unsharded", "a-f_a_proj", "a-per-head-unsharded", "b-per-channel", "A_log-sharded", "dt_bias-unsharded",
        "dt_bias-per-head", "dt_bias-ambiguous", "dt_bias-sharded"])
def test_the_kda_messages_get_the_numbers_without_the_model(message, numbers):
    [found] = find_all(f"ValueError: {message}")
    assert found.reasons == numbers


def test_a_kimi_model_named_in_pyproject_gives_the_numbers(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text(f'[tool.gdr-check]\nmodel = "{KIMI}"\ntp = [4]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["explain", a_log_message(8, 32), "--output-format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["code"], document["values"]) == ("GDR223", {"HV": "8", "numel": "32"})
    assert document["reasons"][1] == ("32 = 4 × 8: `A_log` is unsharded while the pool is sharded for tp=4; pass this "
                                      "rank's 8 values (`A_log.reshape(-1)[rank*8:(rank+1)*8]`)")


# -- reshapes of Qwen3-Next's projections: the qkvz rows (z included) or the [q | k | v] rows ------------------------

def reshape_error(shape: tuple[int, ...], size: int) -> str:
    """PyTorch's message for `x.view(*shape)` / `x.reshape(*shape)` of a tensor of `size` elements."""
    return f"RuntimeError: shape '[{', '.join(map(str, shape))}]' is invalid for input of size {size}"


def test_the_reshape_message_is_torchs():
    torch = pytest.importorskip("torch")
    for shape, size in (((1, 8, 2048), 8 * 3072), ((8, 4, 768), 8 * 2048)):
        for reshape in (torch.zeros(size).view, torch.zeros(size).reshape):
            with pytest.raises(RuntimeError) as raised:
                reshape(*shape)
            assert f"RuntimeError: {raised.value}" == reshape_error(shape, size)


def _qkvz_as_qkv(tp: int, z: int) -> str:
    qkvz, qkv = 12288 // tp, 8192 // tp
    sized = "(unsharded)" if tp == 1 else f"per rank at tp={tp}"
    return (f"{qkvz} is the model's in_proj_qkvz width (2*H*K + 2*HV*V) {sized}{'' if tp == 1 else f' (12288/{tp})'} "
            f"and {qkv} its mixed_qkv width (2*H*K + HV*V) {sized}{'' if tp == 1 else f' (8192/{tp})'}: the input is "
            f"the `in_proj_qkvz` output, z included (HV*V = {z} of each {qkvz}-wide row); split z off and reshape "
            f"[q | k | v], {qkv} wide (Qwen3-Next interleaves q, k, v and z per key head: "
            f"`fix_query_key_value_ordering` separates them)")


# The rank's qkvz rows (z included) reshaped with the rank's [q | k | v] width, at every TP size Qwen3-Next runs at:
# the rows fit, each 1.5 × the shape's width (3072 = 2048 + z's 1024 at tp=4). They were read as 12 rows of 2048 (a
# row count that disagrees) or, for [1, 8, 2048], as 8 of the 32 value heads in dim 1.
QKVZ_AS_QKV = [
    ((8, 8192), 98304, 1, "98304 = 8 × 12288: the shape's 8 rows (dim 0) fit, and each holds 12288 = 1.5 × the "
                          "shape's width 8192", 4096),
    ((8, 4096), 49152, 2, "49152 = 8 × 6144: the shape's 8 rows (dim 0) fit, and each holds 6144 = 1.5 × the "
                          "shape's width 4096", 2048),
    ((1, 8, 2048), 24576, 4, "24576 = 8 × 3072: the shape's 8 rows (dim 1) fit, and each holds 3072 = 1.5 × the "
                             "shape's width 2048", 1024),
    ((8, 1024), 12288, 8, "12288 = 8 × 1536: the shape's 8 rows (dim 0) fit, and each holds 1536 = 1.5 × the "
                          "shape's width 1024", 512),
]


@pytest.mark.parametrize("shape,size,tp,rows,z", QKVZ_AS_QKV, ids=[f"tp{case[2]}" for case in QKVZ_AS_QKV])
def test_qkvz_rows_reshaped_as_qkv_name_z_at_every_tp(capsys, shape, size, tp, rows, z):
    assert main(["explain", reshape_error(shape, size), "--model", QWEN, "--tp", str(tp)]) == 0
    known = size * 2 // 3
    assert _numbers(capsys.readouterr().out) == [
        f"{size} elements are 1.5 × {known} (the product of the known sizes): not a whole number",
        rows, _qkvz_as_qkv(tp, z)]


@pytest.mark.parametrize("shape,tp,numbers", [
    ((1, 8, 2048), 4, [
        "98304 elements are 6 × 16384 (the product of the shape's sizes): without a -1 the shape must hold all 98304",
        "98304 = 8 × 12288: the shape's 8 rows (dim 1) fit, and each holds 12288 = 6 × the shape's width 2048",
        "12288 is the model's in_proj_qkvz width (2*H*K + 2*HV*V) (unsharded) and 2048 its mixed_qkv width "
        "(2*H*K + HV*V) per rank at tp=4 (8192/4): the input is the `in_proj_qkvz` output, z included (HV*V = 4096 of "
        "each 12288-wide row), and unsharded while the shape is sized for tp=4 (× 1.5 for z, × 4 from the TP sizes); "
        "take this rank's 3072 columns, split z off and reshape [q | k | v], 2048 wide (Qwen3-Next interleaves q, k, "
        "v and z per key head: `fix_query_key_value_ordering` separates them)"]),
    ((8, 4096), 2, [
        "98304 elements are 3 × 32768 (the product of the shape's sizes): without a -1 the shape must hold all 98304",
        "98304 = 8 × 12288: the shape's 8 rows (dim 0) fit, and each holds 12288 = 3 × the shape's width 4096",
        "12288 is the model's in_proj_qkvz width (2*H*K + 2*HV*V) (unsharded) and 4096 its mixed_qkv width "
        "(2*H*K + HV*V) per rank at tp=2 (8192/2): the input is the `in_proj_qkvz` output, z included (HV*V = 4096 of "
        "each 12288-wide row), and unsharded while the shape is sized for tp=2 (× 1.5 for z, × 2 from the TP sizes); "
        "take this rank's 6144 columns, split z off and reshape [q | k | v], 4096 wide (Qwen3-Next interleaves q, k, "
        "v and z per key head: `fix_query_key_value_ordering` separates them)"]),
])
def test_unsharded_qkvz_rows_reshaped_as_a_ranks_qkv_name_both_factors(capsys, shape, tp, numbers):
    assert main(["explain", reshape_error(shape, 8 * 12288), "--model", QWEN, "--tp", str(tp)]) == 0
    assert _numbers(capsys.readouterr().out) == numbers


def test_qkvz_rows_of_another_tp_than_the_one_given():
    # --tp 2: the rows are the rank's 6144-wide qkvz, the shape the [q | k | v] width of tp=4.
    [found] = find_all(reshape_error((8, 2048), 8 * 6144), Context(tp=2, **_qwen()))
    assert found.reasons[1:] == [
        "49152 = 8 × 6144: the shape's 8 rows (dim 0) fit, and each holds 6144 = 3 × the shape's width 2048",
        "6144 is the model's in_proj_qkvz width (2*H*K + 2*HV*V) per rank at tp=2 (12288/2) and 2048 its mixed_qkv "
        "width (2*H*K + HV*V) per rank at tp=4 (8192/4): the input is the `in_proj_qkvz` output, z included (HV*V = "
        "2048 of each 6144-wide row), and sized for tp=2 while the shape is sized for tp=4 (× 1.5 for z, × 2 from the "
        "TP sizes; you said --tp 2); split z off and reshape [q | k | v], 4096 wide (Qwen3-Next interleaves q, k, v "
        "and z per key head: `fix_query_key_value_ordering` separates them)"]


def _qwen() -> dict[str, dict[str, int]]:
    widths, head_dims = model_numbers(QWEN)
    return {"widths": widths, "head_dims": head_dims}


@pytest.mark.parametrize("shape", [(8, 4, 768), (8, 3072)], ids=["key-head-groups", "flat"])
def test_qkv_rows_reshaped_as_qkvz_say_the_input_has_no_z(shape):
    # sglang's `mixed_qkvz.view(T, H/tp, 2*K + 2*V*HV/H)` at tp=4 of a [q | k | v]-only projection: 2048 per token.
    [found] = find_all(reshape_error(shape, 8 * 2048), Context(tp=4, **_qwen()))
    per_row = "4 × 768 = 3072 per row" if len(shape) == 3 else "width 3072"
    assert found.reasons == [  # one form for the ratio on both lines (it was 0.666667 above 2/3: user test)
        "16384 elements are 2/3 × 24576 (the product of the known sizes): not a whole number",
        f"16384 = 8 × 2048: the shape's 8 rows (dim 0) fit, and each holds 2048 = 2/3 × the shape's {per_row}",
        "3072 is the model's in_proj_qkvz width (2*H*K + 2*HV*V) per rank at tp=4 (12288/4) and 2048 its mixed_qkv "
        "width (2*H*K + HV*V) per rank at tp=4 (8192/4): the shape is written for the `in_proj_qkvz` output, z "
        "included (HV*V = 1024 more per row), while the input is [q | k | v] only; reshape the qkvz projection's "
        "output, or the input with its [q | k | v] width, 2048 wide"]


def test_a_leading_one_is_a_batch_of_one_not_a_head_count(capsys):
    """[1, 8, 2048] of 8 full 8192-wide [q | k | v] rows at tp=4: the width is split (dim 2), not 8 of the 32 value
    heads in dim 1, which are the tokens."""
    assert main(["explain", reshape_error((1, 8, 2048), 65536), "--model", QWEN, "--tp", "4"]) == 0
    assert _numbers(capsys.readouterr().out) == [
        "65536 elements are 4 × 16384 (the product of the shape's sizes): without a -1 the shape must hold all 65536",
        "65536 = 1 × 8 × 8192: the input is unsharded while the shape's dim 2 is a rank's 2048 of the full 8192 (the "
        "model's mixed_qkv width (2*H*K + HV*V)) at tp=4; reshape this rank's shard, or with the full 8192",
        "2048 is the model's mixed_qkv width (2*H*K + HV*V) per rank at tp=4 (8192/4)"]
    # [1, T, H, D]: the heads are dim 2; one token's [1, H/tp, 2*K + 2*G*V] view: the key heads are dim 1.
    [heads] = find_all(reshape_error((1, 8, 8, 128), 32768), Context(tp=4, **_qwen()))
    assert heads.reasons[1] == (
        "32768 = 1 × 8 × 32 × 128: the input is unsharded while the shape's dim 2 is a rank's 8 of the full 32 (the "
        "model's num_v_heads (HV)) at tp=4; reshape this rank's shard, or with the full 32")
    [one_token] = find_all(reshape_error((1, 4, 768), 12288), Context(tp=4, **_qwen()))
    assert one_token.reasons[1] == (
        "12288 = 1 × 16 × 768: the input is unsharded while the shape's dim 1 is a rank's 4 of the full 16 (the "
        "model's num_k_heads (H)) at tp=4; reshape this rank's shard, or with the full 16")


def test_without_the_model_a_leading_one_gives_both_readings():
    [found] = find_all(reshape_error((1, 8, 2048), 65536))
    assert found.reasons[1:] == [
        "65536 = 1 × 8 × 8192: the input is unsharded while the shape's dim 2 is a rank's 2048 of the full 8192 at "
        "tp=4; reshape this rank's shard, or with the full 8192",
        "or, if dim 1 is not the tokens (one token: [1, heads, head size]), 65536 = 1 × 32 × 2048: the input is "
        "unsharded while the shape's dim 1 is a rank's 8 of the full 32 at tp=4; reshape this rank's shard, or with "
        "the full 32"]


@pytest.mark.parametrize("shape,size,reason", [
    ((8, 2048), 24576,
     "24576 = 8 × 3072: the shape's 8 rows (dim 0) fit, and each holds 3072 = 1.5 × the shape's width 2048: a row of "
     "the qkvz projection is 1.5 × one of [q | k | v] when HV = 2·H and K = V (Qwen3-Next, Qwen3.5): the input may "
     "include z (× 1.5); --model names the model's widths"),
    ((1, 8, 2048), 98304,
     "98304 = 8 × 12288: the shape's 8 rows (dim 1) fit, and each holds 12288 = 6 × the shape's width 2048: a row of "
     "the qkvz projection is 1.5 × one of [q | k | v] when HV = 2·H and K = V (Qwen3-Next, Qwen3.5): the input may "
     "include z (× 1.5), and hold 4 × the shape's TP share (unsharded where the shape is a rank's at tp=4, or sized "
     "for a TP size 4 × smaller); --model names the model's widths"),
    ((8, 3072), 16384,
     "16384 = 8 × 2048: the shape's 8 rows (dim 0) fit, and each holds 2048 = 2/3 × the shape's width 3072: a row of "
     "the qkvz projection is 1.5 × one of [q | k | v] when HV = 2·H and K = V (Qwen3-Next, Qwen3.5): the shape may "
     "be written for the qkvz output (z included, 1024 more per row) while the input is [q | k | v]; --model names "
     "the model's widths"),
], ids=["qkvz-as-qkv", "unsharded-qkvz-as-qkv", "qkv-as-qkvz"])
def test_without_the_model_the_factor_of_z_is_named(shape, size, reason):
    [found] = find_all(reshape_error(shape, size))
    assert found.reasons[1:] == [reason]


def test_a_gate_reshape_is_not_read_as_a_width():
    # b.reshape(T, HV/tp) of b and a together (64 = 2*HV): 8 is a head count, not in_proj_ba's width at tp=8.
    [found] = find_all(reshape_error((8, 8), 512), Context(tp=4, **_qwen()))
    assert found.reasons == [
        "512 elements are 8 × 64 (the product of the shape's sizes): without a -1 the shape must hold all 512",
        "8 is the model's num_v_heads (HV) per rank at tp=4 (32/4)"]
