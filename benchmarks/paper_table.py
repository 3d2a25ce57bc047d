"""The paper's Table 5 protocol: `paper`, its three ablations, `spinach` and `full`, each pooled over the runs of the
fixed dev slice's datasets, with F1, EM, the empty share, who wrote the final query, and each row's paired bootstrap
CI against the first row (`paper`); logged to MLflow as one comparison: one experiment, a run per variant with its
pooled metrics and its interval against the first, all tagged with the invocation (a row per variant in the runs
table).

    .venv/bin/python benchmarks/paper_table.py --json OUT.json LABEL=DIR,DIR,... [LABEL=DIR,...]
        [--experiment NAME] [--invocation NAME] [--no-mlflow | --mlflow-uri URI]

`benchmarks/paper_table.sh` runs the evaluations (resumable) and then this. Read from each run's predictions.jsonl
(`benchmarks/protocol_table.py`'s rows), so committed runs can be tabled and logged again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from protocol_table import against_first, markdown, protocol_row  # noqa: E402

from saga_dspy.config import Settings, add_settings_args, apply_offline_env, settings_from_args  # noqa: E402
from saga_dspy.eval.tracking.tracker import INVOCATION_TAG, Tracker  # noqa: E402

EXPERIMENT = "saga-table5-dev60"
METRICS = ("f1", "em", "empty", "final_model", "final_program", "final_extract", "final_none", "no_lookup", "seconds")


def table(specs: list[str]) -> list[dict[str, Any]]:
    """The rows, each with `against_first`: its paired comparison with the first row (None for the first)."""
    rows = [protocol_row(spec) for spec in specs]
    for row, cmp in zip(rows, against_first(rows)):
        row["against_first"] = cmp.as_dict() if cmp else None
    return rows


def log_comparison(settings: Settings, rows: list[dict[str, Any]], experiment: str, invocation: str, md: str) -> None:
    """One MLflow run per row in one experiment, tagged with the invocation; the table as each run's artifact."""
    tracker = Tracker(settings, experiment, autolog=False)
    if not tracker.enabled:
        return
    with tempfile.TemporaryDirectory() as tmp:
        md_file = Path(tmp) / "table5.md"
        md_file.write_text(md + "\n", encoding="utf-8")
        for row in rows:
            tags = {INVOCATION_TAG: invocation, "saga.table": "table5"}
            params = {"variant": row["run"], "questions": row["n"], "against": rows[0]["run"]}
            with tracker.run(f"{row['run']} · {invocation}", params, tags):
                tracker.log_metrics({k: row[k] for k in METRICS if row.get(k) is not None})
                cmp = row["against_first"]
                if cmp:
                    tracker.log_metrics(
                        {
                            "f1_delta": cmp["delta"],
                            "f1_delta_low": cmp["low"],
                            "f1_delta_high": cmp["high"],
                            "wins": cmp["wins"],
                            "losses": cmp["losses"],
                            "ties": cmp["ties"],
                        }
                    )
                tracker.log_artifact(md_file)
    tracker.close()


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LABEL=DIR,DIR,... per variant (the first is the reference)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--experiment", default=EXPERIMENT, help=f"MLflow experiment (default: {EXPERIMENT})")
    parser.add_argument("--invocation", default="table5", help="the invocation tag the rows share")
    add_settings_args(parser, ["cache_dir", "mlflow", "mlflow_uri"])
    args = parser.parse_args(argv)
    rows = table(args.runs)
    md = markdown(rows)
    print(md)
    for row in rows:
        del row["f1_by_key"]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    log_comparison(settings_from_args(args), rows, args.experiment, args.invocation, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
