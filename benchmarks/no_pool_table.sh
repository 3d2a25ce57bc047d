#!/usr/bin/env bash
# The agent where a benchmark has no demo pool of its own, with the bundled local model: SPINACH dev (no pool of
# its own: the shared pool by default) and QALD-10 dev with the shared pool, its own records excluded; full and
# spinach side by side, one run after another (one model on the CPU). Every step resumes.
#
#   bash benchmarks/no_pool_table.sh                      # writes runs/no-pool/, then the protocol table
#   N=10 OUT=runs/quick bash benchmarks/no_pool_table.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/no-pool}
N=${N:-30}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
common=(--split dev --no-lm-cache --num-threads 1 --max-steps 10 --no-progress --no-mlflow --resume)

for variant in full spinach; do
    "$PY" -m saga_dspy.eval "${common[@]}" --dataset spinach --variant "$variant" --out "$OUT/spinach-dev/$variant"
done
for variant in full spinach; do
    "$PY" -m saga_dspy.eval "${common[@]}" --dataset qald10 --limit "$N" --demo-pool shared --demo-pool-exclude qald10 \
        --variant "$variant" --out "$OUT/qald10-dev-shared/$variant"
done
"$PY" benchmarks/protocol_table.py --json "$OUT/protocol.json" "$OUT"/spinach-dev/{full,spinach} \
    "$OUT"/qald10-dev-shared/{full,spinach}
