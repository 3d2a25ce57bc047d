#!/usr/bin/env bash
# The end-to-end dev table with the bundled local model: the fixed dev slice (data/slices/dev60/, built by
# scripts/build_dev_slice.py: every answerable QALD-10 dev question, a seeded sample of WWQ and QALD-9-plus dev),
# full, no-auto-run and spinach side by side, one run after another (one model on the CPU). Every step resumes, so
# a second invocation continues where an interrupted one stopped. About 62 x 3 x 50 s = 2.6 hours on 2 idle cores.
# CHUNK=N interleaves: the slice in rounds of N questions per dataset, every variant on a round before the next,
# so a run stopped early still pairs every variant on the same questions (runs under OUT/round-K/).
#
#   bash benchmarks/dev_table.sh                 # writes runs/dev60/, the protocol tables (per run and pooled
#                                                # per variant: runs/dev60/pooled.json) and the eval report
#   VARIANTS="full spinach" OUT=runs/x bash benchmarks/dev_table.sh
#   EXTRA="--demo-anchors 0 --demo-steps 8" OUT=runs/y bash benchmarks/dev_table.sh   # other settings, every run
#   CHUNK=6 OUT=runs/z bash benchmarks/dev_table.sh                                    # interleaved rounds
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-runs/dev60}
VARIANTS=${VARIANTS:-full no-auto-run spinach}
CHUNK=${CHUNK:-0}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
common=(--split dev --no-lm-cache --num-threads 1 --max-steps 10 --no-progress --no-mlflow --resume)
read -ra extra <<< "${EXTRA:-}"
common+=("${extra[@]}")

# the rounds: one (no chunking) holding the whole slice, else round K holds questions K*N+1..(K+1)*N of each dataset
rounds=()
if [ "$CHUNK" -gt 0 ]; then
    mkdir -p "$OUT/ids"
    longest=$(for f in data/slices/dev60/*.ids; do wc -l < "$f"; done | sort -n | tail -1)
    for ((k = 0; k * CHUNK < longest; k++)); do
        made=0
        for ids in data/slices/dev60/*.ids; do
            part="$OUT/ids/round-$k/$(basename "$ids")"
            mkdir -p "$(dirname "$part")"
            sed -n "$((k * CHUNK + 1)),$(((k + 1) * CHUNK))p" "$ids" > "$part"
            [ -s "$part" ] && made=1 || rm -f "$part"
        done
        [ "$made" = 1 ] && rounds+=("round-$k")
    done
fi

runs=()
run_round() {  # $1: the ids folder, $2: the run folder above the dataset folders
    for ids in "$1"/*.ids; do
        dataset=$(basename "$ids" .ids)
        for variant in $VARIANTS; do
            "$PY" -m saga_dspy.eval "${common[@]}" --dataset "$dataset" --ids "@$ids" --variant "$variant" \
                --out "$2/$dataset/$variant"
            runs+=("$2/$dataset/$variant")
        done
    done
}
if [ ${#rounds[@]} -eq 0 ]; then
    run_round data/slices/dev60 "$OUT"
else
    for round in "${rounds[@]}"; do run_round "$OUT/ids/$round" "$OUT/$round"; done
fi
pooled=()
for variant in $VARIANTS; do
    dirs=()
    for run in "${runs[@]}"; do [ "$(basename "$run")" = "$variant" ] && dirs+=("$run"); done
    pooled+=("$variant=$(IFS=,; echo "${dirs[*]}")")
done
"$PY" benchmarks/protocol_table.py --json "$OUT/protocol.json" "${runs[@]}"
"$PY" benchmarks/protocol_table.py --json "$OUT/pooled.json" "${pooled[@]}"
"$PY" -m saga_dspy.eval report "${runs[@]}"
