"""`eval compare RUN_A RUN_B [...]`: runs question by question. For every question: each run's F1 and final
SPARQL and each later run's change against the first; the rows sorted by that change (the second run's: losses
first); above them each later run's paired bootstrap 95% CI of F1 against the first (`eval.scoring.significance`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.reports.runs import Run, run_labels
from saga_dspy.eval.scoring.report import f1_by_id, md_code, md_table, md_text
from saga_dspy.eval.scoring.significance import paired_by_id
from saga_dspy.kg.sparql_parse import split_declarations


def compare_runs(runs: Sequence[Run]) -> dict[str, Any]:
    """The comparison as plain data (what `--json` prints): `runs`, `against` (each later run's paired comparison
    with the first), `questions` (sorted by the second run's change; a question a run lacks has None there)."""
    if len(runs) < 2:
        raise EvalError("compare needs at least two runs (a directory with several variants counts as several)")
    labels = run_labels(runs)
    benchmarks = {r.benchmark for r in runs}
    scores = [f1_by_id(r.lines) for r in runs]
    against = []
    for label, score in zip(labels[1:], scores[1:]):
        c = paired_by_id(scores[0], score)
        against.append({"run": label, "against": labels[0], **c.as_dict(), "describe": c.describe()})
    by_id: dict[str, dict[str, Any]] = {}
    for label, run in zip(labels, runs):
        for line in run.lines:
            qid = str(line["id"])
            row = by_id.setdefault(qid, {"id": qid, "question": line.get("question") or "", "runs": {}})
            row["runs"][label] = {"f1": float(line.get("f1") or 0.0), "sparql": line.get("sparql") or ""}
    for row in by_id.values():
        base = row["runs"].get(labels[0])
        row["delta"] = {
            label: (row["runs"][label]["f1"] - base["f1"] if base and label in row["runs"] else None)
            for label in labels[1:]
        }
    first_delta = labels[1]
    questions = sorted(
        by_id.values(),
        key=lambda r: (r["delta"][first_delta] is None, r["delta"][first_delta] or 0.0, _id_key(r["id"])),
    )
    return {
        "runs": [
            {"label": lab, "dir": str(r.path), "variant": r.variant, "benchmark": r.benchmark, "n": len(r.lines)}
            for lab, r in zip(labels, runs)
        ],
        "benchmarks": sorted(benchmarks),
        "against": against,
        "questions": questions,
    }


def _id_key(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def _code(text: str) -> str:
    """A SPARQL query as one markdown table cell, without its leading PREFIX declarations (the JSON keeps them)."""
    return md_code(split_declarations(str(text).strip())[1])


def _points(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}"


def compare_markdown(result: dict[str, Any]) -> str:
    """The comparison as markdown: the runs, each later run's CI against the first, then the questions."""
    labels = [r["label"] for r in result["runs"]]
    out = ["# Per-question comparison", ""]
    out += [
        f"- **{md_text(r['label'])}**: {md_code(r['dir'])} ({md_text(r['benchmark'])}, {r['n']} questions)"
        for r in result["runs"]
    ]
    if len(result["benchmarks"]) > 1:
        out.append(f"- note: the runs are on different benchmarks ({md_text(', '.join(result['benchmarks']))})")
    out.append("")
    for a in result["against"]:
        out.append(
            f"F1 change of **{md_text(a['run'])}** against **{md_text(a['against'])}**, in points: {a['describe']}"
        )
    out.append("")
    header = ["id", "question", *[f"F1 {lab}" for lab in labels], *[f"change {lab}" for lab in labels[1:]]]
    header += [f"SPARQL {lab}" for lab in labels]
    rows = []
    for q in result["questions"]:
        runs = q["runs"]
        f1s = [f"{100 * runs[lab]['f1']:.1f}" if lab in runs else "-" for lab in labels]
        deltas = [_points(q["delta"][lab]) for lab in labels[1:]]
        sparqls = [_code(runs[lab]["sparql"]) if lab in runs else "-" for lab in labels]
        rows.append([q["id"], q["question"], *f1s, *deltas, *sparqls])  # md_table escapes the text cells
    out.append(md_table(header, rows))
    return "\n".join(out) + "\n"
