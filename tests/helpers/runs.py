"""Run directories made by a real scripted-LM evaluation, shared by the tests of what reads them (the tables,
`eval compare`, `eval export`, `eval report`): import the fixture into a test module to use it."""

from __future__ import annotations

import pytest
from conftest import scripted_settings

from helpers.scripted_lm import TwoVariantLM, scripted_plans, wrong_plan

RUN_IDS = ("0", "5", "17", "9", "13", "8")  # entity, entity, boolean, entity, count, literal


@pytest.fixture(scope="session")
def two_variant_run(store_path, endpoint, search, tmp_path_factory):
    """`full` and `spinach` on six QALD-10 test questions: full runs each gold query, spinach misses the
    second and the fifth (an item no gold holds). Returns (run directory, eval set, printed summary)."""
    import io

    from saga_dspy.eval.evalset import load_eval_set
    from saga_dspy.eval.runner import evaluate

    settings = scripted_settings("test")
    evalset = load_eval_set(settings, ids=list(RUN_IDS), progress=False)
    plans = scripted_plans(evalset.items)
    missed = [evalset.items[1], evalset.items[4]]
    lm = TwoVariantLM(plans, {item.question: wrong_plan(item.question) for item in missed})
    out = tmp_path_factory.mktemp("runs") / "two"
    stream = io.StringIO()
    evaluate(
        settings,
        ["full", "spinach"],
        out=out,
        ids=list(RUN_IDS),
        lm=lm,
        endpoint=endpoint,
        search=search,
        progress=False,
        stream=stream,
    )
    return out, evalset, stream.getvalue()
