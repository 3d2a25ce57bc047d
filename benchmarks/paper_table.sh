#!/usr/bin/env bash
# The paper's Table 5 protocol with the bundled local model on the fixed dev slice (data/slices/dev60/): `paper`, its
# three ablations, the `spinach` baseline and this implementation's `full`, one run after another (one model on the
# CPU). Every eval resumes, so a second invocation continues where an interrupted one stopped. About 62 x 6 x 50 s
# = 5 hours on 2 idle cores. Then benchmarks/paper_table.py pools each variant over the slice, prints the table with
# paired CIs against `paper` and logs it to MLflow as one comparison (a run per variant).
#
#   bash benchmarks/paper_table.sh                       # runs/table5/, runs/table5/table5.json
#   VARIANTS="paper spinach" OUT=runs/x bash benchmarks/paper_table.sh
#   LIMIT=1 OUT=runs/dry bash benchmarks/paper_table.sh  # one question per dataset: a check of the whole path
#   CHUNK=6 bash benchmarks/paper_table.sh               # interleaved rounds: stopped early, every row pairs
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/table5}
VARIANTS=${VARIANTS:-paper paper-no-type-filter paper-no-type-state paper-no-answer-type spinach full}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
# the runs are the dev table's (one loop, the same settings, resumable), with these variants
PY="$PY" OUT="$OUT" VARIANTS="$VARIANTS" CHUNK="${CHUNK:-0}" EXTRA="${LIMIT:+--limit $LIMIT} ${EXTRA:-}" bash benchmarks/dev_table.sh
pooled=()
for variant in $VARIANTS; do
    mapfile -t dirs < <(find "$OUT" -path "*/$variant/config.json" -printf '%h\n' | sort)
    pooled+=("$variant=$(IFS=,; echo "${dirs[*]}")")
done
"$PY" benchmarks/paper_table.py --json "$OUT/table5.json" --invocation "$(basename "$OUT")" "${pooled[@]}"
