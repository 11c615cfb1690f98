"""Error texts users posted in public GitHub threads, for `explain`'s tests (tests/test_explain_pasted.py).

Each case is a trimmed excerpt of the thread's log (error lines only, the framing as posted: engine prefixes,
tracebacks, Markdown backticks), the thread it comes from, and what `explain` must find: the codes and the
values read from the message, in order. Cases with `context` also pin sentences of the reasoning with the
deployment the thread names. A case with no expected codes is text that must not match (a source line).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The widths `gdr-check explain --model Qwen/Qwen3-Next-80B-A3B-Instruct` compares numbers with.
QWEN3_NEXT = {"num_k_heads (H)": 16, "num_v_heads (HV)": 32, "mixed_qkv width (2*H*K + HV*V)": 8192,
              "out/v width (HV*V)": 4096, "in_proj_qkvz width (2*H*K + 2*HV*V)": 12288, "in_proj_ba width (2*HV)": 64,
              "num_attention_heads (full attention)": 16}


@dataclass(frozen=True)
class PastedCase:
    url: str
    text: str
    expected: list[tuple[str, dict[str, str]]]
    tp: int | None = None
    batch: int | None = None
    widths: dict[str, int] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()  # sentences the first explanation's reasons must contain


CASES = [
    # Qwen3-Next on vLLM: the illegal memory access, with the worker prefix and PyTorch's hints after it.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/27571",
        "(Worker_DP0_TP0_EP0 pid=1539019) ERROR 10-27 20:05:10 [multiproc_executor.py:699] torch.AcceleratorError: "
        "CUDA error: an illegal memory access was encountered\n"
        "(Worker_DP0_TP0_EP0 pid=1539019) ERROR 10-27 20:05:10 [multiproc_executor.py:699] CUDA kernel errors "
        "might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "(Worker_DP0_TP0_EP0 pid=1539019) ERROR 10-27 20:05:10 [multiproc_executor.py:699] For debugging consider "
        "passing CUDA_LAUNCH_BLOCKING=1\n",
        [("GDR403", {})]),
    # vLLM: the engine core's line interleaved with the API server's.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/45670",
        "(EngineCore pid=1426191) torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        "(APIServer pid=1425872) ERROR 06-15 16:27:50 [serving.py:471]   File \"/home/admin/vllm-sc/vllm/v1/engine/"
        "async_llm.py\", line 660, in output_handler\n"
        "(EngineCore pid=1426191) Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/"
        "cuda-runtime-api/group__CUDART__TYPES.html for more information.\n",
        [("GDR403", {})]),
    # sglang: a CUDA-graph capture that faults, as Triton words it and as PyTorch words it.
    PastedCase(
        "https://github.com/sgl-project/sglang/issues/1467",
        "    raise Exception(\n"
        "Exception: Capture cuda graph failed: Triton Error [CUDA]: an illegal memory access was encountered\n"
        "Possible solutions:\n1. disable cuda graph by --disable-cuda-graph\n",
        [("GDR403", {})]),
    PastedCase(
        "https://github.com/sgl-project/sglang/issues/5029",
        "Exception: Capture cuda graph failed: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
        "be incorrect.\n",
        [("GDR403", {})]),
    # Qwen3-Next with MTP at tp=4 on vLLM: the GDN layer's view of the speculative tokens. The width is the
    # model's per-rank mixed_qkv width; the row count is what disagrees.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/24881",
        "(Worker_TP3 pid=571) ERROR 09-15 07:02:51 [multiproc_executor.py:654]     mixed_qkv_spec = "
        "mixed_qkv_spec.view(\n"
        "(Worker_TP3 pid=571) ERROR 09-15 07:02:51 [multiproc_executor.py:654]                      "
        "^^^^^^^^^^^^^^^^^^^^\n"
        "(Worker_TP3 pid=571) ERROR 09-15 07:02:51 [multiproc_executor.py:654] RuntimeError: shape "
        "'[15, -1, 2048]' is invalid for input of size 90112\n",
        [("GDR404", {"shape": "15, -1, 2048", "size": "90112"})],
        tp=4, widths=QWEN3_NEXT,
        reasons=("90112 = 44 × 2048: the input holds 44 rows of the shape's width 2048, and 44 is not a multiple of "
                 "the leading size (15): the width fits; the row count (tokens, or sequences × tokens each) "
                 "disagrees with the leading size",
                 "2048 is the model's mixed_qkv width (2*H*K + HV*V) per rank at tp=4 (8192/4)")),
    # sglang's ping-pong slots, inside a scheduler traceback the user shortened.
    PastedCase(
        "https://github.com/ormandj/sglang-glm53-flash-sm120/issues/12",
        "[2026-09-21 06:38:26 TP0] Prefill batch, #new-seq: 2, #cached-token: 1280, #running-req: 1, mamba "
        "usage: 0.89\n"
        "[2026-09-21 06:38:26 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "  -> req_to_token_pool.alloc -> self._alloc_ping_pong_buffer(req)\n"
        "AssertionError: Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.\n"
        "[2026-09-21 06:38:26] SIGQUIT received. signum=None, frame=None. It usually means\n",
        [("GDR405", {})]),
    # vLLM's attention-head check, as pydantic wraps it, without the final period, and in a comment's list.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/52435",
        "Value error, Total number of attention heads (64) must be divisible by tensor parallel size (3).\n",
        [("GDR408", {"heads": "64", "tp": "3"})],
        reasons=("64 = 3 × 21 + 1: tp=3 leaves a remainder; TP sizes that divide 64: 1, 2, 4, 8, 16, 32, 64",)),
    PastedCase(
        "https://github.com/THU-KEG/AdaptThink/issues/1",
        "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)\n",
        [("GDR408", {"heads": "28", "tp": "8"})]),
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/414",
        "1. SET to 6: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
        "ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (3).\n",
        [("GDR408", {"heads": "40", "tp": "6"}), ("GDR408", {"heads": "52", "tp": "3"})]),
    PastedCase(
        "https://github.com/MIV-XJTU/FSDrive/issues/21",
        "    raise ValueError(\n"
        "ValueError: Total number of attention heads (12) must be divisible by tensor parallel size (8).\n",
        [("GDR408", {"heads": "12", "tp": "8"})]),
    # `divide()` in another framework's traceback.
    PastedCase(
        "https://github.com/hpcaitech/ColossalAI/issues/3043",
        "    assert numerator % denominator == 0, \\\n"
        "AssertionError: 96 is not divisible by 64\n",
        [("GDR401", {"numerator": "96", "denominator": "64"})]),
    # The Triton launch failure: behind a Ray worker prefix, alone in a code block next to GDN kernels (the
    # Qwen3-Next ceiling of 65535 // 32 = 2047 sequences; fla-org/flash-linear-attention#1077 packs 2050), and
    # quoted in Markdown backticks.
    PastedCase(
        "https://github.com/InternLM/lmdeploy/issues/3322",
        "(RayWorkerWrapper pid=3014724)     self.launch(*args, **kwargs)\n"
        "(RayWorkerWrapper pid=3014724) RuntimeError: Triton Error [CUDA]: invalid argument\n",
        [("GDR402", {})]),
    PastedCase(
        "https://github.com/unslothai/unsloth-zoo/pull/1092",
        "```\nRuntimeError: Triton Error [CUDA]: invalid argument\n```\n",
        [("GDR402", {})],
        tp=1, batch=2050, widths=QWEN3_NEXT,
        reasons=("HV_l = 32 value heads per rank: the largest batch that launches is 65535 // 32 = 2047",
                 "--batch 2050: the grid needs B*HV_l = 2050*32 = 65600, which crosses the limit: this is the "
                 "cause")),
    PastedCase(
        "https://github.com/fla-org/flash-linear-attention/issues/172",
        "it will raise `RuntimeError: Triton Error [CUDA]: invalid argument`\n",
        [("GDR402", {})]),
    # The weight loader's shape assert (a fused projection: no TP factor between the two).
    PastedCase(
        "https://github.com/modelscope/ms-swift/issues/8086",
        "AssertionError: Attempted to load weight (torch.Size([4096, 2560])) into parameter "
        "(torch.Size([6144, 2560]))\n",
        [("GDR407", {"weight": "4096, 2560", "parameter": "6144, 2560"})],
        reasons=("dim 0: 4096 vs 6144: no TP factor; the config's head counts or head dims differ from the "
                 "weights",)),
    # PyTorch's view of a strided tensor, as the first line of a vLLM engine's failure (Gaudi2, not a GDN model), and
    # behind another tool's prefix.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/13054",
        "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead.\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm-0.7.2+gaudi000-py3.10.egg/vllm/engine/multiprocessing/'
        'engine.py", line 380, in run_mp_engine\n',
        [("GDR411", {"advice": "Use .reshape(...) instead."})]),
    PastedCase(
        "https://github.com/ostris/ai-toolkit/issues/194",
        "Error running job: view size is not compatible with input tensor's size and stride (at least one dimension "
        "spans across two contiguous subspaces). Use .reshape(...) instead.\n",
        [("GDR411", {"advice": "Use .reshape(...) instead."})]),
    # PyTorch's older TH wording of the same error (GDR411), in a traceback as posted.
    PastedCase(
        "https://github.com/geyang/deep-auto-punctuation/issues/3",
        "    output = self.decoder(gru_output.view(-1, self.hidden_size * self.bi_mul))\n"
        "RuntimeError: invalid argument 2: view size is not compatible with input tensor's size and stride (at least "
        "one dimension spans across two contiguous subspaces). Call .contiguous() before .view(). at "
        "/opt/conda/conda-bld/pytorch_1533672544752/work/aten/src/TH/generic/THTensor.cpp:237\n",
        [("GDR411", {"advice": "Call .contiguous() before .view(). at /opt/conda/conda-bld/pytorch_1533672544752/work/"
                               "aten/src/TH/generic/THTensor.cpp:237"})]),
    # The FlashInfer `A_log` assert as quoted from the source in the thread: a format string, not an error.
    PastedCase(
        "https://github.com/sgl-project/sglang/pull/20741",
        '   assert A_log.dtype == torch.float32, f"A_log must be float32, got {A_log.dtype}"\n',
        []),
    # vLLM refusing a hybrid model's max_num_seqs: the worker's line (the PR that added the check) ...
    PastedCase(
        "https://github.com/vllm-project/vllm/pull/38270",
        "(Worker_TP1 pid=509811) ERROR 03-26 18:27:04 [multiproc_executor.py:949] ValueError: max_num_seqs (1024) "
        "exceeds available Mamba cache blocks (512). Each decode sequence requires one Mamba cache block, so CUDA "
        "graph capture cannot proceed. Please lower max_num_seqs to at most 512 or increase gpu_memory_utilization.\n",
        [("GDR412", {"seqs": "1024", "blocks": "512"})],
        reasons=("1024 sequences need 1024 state blocks and the pool has 512: 512 short; `--max-num-seqs 512` starts "
                 "the same deployment",)),
    # ... the engine core's wrapper quoting it, with text after the quote ...
    PastedCase(
        "https://github.com/vllm-project/vllm/pull/38632",
        "(EngineCore_DP0 pid=10078) RuntimeError: Worker failed with error 'max_num_seqs (1024) exceeds available "
        "Mamba cache blocks (600). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot "
        "proceed. Please lower max_num_seqs to at most 600 or increase gpu_memory_utilization.', please check the "
        "stack trace above for the root cause\n",
        [("GDR412", {"seqs": "1024", "blocks": "600"})]),
    # ... and a comment quoting only its first sentence (cut short: read on what is there, the rest named).
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/49064",
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (969).\n",
        [("GDR412", {"seqs": "1024", "blocks": "969"})],
        reasons=("the message is cut short: the engine's text goes on with `Each decode sequence requires one Mamba "
                 "cache block, so CUDA graph capture ...`",)),
    # sglang's cap on running requests by its state pool: one line ...
    PastedCase(
        "https://github.com/sgl-project/sglang/issues/38846",
        "max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 state slots per "
        "request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state "
        "size with --mamba-ssm-dtype bfloat16.\n",
        [("GDR413", {"cap": "9", "pool": "47", "ratio": "5"})],
        reasons=("`--mamba-radix-cache-strategy no_buffer` would let 15 run (3 slots each)",)),
    # ... and wrapped over four lines, as a README quoted it.
    PastedCase(
        "https://github.com/MiaAI-Lab/Qwen3.8-27B-SGLang-DGX-Spark/issues/7",
        "max_running_requests is capped to 12 by the mamba state cache\n"
        "(max_mamba_cache_size=64, 5 state slots per request). To raise it: increase\n"
        "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size\n"
        "with --mamba-ssm-dtype bfloat16.\n",
        [("GDR413", {"cap": "12", "pool": "64", "ratio": "5"})]),
    # The illegal memory access report without its first line (the Qwen3-Next thread's excerpt from its second
    # line, as a paste that lost the message's line): PyTorch's next line names cudaErrorIllegalAddress.
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/27571",
        "(Worker_DP0_TP0_EP0 pid=1539019) ERROR 10-27 20:05:10 [multiproc_executor.py:699] Search for "
        "`cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for "
        "more information.\n"
        "(Worker_DP0_TP0_EP0 pid=1539019) ERROR 10-27 20:05:10 [multiproc_executor.py:699] CUDA kernel errors "
        "might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n",
        [("GDR403", {})],
        reasons=("the message's own line (`an illegal memory access was encountered`) is not in the paste: read from "
                 "the line that follows it, which names `cudaErrorIllegalAddress`",)),
    # vLLM before 0.18 capturing a decode CUDA graph larger than its Mamba blocks: the assertion as a PR quoted it
    # (Qwen3.5-4B) ...
    PastedCase(
        "https://github.com/vllm-project/vllm/pull/35946",
        "assert num_cache_lines >= batch\nAssertionError\n",
        [("GDR417", {})]),
    # ... and inside the worker's traceback (Qwen3-Coder-Next at TP 2 on H100 NVL, vLLM 0.15.0).
    PastedCase(
        "https://github.com/QwenLM/Qwen3-Coder/issues/559",
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852]     mixed_qkv_non_spec = causal_conv1d_update(\n"
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852]                          ^^^^^^^^^^^^^^^^^^^^^\n"
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852]   File \"/usr/local/lib/python3.12/dist-packages/vllm/"
        "model_executor/layers/mamba/ops/causal_conv1d.py\", line 1160,\n"
        "  in causal_conv1d_update\n"
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852]     assert num_cache_lines >= batch\n"
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852]            ^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  ERROR 02-03 13:39:49 [multiproc_executor.py:852] AssertionError\n",
        [("GDR417", {})]),
    # vLLM refusing a max_model_len above the config's: as posted under a GGUF config's wrong max_position_embeddings
    # ...
    PastedCase(
        "https://github.com/huggingface/transformers/pull/39976",
        "User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=32768 or model_max_length=None in model's config.json).\n",
        [("GDR422", {"length": "131072", "key": "max_position_embeddings", "derived": "32768",
                     "model_max_length": "None"})],
        reasons=("131072 asked, 32768 derived from `max_position_embeddings`: 4x the model's length",)),
    # ... and inside a wrapper's message (a worker address in front, the message cut at "This").
    PastedCase(
        "https://github.com/xorbitsai/inference/issues/1715",
        "ValueError: [address=127.0.0.1:37657, pid=3125985] User-specified max_model_len (4096) is greater than the "
        "derived max_model_len (seq_length=2048 or model_max_length=None in model's config.json). This\n",
        [("GDR422", {"length": "4096", "key": "seq_length", "derived": "2048", "model_max_length": "None"})]),
    # FP8 block quantization at TP: block_n on one line (sglang's loader) ...
    PastedCase(
        "https://github.com/inclusionAI/humming/issues/69",
        "ValueError: Weight output_partition_size = 2112 is not divisible by weight quantization block_n = 128.\n",
        [("GDR414", {"partition": "output_partition_size", "width": "2112", "block_name": "block_n",
                     "block": "128"})]),
    # ... and block_k wrapped over two lines (vLLM, Qwen3.6-35B-A3B-FP8 at TP 8).
    PastedCase(
        "https://github.com/vllm-project/vllm/pull/52915",
        "ValueError: Weight input_size_per_partition = 64 is not divisible by\n"
        "weight quantization block_k = 128.\n",
        [("GDR414", {"partition": "input_size_per_partition", "width": "64", "block_name": "block_k",
                     "block": "128"})]),
    # Marlin's shape check, raised (vLLM 0.7.2 AWQ, Qwen2.5-VL-72B at TP 2: 29568 / 2 = 14784 = 128 x 115 + 64).
    PastedCase(
        "https://github.com/vllm-project/vllm/issues/13640",
        "ValueError: Weight input_size_per_partition = 14784 is not divisible by min_thread_k = 128. Consider reducing "
        "tensor_parallel_size or running with --quantization gptq.\n",
        [("GDR418", {"partition": "input_size_per_partition", "width": "14784", "thread": "min_thread_k",
                     "multiple": "128"})],
        reasons=("14784 input columns per rank = 128 x 115 + 64: not whole Marlin tiles",)),
    # sglang's Marlin repack (the title), after its JIT kernel's `Failed at <file>:<line>: ` prefix.
    PastedCase(
        "https://github.com/sgl-project/sglang/issues/43342",
        "RuntimeError: Failed at /sgl-workspace/sglang/python/sglang/kernels/jit/csrc/gemm/marlin/"
        "gptq_marlin_repack.cuh:311: size_n = 8608 is not divisible by tile_n_size = 64\n",
        [("GDR419", {"width": "8608", "multiple": "64"})],
        reasons=("8608 output columns per rank = 64 x 134 + 32: not whole repack tiles",)),
    # The AWQ fallback as vLLM 0.7 logged it (the PR that added it).
    PastedCase(
        "https://github.com/vllm-project/vllm/pull/13119",
        "WARNING 02-11 22:26:57 awq_marlin.py:131] Layer 'model.layers.0.mlp.down_proj' is not supported by "
        "AWQMarlin. Falling back to unoptimized AWQ kernels.\n",
        [("GDR420", {"prefix": "model.layers.0.mlp.down_proj", "kernel": "AWQMarlin"})]),
    # The plain AWQ kernel's group check (vLLM, Qwen2.5-VL-72B AWQ at TP 2 and 4).
    PastedCase(
        "https://github.com/QwenLM/Qwen3-VL/issues/831",
        "ValueError: The input size is not aligned with the quantized weight shape. This can be caused by too large "
        "tensor parallel size.\n",
        [("GDR421", {})]),
]
