#!/usr/bin/env bash
# The local-model figures of issues 4 §6 and 5 on the bundled sample, one run after another
# (one model on the CPU: parallel runs only slow each other down). Every step resumes, so a
# second invocation continues where an interrupted one stopped.
#
#   bash benchmarks/local_model_table.sh                 # N=10 / NA=6 QALD-10 dev questions (tables are on dev)
#   N=4 NA=2 OUT=runs/quick bash benchmarks/local_model_table.sh
#
# 1. full + spinach on the first N answerable QALD-10 dev questions (each variant with its own demos), and bench_agent's cost table
#    from those runs (seconds per step and question, LM calls and tokens against the paper's design);
# 2. the three ablations on the first NA of them: the variant table (F1 / EM / empty rate / steps);
# 3. the same NA questions zero-shot (no demonstrations) and with a BootstrapFewShot program
#    compiled on QALD-10 *train* questions (gold-teacher seeded): the optimizer's before/after.
# The LM cache is off: every call is computed, so the seconds are real. Measured here: 3-4 minutes
# a question (2 cores), so the defaults take about 2.5 hours.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/local-table}
N=${N:-10}
NA=${NA:-6}
STEPS=${STEPS:-10}
TRAIN=${TRAIN:-8}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
SPLIT=${SPLIT:-dev}  # never tune on test: set SPLIT=test only for the final, untouched figures
common=(--dataset qald10 --split "$SPLIT" --no-lm-cache --num-threads 1 --max-steps "$STEPS" --no-progress --resume)

"$PY" -m saga_dspy.eval "${common[@]}" --limit "$N" --variant full --variant spinach --out "$OUT/variants"
"$PY" benchmarks/bench_agent.py --from-eval "$OUT/variants/full" "$OUT/variants/spinach" --out "$OUT/bench_agent.json"
"$PY" -m saga_dspy.eval "${common[@]}" --limit "$NA" --variant no-type-filter --variant no-type-state \
    --variant no-answer-type --variant no-query-form --variant no-form-rewrite --variant no-auto-run \
    --variant no-repeat-assist --out "$OUT/variants"
"$PY" -m saga_dspy.eval "${common[@]}" --limit "$NA" --variant full --demos 0 --out "$OUT/zero-shot"
if [ ! -f "$OUT/bootstrap/program.json" ]; then
    "$PY" -m saga_dspy.optimize --optimizer bootstrap --teacher gold --dataset qald10 --split train \
        --limit "$TRAIN" --max-demos 2 --max-steps "$STEPS" --no-lm-cache --num-threads 1 --no-progress --out "$OUT/bootstrap"
fi
"$PY" -m saga_dspy.eval "${common[@]}" --limit "$NA" --program "$OUT/bootstrap/program.json" --out "$OUT/bootstrap-eval"
