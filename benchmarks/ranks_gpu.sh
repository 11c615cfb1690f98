#!/bin/bash
# The runs of docs/performance-log.md, "Every TP rank". Needs torch, triton and one or more CUDA GPUs.
# gdr-check dry-run --ranks all: with one GPU the N rank processes share GPU 0 through gloo; with N GPUs, NCCL.
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export GDR_CHECK_SGLANG_PATH=${GDR_CHECK_SGLANG_PATH:?point it at sglang 0.5.23 (a wheel or its fused_recurrent.py)}
LOG=${OUT:-.}/ranks.log
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "gpus", torch.cuda.device_count())' >> $LOG 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv >> $LOG 2>&1
run() { echo "=== $* ===" >> $LOG; s=$(date +%s.%N); timeout 200 python3 -m gdr_check dry-run "$@" --timeout 180 >> $LOG 2>&1; rc=$?; e=$(date +%s.%N); echo "=== rc=$rc wall=$(python3 -c "print(round($e-$s,1))") s ===" >> $LOG; }
for tp in 2 4; do
  for m in Qwen/Qwen3-Next-80B-A3B-Instruct moonshotai/Kimi-Linear-48B-A3B-Instruct; do
    run $m --tp $tp --ranks all
    run $m --tp $tp --ranks all --backend sglang
  done
done
GDR_CHECK_RANKS_TEST_MISSHARD=a-head-block run Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 --ranks all --steps 1
GDR_CHECK_RANKS_TEST_MISSHARD=unsliced-A_log run Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 --ranks all --steps 1
GDR_CHECK_RANKS_TEST_MISSHARD=unsplit-qkv run Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 --ranks all --steps 1
GDR_CHECK_RANKS_TEST_MISSHARD=kda-gate-by-hv run moonshotai/Kimi-Linear-48B-A3B-Instruct --tp 2 --ranks all --steps 1
echo done >> $LOG
