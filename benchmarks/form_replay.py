"""What a recorded run would score with this checkout's form rewrite, without an LLM: each answerable line's final
query before any rewrite is run on the embedded store and rewritten by `agent.query_form.to_form` to the question's
recorded form (a COUNT question's SELECT is counted unless its values are stored numbers) where the run's variant
rewrites, then scored against the frozen gold. Lines whose final query changes are listed; the episodes themselves
are as recorded.

    .venv/bin/python benchmarks/form_replay.py runs/dev60/qald10/no-auto-run [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.agent.query_form import to_form  # noqa: E402
from saga_dspy.config import Settings  # noqa: E402
from saga_dspy.eval.scoring.metrics import answer_f1  # noqa: E402
from saga_dspy.kg.endpoint import open_endpoint  # noqa: E402
from saga_dspy.kg.errors import SparqlError  # noqa: E402
from saga_dspy.variants import variant_of  # noqa: E402


def replay_run(run: Path, endpoint: Any) -> dict[str, Any]:
    lines = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    lines = [x for x in lines if x.get("gold_answerable", True)]
    variant = json.loads((run / "config.json").read_text(encoding="utf-8")).get("variant") or "full"
    rewrites = variant_of(variant).agent.form_rewrite  # a variant without the rewrite keeps its queries
    changed = []
    total = 0.0
    for line in lines:
        f1 = float(line.get("f1") or 0)
        final = line.get("rewritten_from") or line.get("sparql")
        form = line.get("query_form") or "ANY"
        if rewrites and final and not line.get("rewritten_from"):
            try:
                rewritten = to_form(form, final, endpoint.query(final))
                new_f1 = answer_f1(endpoint.query(rewritten), line["gold"]) if rewritten else f1
            except SparqlError:
                rewritten, new_f1 = None, f1
            if rewritten:
                changed.append({"id": line["id"], "source": line.get("final_source"), "f1": f1, "new_f1": new_f1})
                f1 = new_f1
        total += f1
    n = len(lines)
    recorded = sum(float(x.get("f1") or 0) for x in lines) / n if n else 0.0
    return {"run": str(run), "n": n, "f1": recorded, "f1_replayed": total / n if n else 0.0, "changed": changed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run directories on the embedded store")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    endpoint = open_endpoint(Settings(mlflow=False, result_cache=False))
    try:
        rows = [replay_run(run, endpoint) for run in args.runs]
    finally:
        endpoint.close()
    print("| run | n | F1 recorded | F1 with the rewrite | queries rewritten (F1 up / down) |")
    print("|---|---|---|---|---|")
    for r in rows:
        up = sum(1 for c in r["changed"] if c["new_f1"] > c["f1"])
        down = sum(1 for c in r["changed"] if c["new_f1"] < c["f1"])
        print(
            f"| {r['run']} | {r['n']} | {100 * r['f1']:.1f} | {100 * r['f1_replayed']:.1f} | "
            f"{len(r['changed'])} ({up} / {down}) |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
