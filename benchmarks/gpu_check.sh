#!/usr/bin/env bash
# GPU check: torch-engine tokens/s, bf16 training step, FP32-head logprob mismatch (and vLLM's,
# where vLLM is installed). Needs a CUDA machine with the project installed (torch with CUDA); nothing
# downloads. Budget: under 5 minutes on one H100/H200-class GPU. Figures: stdout and $OUT/gpu_check.json.
#   benchmarks/gpu_check.sh                 # on the GPU machine
#   benchmarks/gpu_check.sh --allow-cpu --small --no-vllm   # CPU smoke test of the script itself
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
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
if [[ " $* " == *" --ranks "* ]]; then  # benchmarks/gpu_check_ranks.py, under its own time budget
  args=(); for a in "$@"; do [ "$a" = "--ranks" ] || args+=("$a"); done
  exec timeout 900 "$PY" benchmarks/gpu_check_ranks.py "${args[@]}"
fi
exec timeout 290 "$PY" benchmarks/gpu_check.py "$@"
