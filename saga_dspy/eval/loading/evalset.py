"""The eval set: the questions of a benchmark split with their frozen gold, answerable ones by default, then the ids and
limit asked for."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saga_dspy.config import Settings
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.loading.datasets import filter_report, load_benchmark, load_records
from saga_dspy.eval.loading.gold import find_gold, resolve_split
from saga_dspy.eval.loading.splits import is_train_split, without_test_twins
from saga_dspy.input_files import MAX_IDS_BYTES, check_input_file

if TYPE_CHECKING:  # pragma: no cover
    import datasets

log = logging.getLogger(__name__)


@dataclass
class EvalItem:
    """One question to evaluate, with its frozen gold result (SPARQL-JSON text)."""

    id: str
    question: str
    gold: str | None
    gold_sparql: str | None = None
    answer_type: str | None = None
    source_answers: str | None = None
    answerable: bool | None = None  # the frozen gold's verdict (eval.loading.answerability); None: not frozen

    @property
    def is_boolean(self) -> bool:
        return self.gold is not None and '"boolean"' in self.gold and '"results"' not in self.gold

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EvalItem:
        """The item of a `load_benchmark` row."""
        return cls(
            id=row["id"],
            question=row["question"],
            gold=row.get("gold"),
            gold_sparql=row.get("sparql"),
            answer_type=row.get("answer_type"),
            source_answers=row.get("source_answers"),
            answerable=row.get("answerable"),
        )


@dataclass
class EvalSet:
    """The questions as a `datasets.Dataset` (`load_benchmark`'s columns, in evaluation order);
    `items` makes the `EvalItem`s from its rows when asked."""

    data: datasets.Dataset
    dataset: str
    split: str
    gold_file: str | None
    filter_report: dict[str, Any] | None
    gold_summary: dict[str, Any] | None = None
    selection: dict[str, Any] = field(default_factory=dict)

    @property
    def items(self) -> list[EvalItem]:
        return [EvalItem.from_row(row) for row in self.data]

    def __len__(self) -> int:
        return len(self.data)

    @property
    def name(self) -> str:
        """`dataset/split`: how runs, charts and the tracked dataset input name this set."""
        return f"{self.dataset}/{self.split}"

    def select_ids(self, wanted: Sequence[str], **selection: Any) -> EvalSet:
        """The questions with these ids, in this order (each must be in the set)."""
        index = {qid: i for i, qid in enumerate(self.data["id"])}
        return replace(
            self, data=self.data.select([index[qid] for qid in wanted]), selection={**self.selection, **selection}
        )

    def rows(self) -> list[dict[str, Any]]:
        """The questions as plain rows (what the tracked runs log as their MLflow dataset input)."""
        return [
            {
                "id": item.id,
                "question": item.question,
                "gold_sparql": item.gold_sparql or "",
                "is_boolean": item.is_boolean,
            }
            for item in self.items
        ]


def parse_ids(values: Sequence[str] | None) -> list[str] | None:
    """`--ids 1,2 --ids 3` or `--ids @file` (ids separated by lines, spaces or commas) -> ['1', '2', '3']."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            text = check_input_file(value[1:], "ids file", MAX_IDS_BYTES).read_text(encoding="utf-8")
            parts = text.replace(",", " ").split()
        else:
            parts = value.split(",")
        out.extend(p.strip() for p in parts if p.strip())
    return list(dict.fromkeys(out))


def _without_test_twins(ds, dataset: str, split: str, settings: Settings, report: dict[str, Any] | None):
    """A bundled train split without the twins of test questions (`eval.loading.splits.without_test_twins`), counted
    among the questions left out."""
    rows = ds.to_list()
    kept, twins = without_test_twins(rows, dataset, split, settings)
    if not twins:
        return ds, report
    ids = {id(r) for r in kept}
    ds = ds.select([i for i, r in enumerate(rows) if id(r) in ids])
    log.info("%s/%s: left out %d twins of test questions of its graph's benchmarks", dataset, split, twins)
    if report is not None:
        reasons = {**report.get("reasons", {}), "test_twin": twins}
        report = {**report, "kept": len(ds), "left_out": report.get("left_out", 0) + twins, "reasons": reasons}
    return ds, report


def load_eval_set(
    settings: Settings,
    *,
    ids: Sequence[str] | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    answerable_only: bool = True,
    progress: bool = True,  # unused: reading shows no progress (freezing did); kept for its callers
) -> EvalSet:
    """The questions of `settings.dataset`/`settings.split` with frozen gold; answerable ones by
    default; then `ids` (in the given order), then `settings.limit`. Reads only: gold not frozen yet is an error
    that names `freeze-gold` (a run freezes it first where it may, `gold.freeze_missing_gold`)."""
    dataset, split = settings.dataset, settings.split
    path = find_gold(settings, dataset, split, data_file=data_file, gold_file=gold_file)
    try:
        ds = load_benchmark(dataset, split, settings, data_file, gold_file=path, answerable_only=answerable_only)
    except (ValueError, FileNotFoundError) as exc:
        raise EvalError(str(exc)) from exc
    report = filter_report(ds) if answerable_only else None
    resolved = ds[0]["split"] if len(ds) else resolve_split(dataset, split)
    if data_file is None and is_train_split(dataset, resolved):
        ds, report = _without_test_twins(ds, dataset, resolved, settings, report)
    if not answerable_only:
        missing = list(ds["gold"]).count(None)
        if missing:
            log.warning(
                "%d questions have no frozen gold result (gold error or not frozen); they score 0 when "
                "predicted non-empty",
                missing,
            )
    evalset = EvalSet(
        ds,
        dataset,
        resolved,
        str(path) if path else None,
        report,
        _gold_summary(path),
        {"answerable_only": answerable_only, "after_filter": len(ds)},
    )
    if ids:
        present = set(ds["id"])
        _check_unknown_ids([i for i in ids if i not in present], settings, split, resolved, data_file)
        evalset = evalset.select_ids([i for i in ids if i in present], ids=list(ids))
    if settings.limit is not None:
        n = min(len(evalset), max(0, settings.limit))
        evalset = replace(
            evalset, data=evalset.data.select(range(n)), selection={**evalset.selection, "limit": settings.limit}
        )
    return evalset


def _gold_summary(path: Path | None) -> dict[str, Any] | None:
    """The frozen gold's `<stem>.summary.json` (what freezing counted), None where there is none to read."""
    summary_path = Path(str(path).replace(".jsonl.gz", ".summary.json")) if path else None
    if summary_path is None or not summary_path.exists():
        return None
    try:
        return json.loads(summary_path.read_text(encoding="utf-8"))
    except ValueError:
        return None


def _check_unknown_ids(
    unknown: list[str], settings: Settings, split: str, resolved: str, data_file: str | Path | None
) -> None:
    """Ids asked for that the eval set lacks: an EvalError for those not in the split at all, a warning for those
    the answerable filter left out."""
    if not unknown:
        return
    all_ids = {r["id"] for r in load_records(settings.dataset, split, settings, data_file)}
    not_in_split = [i for i in unknown if i not in all_ids]
    left_out = [i for i in unknown if i in all_ids]
    if not_in_split:
        raise EvalError(f"ids not in {settings.dataset}/{resolved}: {', '.join(not_in_split[:20])}")
    log.warning(
        "ids left out by the answerable filter (pass --all-questions to keep them): %s",
        ", ".join(left_out[:20]),
    )


def describe_filter(evalset: EvalSet) -> str:
    report = evalset.filter_report
    if not report:
        return f"{evalset.name}: all questions kept (no answerable filter)"
    reasons = dict(report.get("reasons", {}))
    twins = reasons.pop("test_twin", 0)
    why = f"gold result {', '.join(f'{k}: {v}' for k, v in reasons.items()) or 'none'}"
    if twins:
        why += f"; twins of test questions: {twins}"
    return (
        f"{evalset.name}: {report['kept']} of {report['total']} questions answerable on "
        f"this endpoint; left out {report['left_out']} ({why}); evaluating {len(evalset)}"
    )
