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

    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate

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


ASK_TRUE = {"head": {}, "boolean": True}
ASK_FALSE = {"head": {}, "boolean": False}


def write_run(path, scores: dict[str, float], *, variant: str = "full", questions: dict[str, str] | None = None):
    """A run directory written by hand (config.json, predictions.jsonl, no metrics.json), one ASK question per
    id: gold true, answered true when its score is 1 (false otherwise), with `scores` as the stored F1 (which
    may be anything a tampered file holds). Returns the path."""
    import json
    from pathlib import Path

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = {"kind": "eval", "dataset": "qald10", "split": "test", "variant": variant, "ids": list(scores)}
    (path / "config.json").write_text(json.dumps(config))
    lines = []
    for qid, f1 in scores.items():
        right = f1 == 1.0
        lines.append(
            {
                "id": qid,
                "question": (questions or {}).get(qid, f"question {qid}?"),
                "gold": ASK_TRUE,
                "gold_answerable": True,
                "sparql": "ASK { ?s ?p ?o }",
                "answers": ASK_TRUE if right else ASK_FALSE,
                "f1": f1,
                "em": right,
                "is_boolean": True,
                "empty": False,
                "final_status": "ok",
            }
        )
    (path / "predictions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
