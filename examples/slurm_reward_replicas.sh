#!/bin/bash
# Reward service on a Slurm allocation: the ledger owner on the first node, one replica per node.
#   sbatch --nodes=4 --ntasks-per-node=1 --cpus-per-task=64 examples/slurm_reward_replicas.sh
# Trainers then use SCALERL_REWARD_URL (printed below) and SCALERL_REWARD_TOKEN=$(cat runs/reward/score-token).
set -euo pipefail
mkdir -p runs/reward
TOKENS=runs/reward/tokens.txt
if [ ! -e "$TOKENS" ]; then  # one scoring token for trainers and replicas alike
  python -c "import secrets; print(secrets.token_hex(16))" > runs/reward/score-token
  echo "score $(cat runs/reward/score-token)" > "$TOKENS"
fi
OWNER_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun --nodes=1 --ntasks=1 -w "$OWNER_HOST" --cpus-per-task=4 --overlap \
  scalerl-env serve --host 0.0.0.0 --port 8100 --workers 2 --ledger runs/reward/ledger.duckdb \
  --token-file "$TOKENS" &
until curl -sf "http://$OWNER_HOST:8100/readyz" > /dev/null; do sleep 2; done
srun --ntasks-per-node=1 --cpus-per-task="$SLURM_CPUS_PER_TASK" --overlap \
  scalerl-env serve --host 0.0.0.0 --port 8000 --workers "$SLURM_CPUS_PER_TASK" \
  --ledger-owner "http://$OWNER_HOST:8100" --token-file "$TOKENS" --owner-token-file runs/reward/score-token &
echo "SCALERL_REWARD_URL=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed 's|.*|http://&:8000|' | paste -sd,)"
wait
