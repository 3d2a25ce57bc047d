"""predictions.jsonl: one line per finished question (question, gold, prediction, scores, counters, trajectory),
appended and flushed under a lock; read back for --resume."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from saga_dspy.agent.failures import PROGRAM, QUERY
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.files import open_append, write_file
from saga_dspy.eval.loading.evalset import EvalItem
from saga_dspy.eval.scoring.metrics import MetricMode, answer_f1, check_scores

log = logging.getLogger(__name__)


PREDICTIONS = "predictions.jsonl"


def _jsonable(obj: Any) -> Any:
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "to_json"):
        try:
            return obj.to_json()
        except Exception:  # a prediction field that cannot serialise itself is written as text below
            pass
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        try:
            return _jsonable(obj.to_dict())
        except Exception:  # as above: fall through to the generic forms
            pass
    if hasattr(obj, "__dataclass_fields__"):
        return _jsonable(asdict(obj))
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _is_empty_answer(answers: Any) -> bool:
    if answers is None:
        return True
    rows = getattr(answers, "rows", None)
    if rows is not None:
        return not rows
    return False


def score_answers(
    answers: Any, gold: Any, mode: MetricMode, answerable: bool | None = None
) -> tuple[float, str | None]:
    """(F1, why it could not be computed or None) of answers against the frozen gold result.

    A gold result that is not answerable (`eval.loading.answerability`: empty, COUNT 0, unconfirmed ASK
    false) scores 0 whatever was predicted: with --all-questions it never inflates the score."""
    if gold is None:
        return 0.0, "no frozen gold result for this question"
    try:
        f1 = float(answer_f1(answers, gold, mode=mode))
    except ValueError as exc:
        return 0.0, f"metric: {exc}"
    return (0.0 if answerable is False else f1), None


def score_prediction(
    item: EvalItem,
    pred: Any,
    mode: MetricMode,
    *,
    error: str | None = None,
    error_kind: str | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """One predictions.jsonl line: the question, gold, prediction, scores, counters and trajectory."""
    get = (lambda k, d=None: getattr(pred, k, d)) if pred is not None else (lambda k, d=None: d)
    answers = get("answers")
    status = get("final_status") or ("error" if error or pred is None else "none")
    error = error or get("error")
    f1, metric_error = score_answers(answers, item.gold, mode, item.answerable)
    counters = dict(get("counters") or {})
    if seconds is not None and counters.get("seconds") is None:
        counters["seconds"] = round(seconds, 3)
    empty = _is_empty_answer(answers) or status in ("empty", "blocked", "error", "none")
    line = {
        "id": item.id,
        "question": item.question,
        "gold_sparql": item.gold_sparql,
        "gold": json.loads(item.gold) if item.gold else None,
        "sparql": get("sparql") or "",
        "answers": _jsonable(answers),
        "f1": f1,
        "em": f1 >= 1.0 - 1e-9,
        "is_boolean": item.is_boolean,
        "gold_answerable": item.answerable,
        "empty": bool(empty),
        "final_status": status,
        "final_error": get("final_error"),  # the final query's own failure (syntax, timeout): the agent's mistake
        "error": error,
        "error_kind": _error_kind(error, error_kind or get("error_kind")),
        "budget_exceeded": bool(get("budget_exceeded")),
        "metric_error": metric_error,
        "counters": _jsonable(counters),
        "answer_type": get("answer_type"),
        "query_form": get("query_form"),
        "final_source": get("final_source"),
        "final_author": _jsonable(get("final_author")),  # agent.authorship: who wrote the final query
        "rewritten_from": get("rewritten_from"),
        "demos_dropped": get("demos_dropped"),  # demos the test firewall refused (None: not guarded)
        "notes": _jsonable(get("notes") or []),
        "trajectory": _jsonable(get("trajectory") or []),
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    return line


def _error_kind(error: str | None, kind: str | None) -> str | None:
    """Whose fault: a question's error is the program's unless said otherwise; without one, only the agent's
    own failed final query (`query`) has a kind."""
    if error:
        return kind or PROGRAM
    return kind if kind == QUERY else None


class PredictionsFile:
    """predictions.jsonl: appended one flushed line per finished question, under a lock."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock = threading.Lock()
        self._fh: IO[str] | None = None
        self.closed = False

    @staticmethod
    def read(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
        """Valid lines (dicts with an id). A last line cut off by a kill is dropped (and with
        `repair`, truncated from the file so appends start on a fresh line). A line whose scores are no
        scores (NaN, infinite, outside [0, 1]: `metrics.check_scores`) is an EvalError naming it."""
        path = Path(path)
        if not path.exists():
            return []
        data = path.read_bytes()
        lines: list[dict[str, Any]] = []
        good_end = 0
        pos = number = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:  # no newline: cut off mid-write
                break
            chunk = data[pos:nl]
            pos = nl + 1
            number += 1
            if not chunk.strip():
                good_end = pos
                continue
            try:
                obj = json.loads(chunk)
            except ValueError as exc:
                if pos >= len(data):  # a garbled last line
                    break
                raise EvalError(f"{path}: a line in the middle of the file is not JSON; fix or remove it") from exc
            if isinstance(obj, dict) and "id" in obj:
                try:
                    lines.append(check_scores(obj, f"{path} line {number} (id {str(obj['id'])[:40]!r})"))
                except ValueError as exc:
                    raise EvalError(str(exc)) from None
            good_end = pos
        if repair and good_end < len(data):
            log.warning("%s: dropping a cut-off last line (%d bytes)", path, len(data) - good_end)
            write_file(path, data[:good_end])
        return lines

    @staticmethod
    def rewrite(path: Path, lines: Iterable[dict[str, Any]]) -> None:
        """Replace the file atomically with these lines."""
        write_file(path, "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines))

    def append(self, line: dict[str, Any]) -> bool:
        text = json.dumps(line, ensure_ascii=False, default=str) + "\n"
        with self.lock:
            if self.closed:
                return False
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open_append(self.path)
            self._fh.write(text)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            return True

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def last_by_id(lines: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in lines:
        out[str(line["id"])] = line
    return out
