"""Answering questions: each in one of a few daemon threads, its scored line appended to the predictions file as
it finishes, a progress bar with the running F1; Ctrl-C, SIGTERM or too many infrastructure failures in a row stop
the run at once (what is still running is re-run by --resume)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from tqdm import tqdm

from saga_dspy.agent.failures import INFRASTRUCTURE, PROGRAM, is_infrastructure_error
from saga_dspy.errors import Interrupted
from saga_dspy.eval.loading.evalset import EvalItem
from saga_dspy.eval.loading.firewall import guard_kwargs
from saga_dspy.eval.running.predictions import PredictionsFile, score_prediction
from saga_dspy.eval.scoring.metrics import MetricMode

log = logging.getLogger("saga_dspy.eval")


def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="q",
        disable=not enabled,
        dynamic_ncols=True,
        mininterval=0.5,
        smoothing=0.3,
        file=sys.stderr,
    )


def answer_question(program: Any, item: EvalItem, mode: MetricMode, lm: Any = None) -> dict[str, Any]:
    """One question's scored line; an exception the program raises (it should not) is recorded in the line."""
    started = time.monotonic()
    guard = guard_kwargs(program, item.question, item.gold_sparql)  # the test firewall, per question
    try:
        if lm is not None:
            with dspy.context(lm=lm):
                pred = program(question=item.question, **guard)
        else:
            pred = program(question=item.question, **guard)
    except Exception as exc:  # the program should never raise; record it if it does
        log.warning("question %s raised %s", item.id, exc, exc_info=True)
        return score_prediction(
            item,
            None,
            mode,
            error=f"{type(exc).__name__}: {exc}",
            error_kind=INFRASTRUCTURE if is_infrastructure_error(exc) else PROGRAM,
            seconds=time.monotonic() - started,
        )
    return score_prediction(item, pred, mode, seconds=time.monotonic() - started)


class _Workers:
    """What the answering threads share: the questions left, the new lines, the running F1 on the progress bar,
    and the count of infrastructure failures in a row that stops the run."""

    def __init__(
        self,
        items: list[EvalItem],
        predictions: PredictionsFile,
        bar: Any,
        answer: Callable[[EvalItem], dict[str, Any]],
        done_lines: Sequence[dict[str, Any]],
        on_line: Callable[[dict[str, Any]], None] | None,
        max_infra_failures: int | None,
    ) -> None:
        self.todo = list(reversed(items))
        self.todo_lock = threading.Lock()
        self.stop = threading.Event()
        self.predictions, self.bar, self.answer, self.on_line = predictions, bar, answer, on_line
        self.max_infra_failures = max_infra_failures
        self.new_lines: list[dict[str, Any]] = []
        self.f1_sum = sum(float(line.get("f1") or 0.0) for line in done_lines)
        self.n_done = len(done_lines)
        self.infra_in_a_row = 0
        self.stopped: str | None = None
        self.errors: list[BaseException] = []

    def next_item(self) -> EvalItem | None:
        with self.todo_lock:
            return self.todo.pop() if self.todo else None

    def record(self, line: dict[str, Any]) -> None:
        """Count a written line (under the predictions lock); stop after too many infrastructure failures."""
        self.new_lines.append(line)
        self.n_done += 1
        self.f1_sum += line["f1"]
        self.bar.update(1)
        self.bar.set_postfix_str(f"F1={self.f1_sum / self.n_done:.3f}")
        self.infra_in_a_row = self.infra_in_a_row + 1 if line.get("error_kind") == INFRASTRUCTURE else 0
        if self.max_infra_failures and self.infra_in_a_row >= self.max_infra_failures and self.stopped is None:
            self.stopped = (
                f"stopped after {self.infra_in_a_row} questions in a row failed for the "
                f"infrastructure (last: {line.get('error')})"
            )
            self.stop.set()

    def work(self) -> None:
        """One thread's loop: take a question, answer it, append its line, until none is left or told to stop."""
        try:
            while not self.stop.is_set():
                item = self.next_item()
                if item is None:
                    return
                line = self.answer(item)
                if self.stop.is_set() or not self.predictions.append(line):
                    return
                with self.predictions.lock:
                    self.record(line)
                if self.on_line is not None:
                    self.on_line(line)
        except BaseException as exc:  # pragma: no cover - a bug in scoring/writing
            self.errors.append(exc)
            self.stop.set()

    def run(self, num_threads: int) -> bool:
        """Run the threads to the end; returns whether Ctrl-C / SIGTERM interrupted them."""
        n = len(self.todo)
        threads = [
            threading.Thread(target=self.work, name=f"saga-eval-{i}", daemon=True)
            for i in range(max(1, min(num_threads, n)) if n else 0)
        ]
        if not threads:
            self.bar.close()
            return False
        for t in threads:
            t.start()
        interrupted = False
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
            self.stop.set()
            self.predictions.close()  # waits for a line being written; no line is written after this
        finally:
            self.bar.close()
        return interrupted


def run_questions(
    program: Any,
    items: Sequence[EvalItem],
    predictions: PredictionsFile,
    *,
    mode: MetricMode,
    num_threads: int = 1,
    lm: Any = None,
    progress: bool = True,
    desc: str = "eval",
    done_lines: Sequence[dict[str, Any]] = (),
    total: int | None = None,
    on_line: Callable[[dict[str, Any]], None] | None = None,
    max_infra_failures: int | None = None,
) -> tuple[list[dict[str, Any]], bool, str | None]:
    """Answer `items` in `num_threads` daemon threads, appending one line per finished question.

    Returns (new lines, interrupted, stopped: why the run stopped early or None). Ctrl-C / SIGTERM
    stops taking new questions and returns at once (questions still running are not written: they
    are re-run by --resume); so do `max_infra_failures` infrastructure failures in a row."""
    items = list(items)
    bar = _progress_bar(total if total is not None else len(items) + len(done_lines), len(done_lines), desc, progress)
    workers = _Workers(
        items,
        predictions,
        bar,
        lambda item: answer_question(program, item, mode, lm),
        done_lines,
        on_line,
        max_infra_failures,
    )
    if workers.n_done:
        bar.set_postfix_str(f"F1={workers.f1_sum / workers.n_done:.3f}")
    interrupted = workers.run(num_threads)
    if workers.errors:
        raise workers.errors[0]
    return workers.new_lines, interrupted, workers.stopped
