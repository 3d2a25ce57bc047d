"""`eval compare`, `eval export --format qald` and `eval report` on real run directories of a scripted-LM eval."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import REPO, scripted_settings
from helpers.scripted_lm import ScriptedLM, scripted_plans
from helpers.scripts import load_script

from saga_dspy.cli import run_main
from saga_dspy.eval.__main__ import main
from saga_dspy.eval.reports.runs import read_run
from saga_dspy.eval.scoring.metrics import answer_f1
from saga_dspy.eval.scoring.report import f1_by_id
from saga_dspy.eval.scoring.significance import paired_by_id

SCHEMA = json.loads((REPO / "tests" / "fixtures" / "qald-json.schema.json").read_text())


def _cli(argv, capsys) -> tuple[int, str, str]:
    rc = run_main(main, argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_compare_lists_questions_by_change_with_the_ci(two_variant_run, tmp_path, capsys):
    out, evalset, _ = two_variant_run
    rc, text, _ = _cli(
        ["compare", str(out / "full"), str(out / "spinach"), "--json", "--out", str(tmp_path / "c")], capsys
    )
    assert rc == 0
    result = json.loads(text)
    assert [r["label"] for r in result["runs"]] == ["full", "spinach"]
    full, spinach = read_run(out / "full"), read_run(out / "spinach")
    expected = paired_by_id(f1_by_id(full.lines), f1_by_id(spinach.lines))
    (against,) = result["against"]
    assert (against["delta"], against["low"], against["high"]) == pytest.approx(
        (expected.delta, expected.low, expected.high)
    )
    assert (against["wins"], against["losses"], against["ties"]) == (0, 2, 4)
    # the two questions spinach missed come first (most negative change), each with both runs' F1 and SPARQL
    missed = {evalset.items[1].id, evalset.items[4].id}
    first_two = result["questions"][:2]
    assert {q["id"] for q in first_two} == missed
    for q in first_two:
        assert q["delta"]["spinach"] == pytest.approx(-1.0)
        assert q["runs"]["full"]["f1"] == 1.0 and q["runs"]["spinach"]["f1"] == 0.0
        assert "wd:Q42" in q["runs"]["spinach"]["sparql"] and q["runs"]["full"]["sparql"]
        assert q["question"]
    deltas = [q["delta"]["spinach"] for q in result["questions"]]
    assert deltas == sorted(deltas) and len(deltas) == 6
    # the same as markdown (written by --out), and an invocation directory stands for its variants
    md = (tmp_path / "c.md").read_text()
    assert expected.describe() in md
    assert "| id | question | F1 full | F1 spinach | change spinach | SPARQL full | SPARQL spinach |" in md
    assert md.index(f"| {first_two[0]['id']} |") < md.index(f"| {result['questions'][-1]['id']} |")
    assert json.loads((tmp_path / "c.json").read_text()) == result
    rc, text, _ = _cli(["compare", str(out)], capsys)
    assert rc == 0 and text.startswith("# Per-question comparison") and expected.describe() in text


def test_compare_refuses_a_single_run_and_a_missing_directory(two_variant_run, tmp_path, capsys):
    out, _, _ = two_variant_run
    rc, _, err = _cli(["compare", str(out / "full")], capsys)
    assert rc == 2 and err.startswith("error: compare needs at least two runs")
    rc, _, err = _cli(["compare", str(out / "full"), str(tmp_path / "nope")], capsys)
    assert rc == 2 and "no such run directory" in err and len(err.splitlines()) == 1


def test_export_writes_qald_json_the_qald10_loader_reads(two_variant_run, tmp_path, capsys):
    out, evalset, _ = two_variant_run
    rc, text, _ = _cli(["export", str(out), "--format", "qald"], capsys)
    assert rc == 0 and "full: 6 questions" in text and "spinach: 6 questions" in text
    build = load_script("scripts/build_benchmarks.py")
    gold = {item.id: item.gold for item in evalset.items}
    for variant in ("full", "spinach"):
        path = out / variant / "qald.json"
        exported = json.loads(path.read_text())
        jsonschema.validate(exported, SCHEMA)  # QALD-10's file format
        assert exported["dataset"]["id"] == f"qald10-test-{variant}"
        assert all(isinstance(q["id"], int) for q in exported["questions"])  # as QALD-10's numeric ids
        records = build._qald(path, "wikidata", "test", build.Stats())
        run = read_run(out / variant)
        assert [r["id"] for r in records] == [line["id"] for line in run.lines]
        for record, line in zip(records, run.lines):
            assert record["question"] == line["question"] and record["sparql"].endswith(line["sparql"].strip())
            # the exported answers score what the run scored against the frozen gold
            assert answer_f1(record["source_answers"], gold[line["id"]]) == pytest.approx(line["f1"])
    rc, _, err = _cli(["export", str(out), "--format", "qald", "--out", str(tmp_path / "x.json")], capsys)
    assert rc == 2 and "--out names one file" in err


def test_qald_export_round_trips_and_its_queries_run_as_exported(two_variant_run, oxigraph_server, tmp_path, capsys):
    """The export read back by the package's own loader (a --data-file) gives the run's questions, queries, answers
    and the answer type and aggregation it wrote; each query declares its prefixes, so it parses alone and runs on a
    server that predeclares none (Oxigraph's, as QLever's and GERBIL's) with the answers exported."""
    import urllib.parse
    import urllib.request

    from rdflib.plugins.sparql import prepareQuery

    from saga_dspy.eval.loading.datasets import load_records

    out, evalset, _ = two_variant_run
    gold = {item.id: item.gold for item in evalset.items}
    kinds, flags, undeclared = set(), set(), 0
    for variant in ("full", "spinach"):  # spinach's misses are queries written without declarations
        path = tmp_path / f"{variant}.qald.json"
        rc, _, _ = _cli(["export", str(out / variant), "--format", "qald", "--out", str(path)], capsys)
        assert rc == 0
        exported = json.loads(path.read_text())
        jsonschema.validate(exported, SCHEMA)
        run = read_run(out / variant)
        records = load_records("qald10", "test", scripted_settings("test"), data_file=path)
        assert [r["id"] for r in records] == [line["id"] for line in run.lines]
        for record, q, line in zip(records, exported["questions"], run.lines):
            assert record["question"] == line["question"] and record["sparql"] == q["query"]["sparql"]
            assert (record["answer_type"], record["aggregation"]) == (q["answertype"], q["aggregation"])
            assert answer_f1(record["source_answers"], gold[line["id"]]) == pytest.approx(line["f1"])
            kinds.add(q["answertype"])
            flags.add(q["aggregation"])
            sparql = q["query"]["sparql"]
            undeclared += "PREFIX" not in line["sparql"]
            prepareQuery(sparql)  # no namespaces given: every prefix it uses is declared in it
            request = urllib.request.Request(
                oxigraph_server,
                data=urllib.parse.urlencode({"query": sparql}).encode(),
                headers={"Accept": "application/sparql-results+json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                result = json.loads(response.read())
            assert answer_f1(result, json.dumps(q["answers"][0])) == pytest.approx(1.0), sparql
    assert undeclared >= 2  # the run's own text would not parse there
    assert {"resource", "boolean", "number"} <= kinds  # RUN_IDS: entities, a yes/no question, a count
    assert flags == {True, False}


def test_qald_export_writes_ids_as_the_source_file_had_them(two_variant_run, tmp_path):
    """QALD-10's test file has numeric ids; another benchmark's (QALD-7, WWQ) and a --data-file's string ids stay
    strings, a data file's numeric ids numbers."""
    from dataclasses import replace

    from saga_dspy.eval.reports.export import qald_json

    out, _, _ = two_variant_run
    run = read_run(out / "full")
    assert all(isinstance(q["id"], int) for q in qald_json(run)["questions"])
    qald7 = replace(run, config={**run.config, "dataset": "qald7"})
    assert all(isinstance(q["id"], str) for q in qald_json(qald7)["questions"])
    data = tmp_path / "mine.json"
    first, *rest = [line["id"] for line in run.lines]
    data.write_text(json.dumps([{"id": int(first), "question": "q", "sparql": "ASK {}"}] + [{"id": i} for i in rest]))
    mine = replace(run, config={**run.config, "invocation": {"data_file": str(data)}})
    ids = [q["id"] for q in qald_json(mine)["questions"]]
    assert ids[0] == int(first) and all(isinstance(i, str) for i in ids[1:])


def test_export_of_a_question_without_a_query_is_an_empty_result(two_variant_run, tmp_path):
    from saga_dspy.eval.reports.export import qald_json

    out, _, _ = two_variant_run
    run = read_run(out / "full")
    run.lines[0] = {**run.lines[0], "sparql": "", "answers": None, "id": "q-1"}
    obj = qald_json(run, dataset_id="mine")
    jsonschema.validate(obj, SCHEMA)
    first = obj["questions"][0]
    assert first["id"] == "q-1" and first["query"] == {"sparql": ""}
    assert first["answers"] == [{"head": {"vars": []}, "results": {"bindings": []}}]
    assert obj["dataset"]["id"] == "mine"


def test_report_is_one_table_across_benchmarks(two_variant_run, endpoint, search, tmp_path, capsys):
    import shutil

    from saga_dspy.eval.loading.evalset import load_eval_set
    from saga_dspy.eval.running.runner import evaluate

    out, _, _ = two_variant_run
    settings = scripted_settings("test").model_copy(update={"dataset": "qald7", "limit": 2})
    plans = scripted_plans(load_eval_set(settings, progress=False).items)
    other = tmp_path / "qald7"
    evaluate(settings, ["full"], out=other, lm=ScriptedLM(plans), endpoint=endpoint, search=search, progress=False)
    capsys.readouterr()  # the run's own summary
    rc, text, _ = _cli(["report", str(out), str(other)], capsys)
    assert rc == 0
    lines = text.splitlines()
    assert lines[0].split() == ["variant", "qald10/test", "qald7/test", "mean", "F1", "pooled", "F1"]
    full_f1 = read_run(out / "full").metrics["f1"]
    q7 = read_run(other).metrics["f1"]
    full_row = next(line for line in lines if line.startswith("full "))
    assert full_row.split()[1:] == [
        f"{100 * full_f1:.1f}",
        "(6)",
        f"{100 * q7:.1f}",
        "(2)",
        f"{100 * (full_f1 + q7) / 2:.1f}",  # each benchmark counts once
        f"{100 * (6 * full_f1 + 2 * q7) / 8:.1f}",  # each question counts once
    ]
    spinach_row = next(line for line in lines if line.startswith("spinach "))
    assert spinach_row.split()[-3:] == ["-", "-", "-"]  # no qald7 run: no mean, no pooled F1
    assert any(line.startswith("qald7/test") and " full " in line for line in lines)  # a row per run
    assert "mean F1: unweighted mean over the benchmarks" in text and "pooled F1: over all their questions" in text
    rc, text, _ = _cli(["report", str(out), "--markdown"], capsys)
    assert rc == 0 and text.startswith("| variant | qald10/test |")

    # a folder of run folders, the runs two levels down (results/<campaign>/<benchmark>/<variant>): the same table
    top = tmp_path / "campaign"
    shutil.copytree(out, top / "qald10" / "two")
    shutil.copytree(other, top / "qald7")
    rc, nested, _ = _cli(["report", str(top)], capsys)
    assert rc == 0, nested
    flat = _cli(["report", str(out), str(other)], capsys)[1]
    assert nested.splitlines()[:5] == flat.splitlines()[:5]
    assert nested.count("qald10/test ") == 3 and "qald7/test " in nested  # full, spinach and the qald7 run
    rc, exported, _ = _cli(["export", str(top), "--format", "qald"], capsys)
    assert rc == 0 and exported.count(" questions -> ") == 3
    rc, _, _ = _cli(["compare", str(top / "qald10")], capsys)
    assert rc == 0
