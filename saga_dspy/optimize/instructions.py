"""DSPy's instruction optimizers on the SAGA program: MIPROv2 and GEPA.

Both start from a program that already carries its compiled demo pool, so the per-question demo selection
stays: the pool's demos replace a predictor's fixed demos at every call, so MIPROv2 runs in its instruction-only
mode (no fixed demo sets to search) and GEPA, which only rewrites instructions, needs nothing else. They see
only the predictors named in `tuned` (`TunedProgram`; by default the controller, which every step calls):
each predictor multiplies their trials, and the answer-type, extract and prune calls are rare or decided by
rules. The saved program is a plain `SagaProgram` state: every predictor, the pool and k.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Sequence
from typing import Any

import dspy

from saga_dspy.agent.program import SagaProgram
from saga_dspy.optimize.candidates import Candidate, instructions_of
from saga_dspy.optimize.metric import Metric
from saga_dspy.optimize.sets import OptimizeError

log = logging.getLogger(__name__)

CONTROLLER = "react.react"
MIPRO_MISSING = "MIPROv2 needs optuna: pip install -e . (it is a dependency) or pip install optuna"
GEPA_MISSING = "GEPA needs the gepa package: pip install -e . (it comes with dspy) or pip install gepa"


class TunedProgram(SagaProgram):
    """The SAGA program as an instruction optimizer sees it: only the predictors named in `tuned`."""

    tuned: tuple[str, ...] = (CONTROLLER,)

    def named_predictors(self):
        return [(name, p) for name, p in super().named_predictors() if name in self.tuned]


def check_available(optimizer: str) -> None:
    if optimizer == "mipro" and importlib.util.find_spec("optuna") is None:
        raise OptimizeError(MIPRO_MISSING)
    if optimizer == "gepa" and importlib.util.find_spec("gepa") is None:
        raise OptimizeError(GEPA_MISSING)


def run_mipro(
    student: TunedProgram,
    trainset: Sequence[dspy.Example],
    valset: Sequence[dspy.Example],
    metric: Metric,
    *,
    auto: str | None,
    num_trials: int | None,
    num_candidates: int | None,
    num_threads: int,
    seed: int,
    prompt_lm: Any = None,
    task_lm: Any = None,
) -> tuple[SagaProgram, list[Candidate]]:
    """MIPROv2 over the tuned predictors' instructions; (the best program, every fully evaluated trial)."""
    check_available("mipro")
    auto = None if auto in (None, "none") else auto
    kwargs: dict[str, Any] = {} if auto else {"num_candidates": num_candidates or 3}
    optimizer = dspy.MIPROv2(
        metric=metric,
        prompt_model=prompt_lm,
        task_model=task_lm,
        auto=auto,
        max_bootstrapped_demos=0,  # the pool gives the demos
        max_labeled_demos=0,
        num_threads=num_threads,
        seed=seed,
        track_stats=True,
        **kwargs,
    )
    compile_kwargs: dict[str, Any] = {
        "trainset": list(trainset),
        "valset": list(valset),
        "minibatch_size": len(valset),
        # the program's source is far beyond a small local model's context; ten train examples with their gold too
        "program_aware_proposer": False,
        "view_data_batch_size": 3,
    }
    if not auto:
        compile_kwargs["num_trials"] = num_trials or 4
    best = optimizer.compile(student, **compile_kwargs)
    trials = []
    for number, trial in sorted((getattr(best, "trial_logs", None) or {}).items()):
        # the minibatch is the whole valset (above), so a minibatch trial's score is a valset score too
        score = trial.get("full_eval_score", trial.get("mb_score"))
        if score is None:
            continue
        program = trial.get("full_eval_program") or trial.get("mb_program")
        trials.append(
            Candidate(
                f"mipro trial {number}",
                f1=float(score) / 100.0,  # dspy's Evaluate scores in percent
                instructions=instructions_of(program, student) if program is not None else {},
            )
        )
    return best, trials


def run_gepa(
    student: TunedProgram,
    trainset: Sequence[dspy.Example],
    valset: Sequence[dspy.Example],
    metric: Metric,
    *,
    reflection_lm: Any,
    auto: str | None,
    max_metric_calls: int | None,
    num_threads: int,
    seed: int,
    log_dir: str | None = None,
    deadline: float | None = None,
) -> tuple[SagaProgram, list[Candidate]]:
    """dspy.GEPA with the F1-and-feedback metric; (the best program, every candidate with its valset F1)."""
    check_available("gepa")
    budget: dict[str, Any] = (
        {"max_metric_calls": max_metric_calls}
        if max_metric_calls
        else {"auto": None if auto in (None, "none") else auto}
    )
    if not budget.get("max_metric_calls") and not budget.get("auto"):
        budget = {"auto": "light"}
    gepa_kwargs: dict[str, Any] = {}
    if deadline is not None:
        from gepa.utils.stop_condition import TimeoutStopCondition

        gepa_kwargs["stop_callbacks"] = [TimeoutStopCondition(max(1.0, deadline - time.monotonic()))]
    optimizer = dspy.GEPA(
        metric=metric,
        reflection_lm=reflection_lm,
        num_threads=num_threads,
        seed=seed,
        track_stats=True,
        log_dir=log_dir,
        use_merge=False,  # one tuned predictor: nothing to merge
        gepa_kwargs=gepa_kwargs,
        **budget,
    )
    best = optimizer.compile(student, trainset=list(trainset), valset=list(valset))
    trials = []
    details = getattr(best, "detailed_results", None)
    if details is not None:
        for index, (program, score) in enumerate(zip(details.candidates, details.val_aggregate_scores)):
            trials.append(
                Candidate(f"gepa candidate {index}", f1=float(score), instructions=instructions_of(program, student))
            )
    return best, trials


__all__ = ["CONTROLLER", "TunedProgram", "check_available", "run_gepa", "run_mipro"]
