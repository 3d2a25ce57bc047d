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

from saga_dspy.eval.scoring.breakdown import ANSWER_KINDS, ORIGINS, answer_kind, breakdown, final_origin  # noqa: E402
from saga_dspy.eval.scoring.significance import PairedComparison, paired_by_id  # noqa: E402


def _lines(run: Path) -> list[dict[str, Any]]:
    """A run's answerable predictions lines, each with `key`: its dataset and id (unique across pooled runs)."""
    config = run / "config.json"
    dataset = json.loads(config.read_text(encoding="utf-8")).get("dataset") if config.exists() else None
    out = []
    for raw in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        if raw.strip():
            line = json.loads(raw)
            if line.get("gold_answerable", True):
                line["key"] = f"{dataset or run.parent.name}:{line.get('id')}"
                out.append(line)
    return out


def parse_spec(spec: str) -> tuple[str, list[Path]]:
    """`DIR` or `LABEL=DIR,DIR,...` -> (label, run directories)."""
    label, sep, dirs = spec.partition("=")
    if not sep:
        return spec, [Path(spec)]
    return label, [Path(d) for d in dirs.split(",") if d]


def ended_on_repeats(line: dict[str, Any]) -> bool:
    """The episode was cut because the model repeated itself with nothing left to suggest."""
    return any("repeated actions" in str(note) for note in line.get("notes") or [])


def looked_up(line: dict[str, Any]) -> bool:
    return int((line.get("counters") or {}).get("lookups") or 0) > 0


def protocol_row(spec: str) -> dict[str, Any]:
    label, runs = parse_spec(spec)
    lines = [line for run in runs for line in _lines(run)]
    n = len(lines)

    def share(pred: Any) -> float:
        return sum(1 for line in lines if pred(line)) / n if n else 0.0

    row: dict[str, Any] = {
        "run": label,
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
    row.update({k: v for k, v in breakdown(lines).items() if not k.startswith("source_")})
    booleans = [float(x.get("f1") or 0) for x in lines if answer_kind(x.get("gold")) == "boolean"]
    row["boolean_n"], row["boolean_f1"] = len(booleans), sum(booleans) / len(booleans) if booleans else None
    row["f1_by_key"] = {line["key"]: float(line.get("f1") or 0) for line in lines}
    if len(row["f1_by_key"]) < n:
        raise SystemExit(f"error: {label} pools the same question more than once (one run per dataset)")
    return row


def against_first(rows: list[dict[str, Any]]) -> list[PairedComparison | None]:
    """Each row's F1 against the first row's on the questions both scored (None for the first, and where they
    share no question: another benchmark's run)."""
    pairs = [paired_by_id(rows[0]["f1_by_key"], r["f1_by_key"]) for r in rows[1:]]
    return [None] + [cmp if cmp.n else None for cmp in pairs]


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
    out += ["", "| run | " + " | ".join(f"{k} (n)" for k in ANSWER_KINDS) + " | yes/no golds true | F1 vs first row |"]
    out.append("|---|" + "---|" * (len(ANSWER_KINDS) + 2))
    for r, cmp in zip(rows, against_first(rows)):
        cells = [_f1(r[f"{k}_f1"]) + f" ({r[f'{k}_n']})" for k in ANSWER_KINDS]
        true_rate = "" if r["boolean_true_rate"] is None else f"{100 * r['boolean_true_rate']:.0f} %"
        out.append("| " + " | ".join([r["run"], *cells, true_rate, cmp.describe() if cmp else ""]) + " |")
    return "\n".join(out)


def _f1(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="eval run directories (each with predictions.jsonl), or LABEL=DIR,DIR")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = [protocol_row(run) for run in args.runs]
    print(markdown(rows))
    if args.json:
        for r, cmp in zip(rows, against_first(rows)):
            r["against_first"] = cmp.as_dict() if cmp else None
            del r["f1_by_key"]
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
