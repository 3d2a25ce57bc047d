"""The compile's estimate printed before it starts: seconds per question by the LM's kind (the bundled model's
50 s is no served model's), or as given."""

from __future__ import annotations

from conftest import make_settings

from saga_dspy.optimize import SECONDS_PER_RUN, SECONDS_PER_RUN_SERVED, OptimizeOptions, estimate_text, run_seconds

RUNS = {"bootstrap": 40, "candidates": 60, "report": 20}  # 120 program runs


def test_the_estimate_takes_the_lm_kind_into_account():
    options = OptimizeOptions()
    local = make_settings(lm="local")
    served = make_settings(lm="openai/gpt-4o-mini", num_threads=4)
    assert run_seconds(options, local)[0] == SECONDS_PER_RUN
    assert run_seconds(options, served)[0] == SECONDS_PER_RUN_SERVED / 4
    assert "about 100 min at 50 s a run (the bundled model on 2 cores" in estimate_text(options, RUNS, local)
    text = estimate_text(options, RUNS, served)
    assert "about 5 min at 2.5 s a run (a served model: 10 s a question, 4 threads" in text
    given = OptimizeOptions(seconds_per_run=3.0)
    assert "about 6 min at 3 s a run (as given" in estimate_text(given, RUNS, served)
