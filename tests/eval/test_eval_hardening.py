"""A run under attack or on broken infrastructure: a locked run directory, infrastructure failures
recorded and stopping the run, LM timeouts and a per-question budget, secrets never written; run files never
written through a planted link, tampered scores refused by every reader, hostile questions escaped in markdown.

Real processes (`python -m saga_dspy.eval`), a real closed loopback port as a dead server, and a
loopback OpenAI-compatible stub (tests/helpers/openai_stub.py) as a slow or live LM server."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TEST_CACHE, free_port, scripted_settings
from helpers.openai_stub import OpenAIStub
from helpers.scripted_lm import ScriptedLM

QALD10_TEST_GOLD = REPO / "data" / "benchmarks" / "qald10" / "gold-embedded-test.jsonl.gz"


def _env() -> dict[str, str]:
    env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE)}
    env.pop("SAGA_DEBUG", None)
    return env


def eval_cmd(out: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "saga_dspy.eval",
        "--cache-dir",
        str(TEST_CACHE),
        "--no-result-cache",
        "--no-lm-cache",
        "--demos",
        "0",
        "--max-steps",
        "4",
        "--no-progress",
        "--out",
        str(out),
        *args,
    ]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


# --------------------------------------------------------------------------- 1. the run directory lock


_HOLD = """
import os, sys, time
sys.path.insert(0, {tests!r})
from conftest import scripted_settings
from helpers.scripted_lm import ScriptedLM
from saga_dspy.eval.running.runner import evaluate


