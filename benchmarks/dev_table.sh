#!/usr/bin/env bash
# The end-to-end dev table with the bundled local model: the fixed dev slice (data/slices/dev60/, built by
# scripts/build_dev_slice.py: every answerable QALD-10 dev question, a seeded sample of WWQ and QALD-9-plus dev),
# full, no-auto-run and spinach side by side, one run after another (one model on the CPU). Every step resumes, so
# a second invocation continues where an interrupted one stopped. About 62 x 3 x 50 s = 2.6 hours on 2 idle cores.
#
#   bash benchmarks/dev_table.sh                 # writes runs/dev60/, the protocol tables (per run and pooled
#                                                # per variant: runs/dev60/pooled.json) and the eval report
#   VARIANTS="full spinach" OUT=runs/x bash benchmarks/dev_table.sh
#   EXTRA="--demo-anchors 0 --demo-steps 8" OUT=runs/y bash benchmarks/dev_table.sh   # other settings, every run
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/dev60}
VARIANTS=${VARIANTS:-full no-auto-run spinach}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
common=(--split dev --no-lm-cache --num-threads 1 --max-steps 10 --no-progress --no-mlflow --resume)
read -ra extra <<< "${EXTRA:-}"
common+=("${extra[@]}")

runs=()
for ids in data/slices/dev60/*.ids; do
    dataset=$(basename "$ids" .ids)
    for variant in $VARIANTS; do
        "$PY" -m saga_dspy.eval "${common[@]}" --dataset "$dataset" --ids "@$ids" --variant "$variant" \
            --out "$OUT/$dataset/$variant"
        runs+=("$OUT/$dataset/$variant")
    done
done
pooled=()
for variant in $VARIANTS; do
    dirs=("$OUT"/*/"$variant")
    pooled+=("$variant=$(IFS=,; echo "${dirs[*]}")")
done
"$PY" benchmarks/protocol_table.py --json "$OUT/protocol.json" "${runs[@]}"
"$PY" benchmarks/protocol_table.py --json "$OUT/pooled.json" "${pooled[@]}"
"$PY" -m saga_dspy.eval report "${runs[@]}"
