"""Does the agent follow the tool protocol? A table over eval run directories: F1, EM, the empty share, and the
shares of questions whose episode ended on repeated actions, that never looked an entity up, and whose final query came
from the model's own execution, the program (the lookup's proposal or candidate) or the extract call.

    .venv/bin/python benchmarks/protocol_table.py runs/no-pool/spinach-dev/full runs/no-pool/spinach-dev/spinach
    .venv/bin/python benchmarks/protocol_table.py --json out.json RUN_DIR [RUN_DIR ...]

Read from each run's predictions.jsonl alone (the same lines `eval rescore` reads), so committed runs can be
tabled again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from saga_dspy.eval.breakdown import ORIGINS, final_origin  # noqa: E402


def _lines(run: Path) -> list[dict[str, Any]]:
    path = run / "predictions.jsonl"
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            line = json.loads(raw)
            if line.get("gold_answerable", True):
                out.append(line)
    return out


def ended_on_repeats(line: dict[str, Any]) -> bool:
    """The episode was cut because the model repeated itself with nothing left to suggest."""
    return any("repeated actions" in str(note) for note in line.get("notes") or [])


def looked_up(line: dict[str, Any]) -> bool:
    return int((line.get("counters") or {}).get("lookups") or 0) > 0


def protocol_row(run: Path) -> dict[str, Any]:
    lines = _lines(run)
    n = len(lines)

    def share(pred: Any) -> float:
        return sum(1 for line in lines if pred(line)) / n if n else 0.0

    row: dict[str, Any] = {
        "run": str(run),
        "n": n,
        "f1": sum(float(x.get("f1") or 0) for x in lines) / n if n else 0.0,
        "em": sum(float(x.get("em") or 0) for x in lines) / n if n else 0.0,
        "empty": share(lambda x: bool(x.get("empty"))),
        "ended_on_repeats": share(ended_on_repeats),
        "no_lookup": share(lambda x: not looked_up(x)),
        "seconds": sum(float((x.get("counters") or {}).get("seconds") or 0) for x in lines) / n if n else 0.0,
    }
    for origin in ORIGINS:
        row[f"final_{origin}"] = share(lambda x, o=origin: final_origin(x) == o)
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| run | n | F1 | EM | empty | ended on repeats | no lookup | final: model | program | extract | none | s / q |"
    )
    out = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pct = [f"{100 * r[k]:.1f}" for k in ("f1", "em")]
        shares = [
            f"{100 * r[k]:.0f} %"
            for k in (
                "empty",
                "ended_on_repeats",
                "no_lookup",
                "final_model",
                "final_program",
                "final_extract",
                "final_none",
            )
        ]
        out.append("| " + " | ".join([r["run"], str(r["n"]), *pct, *shares, f"{r['seconds']:.1f}"]) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run directories (each with predictions.jsonl)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = [protocol_row(run) for run in args.runs]
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