class Held(ScriptedLM):  # answers only once the test releases it, so the run holds its directory meanwhile
    def respond(self, outputs, fields):
        if not outputs:  # the preflight's probe, before the first question
            return super().respond(outputs, fields)
        deadline = time.monotonic() + 300
        while not os.path.exists({release!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
        return super().respond(outputs, fields)


evaluate(scripted_settings("test"), ["full"], out={out!r}, ids=["0", "5", "17", "9"], lm=Held({{}}), progress=False)
"""


def test_a_second_run_on_a_locked_directory_fails_at_once(tmp_path):
    out = tmp_path / "run"
    release = tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD.format(tests=str(REPO / "tests"), out=str(out), release=str(release))],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "config.json").exists():  # the holder is past its lock once config.json is written
            assert holder.poll() is None, holder.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "the first run did not start"
            time.sleep(0.1)
        # the same directory, one inside it (the first run's variant folder) and one above it
        for target, extra in [(out, []), (out, ["--overwrite"]), (out, ["--resume"]), (out / "full", ["--overwrite"])]:
            started = time.monotonic()
            second = subprocess.run(
                eval_cmd(
                    target,
                    "--lm",
                    "openai/x",
                    "--api-base",
                    "http://127.0.0.1:9/v1",
                    "--no-mlflow",
                    "--ids",
                    "0",
                    *extra,
                ),
                cwd=REPO,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert second.returncode == 2, second.stderr[-2000:]
            assert "in use by another run" in second.stderr and "Traceback" not in second.stderr
            assert time.monotonic() - started < 60
        from saga_dspy.eval.errors import EvalError
        from saga_dspy.eval.running.rundir import locked_run_dir

        with pytest.raises(EvalError, match="above .*run directory in use"):
            with locked_run_dir(tmp_path):
                pass
        assert holder.poll() is None, "the second run waited for the first instead of failing at once"
        release.touch()
        stdout, stderr = holder.communicate(timeout=180)
        assert holder.returncode == 0, stderr[-2000:]
    finally:
        if holder.poll() is None:
            holder.kill()
    ids = [line["id"] for line in _lines(out / "predictions.jsonl")]
    assert sorted(ids) == ["0", "17", "5", "9"]  # each question once: nothing written twice, nothing lost


# --------------------------------------------------------------------------- 2. infrastructure failures


def test_a_dead_lm_server_stops_the_run_and_retry_failed_reruns_its_questions(tmp_path):
    port = free_port()  # nothing listens there
    out = tmp_path / "dead-lm"
    cmd = eval_cmd(
        out,
        "--lm",
        "openai/x",
        "--api-base",
        f"http://127.0.0.1:{port}/v1",
        "--lm-retries",
        "0",
        "--lm-timeout",
        "5",
        "--max-infra-failures",
        "2",
        "--limit",
        "6",
        "--no-mlflow",
        "--no-preflight",  # the questions meet the dead server (the preflight would stop the run first)
    )
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "2 questions in a row failed for the infrastructure" in proc.stderr
    lines = _lines(out / "predictions.jsonl")
    assert len(lines) == 2  # stopped early, not through the whole split
    assert all(line["error_kind"] == "infrastructure" and line["final_status"] == "error" for line in lines)
    assert all("LM" in line["error"] for line in lines)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_failed"] == 2 and metrics["n_infra_failed"] == 2 and "infrastructure" in metrics["stopped"]
    header, row = [x for x in proc.stdout.splitlines() if x.startswith(("variant ", "full "))][:2]
    end = header.index(" failed") + len(" failed")  # the summary's failed column (right-aligned)
    assert row[:end].split()[-1] == "2"
    assert time.monotonic() - started < 150

    # the LM server is back (on the same address): --retry-failed re-runs exactly those questions
    with OpenAIStub(port=port) as stub:
        proc = subprocess.run(
            cmd + ["--retry-failed", "--max-infra-failures", "5"],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "re-running 2 questions" in proc.stderr
    assert stub.requests
    after = _lines(out / "predictions.jsonl")
    assert len(after) == 6 and not any(line.get("error_kind") == "infrastructure" for line in after)


# one reply that every predictor can read: the controller executes a query at its first step
EXECUTE_REPLY = (
    "\n\n".join(
        f"[[ ## {name} ## ]]\n{value}"
        for name, value in (
            ("answer_type_label", "boolean"),
            ("answer_type_qid", ""),
            ("next_thought", "run it"),
            ("next_tool_name", "execute_sparql"),
            ("next_tool_args", '{"sparql": "ASK { ?s ?p ?o }"}'),
            ("sparql", "ASK { ?s ?p ?o }"),
        )
    )
    + "\n\n[[ ## completed ## ]]"
)


def test_a_dead_endpoint_is_an_infrastructure_failure(tmp_path):
    out = tmp_path / "dead-endpoint"
    with OpenAIStub(reply=EXECUTE_REPLY) as stub:
        proc = subprocess.run(
            eval_cmd(
                out,
                "--lm",
                "openai/x",
                "--api-base",
                stub.api_base,
                "--endpoint",
                f"http://127.0.0.1:{free_port()}/sparql",
                "--gold-file",
                str(QALD10_TEST_GOLD),
                "--schema-index",
                str(REPO / "data" / "schema" / "wikidata-sample.json.gz"),
                "--max-infra-failures",
                "2",
                "--limit",
                "5",
                "--no-mlflow",
                "--query-timeout",
                "3",
                "--search",
                "local",
                "--no-preflight",  # the questions meet the dead endpoint (the preflight would stop the run first)
            ),
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = _lines(out / "predictions.jsonl")
    assert len(lines) == 2
    assert all(line["error_kind"] == "infrastructure" and line["final_status"] == "error" for line in lines)
    assert all("endpoint" in line["error"] for line in lines)
    assert json.loads((out / "metrics.json").read_text())["n_failed"] == 2


def test_program_errors_are_not_infrastructure():
    from saga_dspy.agent.failures import is_infrastructure_error
    from saga_dspy.kg.errors import EndpointUnavailable, QuerySyntaxError, QueryTimeout

    assert is_infrastructure_error(EndpointUnavailable("down"))
    try:
        try:
            raise ConnectionRefusedError("refused")
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_infrastructure_error(outer)
    assert not is_infrastructure_error(QueryTimeout("the agent's query was too slow"))
    assert not is_infrastructure_error(QuerySyntaxError("bad"))
    assert not is_infrastructure_error(ValueError("parse"))


# --------------------------------------------------------------------------- 3. LM timeout, question budget


def test_lm_calls_time_out(tmp_path):
    from dspy.utils.exceptions import LMError

    from saga_dspy.agent.failures import is_infrastructure_error
    from saga_dspy.lm import build_lm

    with OpenAIStub(delay=20) as stub:
        settings = scripted_settings("test").model_copy(
            update={"lm": "openai/x", "api_base": stub.api_base, "lm_timeout": 1.0, "lm_retries": 1}
        )
        lm = build_lm(settings)
        with pytest.raises(LMError):  # the first call also pays litellm's one-time set-up (seconds on a busy machine)
            lm("hello")
        started = time.monotonic()
        with pytest.raises(LMError) as caught:
            lm("hello again")
        took = time.monotonic() - started
    assert took < 8, f"an LM call on a hung server took {took:.1f}s (lm_timeout 1 s, 1 retry)"
    assert is_infrastructure_error(caught.value)


def test_question_budget_stops_taking_steps(sample_plans, endpoint, tmp_path):
    from saga_dspy.eval.running.runner import evaluate

    question, plan = sample_plans
    settings = scripted_settings("test").model_copy(update={"question_budget": 1.5, "max_steps": 12})
    lm = ScriptedLM({question: plan}, delay=0.4)
    results = evaluate(settings, ["full"], out=tmp_path / "budget", ids=["0"], lm=lm, endpoint=endpoint, progress=False)
    line = results["full"].lines[0]
    assert line["budget_exceeded"] is True
    assert any("question budget of 1.5 s" in note for note in line["notes"])
    assert line["counters"]["steps"] < len(plan)  # it stopped taking steps
    assert line["counters"]["seconds"] < 1.5 + 3 * 0.4 + 2  # at most the step in flight after the budget
    assert line["error"] is None  # finished with what it had


@pytest.fixture
def sample_plans(store_path):
    from saga_dspy.eval.loading.evalset import load_eval_set

    evalset = load_eval_set(scripted_settings("test"), ids=["0"], progress=False)
    item = evalset.items[0]
    words = [
        "Riemann",
        "geometry",
        "Bernhard",
        "manifold",
        "metric",
        "curvature",
        "tensor",
        "Gauss",
        "surface",
        "space",
    ]
    return item.question, [("search_wikidata", {"query": w}) for w in words] + [
        ("execute_sparql", {"sparql": item.gold_sparql}),
        ("stop", {}),
    ]


# --------------------------------------------------------------------------- 4. secrets


CANARY = "sk-CANARY-7f3a91"


def test_the_api_key_is_never_written(tmp_path):
    out = tmp_path / "run"
    store = tmp_path / "mlflow"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    with OpenAIStub() as stub:
        proc = subprocess.run(
            eval_cmd(
                out,
                "--lm",
                "openai/x",
                "--api-base",
                stub.api_base,
                "--api-key",
                CANARY,
                "--limit",
                "2",
                "--mlflow-uri",
                uri,
                "--experiment",
                "canary",
            ),
            cwd=REPO,
            env={**_env(), "MLFLOW_ARTIFACT_ROOT": str(store)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        proc2 = subprocess.run(
            eval_cmd(
                out,
                "--lm",
                "openai/x",
                "--api-base",
                stub.api_base,
                f"--api-key={CANARY}",
                "--limit",
                "2",
                "--mlflow-uri",
                uri,
                "--experiment",
                "canary",
                "--overwrite",
            ),
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert any(f"Bearer {CANARY}" in str(r["headers"]) for r in stub.requests)  # it did reach the server
    assert CANARY not in proc.stdout + proc.stderr + proc2.stdout + proc2.stderr
    command = json.loads((out / "config.json").read_text())["command"]
    assert "--api-key=***" in command
    searched = [p for root in (out, store) for p in root.rglob("*") if p.is_file()]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("canary")
    artifact_root = Path(exp.artifact_location.removeprefix("file://"))
    searched += [p for p in artifact_root.rglob("*") if p.is_file()]
    assert any(p.name == "config.json" for p in searched if artifact_root in p.parents)  # artifacts were logged
    assert len(searched) > 5
    leaks = [p for p in searched if CANARY.encode() in p.read_bytes()]
    assert not leaks, f"the api key was written to {leaks}"
    for name in ("predictions.jsonl", "config.json", "metrics.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name


def test_an_unusable_mlflow_store_is_one_line_within_seconds(tmp_path):
    """A tracking URI that names no usable store (a directory as the sqlite database, a file that is no database,
    a file as a file store) is said in one line, rc 2, within seconds: mlflow alone retries for minutes and ends
    with "unexpected OperationalError"."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database, " * 64)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    for uri, said in (
        (f"sqlite:///{tmp_path}", "not an SQLite database file"),
        (f"sqlite:///{junk}", "not an SQLite database"),
        (f"file://{plain}", "not a directory"),
    ):
        started = time.monotonic()
        proc = subprocess.run(
            eval_cmd(tmp_path / "run", "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--limit", "1")
            + ["--mlflow-uri", uri],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=90,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (uri, proc.stderr[-2000:])
        assert len(lines) == 1 and uri in lines[0] and said in lines[0], (uri, proc.stderr[-2000:])
        assert time.monotonic() - started < 60


def test_redact_argv_and_secret_value():
    from pydantic import SecretStr

    from saga_dspy.config import redact_argv, secret_value

    assert redact_argv(["--lm", "x", "--api-key", "k1", "--api-key=k2", "--api-base", "u"]) == [
        "--lm",
        "x",
        "--api-key",
        "***",
        "--api-key=***",
        "--api-base",
        "u",
    ]
    assert secret_value(SecretStr("s")) == "s" and secret_value("s") == "s" and secret_value(None) is None


def test_ids_from_a_file_accept_lines_spaces_and_commas(tmp_path):
    from saga_dspy.eval.loading.evalset import parse_ids

    listed = tmp_path / "ids.txt"
    listed.write_text("train_1,train_2\ntrain_3 train_1\n", encoding="utf-8")
    assert parse_ids([f"@{listed}", "9,train_2"]) == ["train_1", "train_2", "train_3", "9"]


# --------------------------------------------------------------------------- 4. the agent's own heavy query

HEAVY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"


class HeavyQueries(ScriptedLM):
    """Runs a query past the worker's CPU limit at every step, and gives it as the final query too."""

    def respond(self, outputs, fields):
        if "next_tool_name" in outputs:
            return {
                "next_thought": "count it",
                "next_tool_name": "execute_sparql",
                "next_tool_args": json.dumps({"sparql": HEAVY}),
            }
        if "sparql" in outputs:
            return {name: HEAVY if name == "sparql" else "" for name in outputs}
        return super().respond(outputs, fields)


def test_a_query_past_the_worker_limits_is_the_agents_to_narrow_not_an_infrastructure_failure(store_path, tmp_path):
    """A worker stopped by its limits under the agent's query is an observation the agent can act on and an
    `error_kind: query` line: such questions never stop the run nor count as failed for --retry-failed."""
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    settings = scripted_settings("test").model_copy(
        update={
            "worker_cpu_seconds": 1.0,
            "embedded_workers": 1,
            "max_steps": 1,
            "final_extract": "call",
            "max_infra_failures": 1,
            "query_timeout": 60.0,
        }
    )
    endpoint = EmbeddedEndpoint(settings, store_path)
    try:
        results = evaluate(
            settings,
            ["full"],
            out=tmp_path / "heavy",
            ids=["0"],
            lm=HeavyQueries({}),
            endpoint=endpoint,
            progress=False,
        )
    finally:
        endpoint.close()
    result = results["full"]
    assert result.metrics.get("stopped") is None and len(result.lines) == 1
    for line in result.lines:
        assert line["error"] is None and line["error_kind"] == "query", line
        assert line["final_status"] == "error" and "too_costly" in line["final_error"]
        observation = line["trajectory"][0]["observation"]
        assert "too_costly" in observation and "CPU" in observation
    assert result.metrics["n_failed"] == 0 and result.metrics["n_infra_failed"] == 0


# --------------------------------------------------------------------------- run files under attack


def _victim(path: Path) -> Path:
    """A file outside the run directory that a planted link points at: it must stay as it is."""
    path.write_text("not yours\n")
    path.chmod(0o644)
    return path


def _untouched(victim: Path) -> bool:
    return victim.read_text() == "not yours\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644


def _private_file(path: Path) -> bool:
    info = path.lstat()
    return stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600


def test_run_folder_writes_never_follow_a_planted_link(tmp_path, capsys):
    """rescore, export and compare --out write a new temp file and rename it: a link planted at the temp path is
    removed, one at the final path refused in one line; neither is written through, and what is written is
    private."""
    from helpers.runs import write_run

    from saga_dspy.cli import run_main
    from saga_dspy.eval import __main__ as eval_cli

    run = write_run(tmp_path / "run", {"1": 1.0, "2": 0.0})
    other = write_run(tmp_path / "other", {"1": 0.0, "2": 0.0}, variant="other")
    victims = {name: _victim(tmp_path / f"victim-{name}") for name in ("tmp", "final", "md", "json-tmp")}
    (run / "metrics.rescored.json.tmp").symlink_to(victims["tmp"])  # a stale temp file, planted
    (run / "qald.json").symlink_to(victims["final"])
    out = tmp_path / "cmp"
    Path(f"{out}.json.tmp").symlink_to(victims["json-tmp"])

    assert eval_cli.main(["rescore", str(run)]) == 0
    assert eval_cli.main(["compare", str(run), str(other), "--out", str(out)]) == 0
    capsys.readouterr()
    for written in (run / "metrics.rescored.json", Path(f"{out}.md"), Path(f"{out}.json")):
        assert _private_file(written), written
    assert json.loads((run / "metrics.rescored.json").read_text())["n"] == 2

    Path(f"{out}.md").unlink()
    Path(f"{out}.md").symlink_to(victims["md"])
    assert run_main(eval_cli.main, ["export", str(run), "--format", "qald"]) == 2
    assert run_main(eval_cli.main, ["compare", str(run), str(other), "--out", str(out)]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and all("is a symbolic link" in line for line in errors), errors
    assert str(run / "qald.json") in errors[0] and f"{out}.md" in errors[1]
    assert all(_untouched(v) for v in victims.values()), {n: v.read_text() for n, v in victims.items()}
    assert not list(tmp_path.glob("**/*.tmp"))


def test_predictions_are_never_appended_through_a_link(tmp_path):
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.running.predictions import PredictionsFile

    victim = _victim(tmp_path / "victim")
    (tmp_path / "predictions.jsonl").symlink_to(victim)
    predictions = PredictionsFile(tmp_path / "predictions.jsonl")
    with pytest.raises(EvalError, match="symbolic link"):
        predictions.append({"id": "1", "f1": 1.0})
    predictions.close()
    assert _untouched(victim)
    cut_off = '{"id": "1", "f1": 1.0}\n{"id": "2", "f1'  # --resume's repair drops a cut-off last line
    victim.write_text(cut_off)
    with pytest.raises(EvalError, match="symbolic link"):
        PredictionsFile.read(tmp_path / "predictions.jsonl", repair=True)
    assert victim.read_text() == cut_off


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1.5"])
def test_compare_refuses_scores_that_are_no_scores(tmp_path, capsys, bad):
    """A tampered F1 (NaN, an infinity, outside [0, 1]) is one line naming the file and the record: no `+nan`
    interval, no infinite win, and --out writes nothing."""
    from helpers.runs import write_run

    from saga_dspy.cli import run_main
    from saga_dspy.eval import __main__ as eval_cli

    base = write_run(tmp_path / "base", {"1": 1.0, "2": 0.0, "3": 1.0})
    tampered = write_run(tmp_path / "tampered", {"1": 1.0, "2": 0.0, "3": 1.0}, variant="tampered")
    pred = tampered / "predictions.jsonl"
    pred.write_text(pred.read_text().replace('"f1": 0.0', f'"f1": {bad}'))
    out = tmp_path / "cmp"
    assert run_main(eval_cli.main, ["compare", str(base), str(tampered), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unexpected" not in err, err
    assert str(pred) in err and "line 2" in err and "'2'" in err and "f1" in err, err
    assert not list(tmp_path.glob("cmp*"))


def test_report_resume_and_rescore_refuse_what_compare_refuses(tmp_path, capsys, settings):
    """The same check (`metrics.check_scores`) on every reader: report on a metrics.json, rescore and --resume on
    predictions.jsonl."""
    from helpers.runs import write_run

    from saga_dspy.cli import run_main
    from saga_dspy.eval import __main__ as eval_cli
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.running.run_inputs import prepare_out_dir

    run = write_run(tmp_path / "run", {"1": 1.0, "2": 0.0})
    metrics = {"n": 2, "f1": float("nan"), "em": 0.5, "empty_rate": 0.0}
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert run_main(eval_cli.main, ["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert str(run / "metrics.json") in err and "f1 nan" in err and "unexpected" not in err, err

    (run / "metrics.json").unlink()
    pred = run / "predictions.jsonl"
    pred.write_text(pred.read_text().replace('"f1": 1.0', '"f1": Infinity'))
    assert run_main(eval_cli.main, ["rescore", str(run)]) == 2
    err = capsys.readouterr().err
    assert str(pred) in err and "line 1" in err and "f1 inf" in err, err
    with pytest.raises(EvalError, match="f1 inf"):
        prepare_out_dir(run, settings, resume=True, retry_failed=False, overwrite=False)


def test_compare_markdown_escapes_what_a_question_holds(tmp_path, capsys):
    """A question's line break, `|` or HTML stays inside its cell, shown as text."""
    from helpers.runs import write_run

    from saga_dspy.eval import __main__ as eval_cli

    hostile = 'Who | wrote\n| 9 | injected row |\n<img src=x onerror="alert(1)"> this?'
    questions = {"1": hostile, "2": "plain?"}
    a = write_run(tmp_path / "a", {"1": 1.0, "2": 0.0}, questions=questions)
    b = write_run(tmp_path / "b", {"1": 0.0, "2": 0.0}, variant="b", questions=questions)
    assert eval_cli.main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 2  # header, rule, one row per question
    cells = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
    assert len(cells) == 1, rows  # every row has the header's columns
    assert "<img" not in text and "&lt;img" in text
