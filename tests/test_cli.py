"""The command lines as a user meets them: every bad input is one line on stderr and a non-zero exit
(never a traceback), no abbreviated flags, defaults and dataset names in --help, a benchmark over
another graph refused, warm-up kept out of per-question seconds, a tokens column in the summary."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TEST_CACHE, scripted_settings
from helpers.scripted_lm import ScriptedLM

DEAD_LM = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--no-lm-cache", "--lm-retries", "0"]


def _cli(module: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE), **(env or {})}
    full_env.pop("SAGA_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", f"saga_dspy.{module}", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "a-file").write_text("x")
    (d / "corrupt.json").write_text("{not json")
    (d / "latin1.jsonl").write_bytes(b'{"id": "1", "question": "caf\xe9"}\n')
    run = d / "corrupt-run"
    run.mkdir()
    (run / "config.json").write_text("{cut off")
    (run / "predictions.jsonl").write_text("")
    return d


def _eval_args(d: Path, *args: str) -> list[str]:
    return ["--cache-dir", str(TEST_CACHE), "--no-mlflow", "--no-progress", "--limit", "1", *DEAD_LM, *args]


BAD_EVAL_INPUTS = {
    "unknown dataset": lambda d: _eval_args(d, "--dataset", "nope", "--out", str(d / "o1")),
    "unknown split": lambda d: _eval_args(d, "--split", "nope", "--out", str(d / "o2")),
    "unwritable out": lambda d: _eval_args(d, "--out", str(d / "a-file" / "run")),
    "corrupt program": lambda d: _eval_args(d, "--program", str(d / "corrupt.json"), "--out", str(d / "o3")),
    "missing program": lambda d: _eval_args(d, "--program", str(d / "nope.json"), "--out", str(d / "o4")),
    "ids from a missing file": lambda d: _eval_args(d, "--ids", f"@{d / 'nope.txt'}", "--out", str(d / "o5")),
    "missing data file": lambda d: _eval_args(d, "--data-file", str(d / "nope.jsonl"), "--out", str(d / "o6")),
    "invalid UTF-8 data file": lambda d: _eval_args(d, "--data-file", str(d / "latin1.jsonl"), "--out", str(d / "o7")),
    "cache dir is a file": lambda d: [
        "--cache-dir",
        str(d / "a-file"),
        "--no-mlflow",
        "--no-progress",
        *DEAD_LM,
        "--out",
        str(d / "o8"),
    ],
    "bogus mlflow uri": lambda d: [
        *_eval_args(d, "--out", str(d / "o9"))[:1],
        str(TEST_CACHE),
        "--mlflow",
        "--mlflow-uri",
        "bogus://nowhere",
        "--no-progress",
        "--limit",
        "1",
        *DEAD_LM,
        "--out",
        str(d / "o9"),
    ],
    "endpoint with another scheme": lambda d: _eval_args(
        d, "--endpoint", "ftp://127.0.0.1/sparql", "--out", str(d / "o10")
    ),
    "corrupt config.json on resume": lambda d: _eval_args(d, "--resume", "--out", str(d / "corrupt-run")),
    "freebase benchmark on the wikidata sample": lambda d: _eval_args(
        d, "--dataset", "webqsp", "--out", str(d / "o11")
    ),
    "numeric setting out of range": lambda d: _eval_args(d, "--lm-timeout", "0", "--out", str(d / "o12")),
}

EXPECTED = {
    "unknown dataset": "unknown benchmark 'nope'",
    "corrupt config.json on resume": "cannot be read",
    "freebase benchmark on the wikidata sample": "webqsp is a freebase benchmark",
    "endpoint with another scheme": "http(s)://",
    "corrupt program": "is not a saved program",
    "unknown split": "no split 'nope'",
}


@pytest.mark.parametrize("case", list(BAD_EVAL_INPUTS))
def test_eval_bad_input_is_one_line_and_a_nonzero_exit(case, bad_files, store_path):
    proc = _cli("eval", *BAD_EVAL_INPUTS[case](bad_files))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr[-2000:]
    if case in EXPECTED:
        assert EXPECTED[case] in errors[0]
    assert "freezing" not in proc.stderr  # no gold is frozen for a run that cannot start
    assert not list(bad_files.glob("o*/predictions.jsonl"))  # nothing run


OTHER_CLIS = {
    "ask: endpoint scheme": ("ask", ["--endpoint", "ftp://x/sparql", "Who?"]),
    "optimize: unknown dataset": (
        "optimize",
        ["--dataset", "nope", "--split", "train", "--no-mlflow", *DEAD_LM, "--cache-dir", str(TEST_CACHE)],
    ),
    "kg: endpoint scheme": ("kg", ["query", "--endpoint", "gopher://x", "ASK {}"]),
    "schema: missing index": ("schema", ["show", "--schema-index", "/nonexistent/index.json.gz", "P31"]),
    "stats: unknown dataset": ("stats", ["grounding", "--dataset", "nope", "--cache-dir", str(TEST_CACHE)]),
}


@pytest.mark.parametrize("case", list(OTHER_CLIS))
def test_other_clis_bad_input(case):
    module, args = OTHER_CLIS[case]
    proc = _cli(module, *args)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_unexpected_errors_name_the_debug_switch(monkeypatch, capsys):
    from saga_dspy.cli import run_main

    def main(argv):
        raise TypeError("a bug")

    assert run_main(main, []) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--debug" in err and "SAGA_DEBUG=1" in err
    with pytest.raises(TypeError):
        run_main(main, ["--debug"])


@pytest.mark.parametrize(
    "error,status,said",
    [
        ("interrupted", 130, "interrupted"),
        ("ctrl-c", 130, "interrupted"),
        ("eval", 2, "error: no gold for x"),
    ],
)
def test_run_errors_are_said_once_by_run_main(error, status, said, capsys):
    from saga_dspy.cli import run_main
    from saga_dspy.errors import Interrupted
    from saga_dspy.eval.errors import EvalError

    def main(argv):
        raise {
            "interrupted": Interrupted("signal 15"),
            "ctrl-c": KeyboardInterrupt(),
            "eval": EvalError("no gold for x"),
        }[error]

    assert run_main(main, []) == status
    assert capsys.readouterr().err == said + "\n"


ABBREVIATED = {  # a prefix of a real flag, which argparse would take for it by default
    "eval": ["--lm-cach"],
    "optimize": ["--lm-cach"],
    "ask": ["--jso", "Who?"],
    "stats": ["grounding", "--dataset", "qald10", "--lim", "1"],
    "kg": ["query", "--endpoin", "embedded", "ASK {}"],
    "schema": ["show", "--schema-ind", "x.json", "P31"],
}


@pytest.mark.parametrize("module", list(ABBREVIATED))
def test_no_abbreviated_flags(module):
    args = ABBREVIATED[module]
    proc = _cli(module, *args)
    flag = next(a for a in args if a in ("--lm-cach", "--jso", "--lim", "--endpoin", "--schema-ind"))
    assert proc.returncode == 2 and f"unrecognized arguments: {flag}" in proc.stderr, proc.stderr[-1000:]


def test_help_shows_defaults_and_dataset_names():
    out = _cli("eval", "--help").stdout
    flat = " ".join(out.split())
    assert "(default: 15)" in flat  # --max-steps
    assert "(default: 120.0)" in flat  # --lm-timeout
    for name in ("qald10", "wwq", "webqsp (freebase)", "cwq (freebase)"):
        assert name in flat
    assert "--api-key API_KEY API key for the server (default: none)" in flat


def test_warmup_is_kept_out_of_per_question_seconds(endpoint, tmp_path, capsys):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.running.runner import evaluate

    class SlowToLoad(SagaProgram):  # a demo pool that takes 2 s to load, once
        loaded = False

        def demo_pool(self):
            if not SlowToLoad.loaded:
                time.sleep(5.0)
                SlowToLoad.loaded = True
            return super().demo_pool()

    settings = scripted_settings("test")
    results = evaluate(
        settings,
        ["full"],
        out=tmp_path / "w",
        ids=["0"],
        lm=ScriptedLM({}),
        endpoint=endpoint,
        progress=False,
        program_factory=lambda s, e, q: SlowToLoad(s, endpoint=e, search=q),
    )
    metrics = results["full"].metrics
    assert metrics["warmup_seconds"] >= 5.0
    assert results["full"].lines[0]["counters"]["seconds"] < 5.0  # the 5 s of loading are not the question's
    assert json.loads((tmp_path / "w" / "metrics.json").read_text())["warmup_seconds"] >= 5.0
    assert "warm-up (loading, not in s/q): full 5." in capsys.readouterr().out


def test_summary_table_has_a_tokens_column():
    from saga_dspy.eval.scoring.metrics import compute_metrics
    from saga_dspy.eval.scoring.report import summary_table

    lines = [
        {
            "f1": 1.0,
            "em": True,
            "final_status": "ok",
            "counters": {"prompt_tokens": 100, "completion_tokens": 20, "steps": 2},
        },
        {
            "f1": 0.0,
            "em": False,
            "final_status": "empty",
            "counters": {"prompt_tokens": 300, "completion_tokens": 40, "steps": 4},
        },
    ]
    metrics = compute_metrics(lines)
    assert metrics["mean_tokens"] == pytest.approx(230.0)
    lines = summary_table({"full": metrics}).splitlines()
    header = next(line for line in lines if "ktokens" in line.split())
    row = lines[lines.index(header) + 2]
    end = header.index("ktokens") + len("ktokens")  # right-aligned under its header
    assert row[:end].split()[-1] == "0.2"  # thousands of tokens a question


def test_a_local_models_runtime_is_kept_with_the_metrics(endpoint, tmp_path, monkeypatch):
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.lm.llama import LlamaCppEngine

    class Engine(LlamaCppEngine):  # the in-process engine's bookkeeping, with no model behind it
        loads = 0

        def load(self):
            Engine.loads += 1

    lm = ScriptedLM({})
    lm.llama_engine = Engine(llama=object(), n_threads=2, write_markers=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # as `choose_wait_policy` sets it on a busy machine
    results = evaluate(
        scripted_settings("test"), ["full"], out=tmp_path / "r", ids=["0"], lm=lm, endpoint=endpoint, progress=False
    )
    runtime = {
        "n_threads": 2,
        "omp_wait_policy": "PASSIVE",
        "write_markers": False,
        "field_limits": {},
        "prompt_lookup": 0,
        "prefix_store": False,
    }
    assert results["full"].metrics["lm_runtime"] == runtime and Engine.loads == 1  # loaded in the warm-up
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["lm_runtime"] == runtime
    # a served LM has no such engine: nothing is recorded
    plain = evaluate(
        scripted_settings("test"),
        ["full"],
        out=tmp_path / "s",
        ids=["0"],
        lm=ScriptedLM({}),
        endpoint=endpoint,
        progress=False,
    )
    assert "lm_runtime" not in plain["full"].metrics


def _parsers():
    from saga_dspy.eval import __main__ as eval_main
    from saga_dspy.optimize import decision_cli
    from saga_dspy.optimize.__main__ import build_parser as optimize_parser
    from saga_dspy.schema.__main__ import _parser as schema_parser

    parsers = {"eval": eval_main.build_parser(), "optimize": optimize_parser(), "schema": schema_parser()}
    for name in ("freeze", "rescore", "compare", "export", "report"):
        parsers[f"eval {name}"] = getattr(eval_main, f"build_{name}_parser")()
    parsers["optimize decisions"] = decision_cli.build_decisions_parser()
    parsers["optimize assemble"] = decision_cli.build_assemble_parser()
    return parsers


def test_help_says_each_default_once_and_optimize_compiles_on_train():
    for name, parser in _parsers().items():
        flat = " ".join(parser.format_help().split())
        assert not re.search(r"\(default: [^()]*\) \(default:", flat), name
        assert "(default: None)" not in flat, name  # nothing to say
    eval_help = " ".join(_parsers()["eval"].format_help().split())
    assert "compare them side by side (default: full)" in eval_help
    from saga_dspy.optimize.__main__ import build_parser

    optimize = build_parser()
    flat = " ".join(optimize.format_help().split())  # demos from train, the metric on dev (the valset)
    assert "--split SPLIT the valset" in flat and "--train-split TRAIN_SPLIT the split demonstrations come from" in flat
    assert optimize.parse_args([]).valset == "dev" and optimize.parse_args([]).train_split == "train"
    assert optimize.parse_args(["--split", "qald7:dev"]).valset == "qald7:dev"


def test_the_run_clis_take_their_settings_flags_from_the_settings_model():
    """eval and optimize offer every run setting (each field but `config.NOT_RUN_FLAGS`) as a flag (eval's variant and
    coverage as lists, optimize's --split is its valset), less what a compile does not read: a new settings field is
    a flag of both without a hand list to extend."""
    from saga_dspy.config import NOT_RUN_FLAGS, Settings

    parsers = _parsers()
    run_settings = set(Settings.model_fields) - NOT_RUN_FLAGS
    own = {"eval": set(), "optimize": {"limit", "program", "preflight"}, "optimize decisions": {"limit", "preflight"}}
    for name, theirs in own.items():
        flags = {option for action in parsers[name]._actions for option in action.option_strings}
        missing = {field for field in run_settings if "--" + field.replace("_", "-") not in flags}
        assert missing == theirs, name
    assert parsers["optimize"].parse_args(["--demo-anchors", "1"]).demo_anchors == 1


@pytest.mark.parametrize(
    "args,bad",
    [(["Qfoo", "P19"], "'Qfoo' is not an entity id"), (["Q42", "born"], "'born' is not a property id")],
)
def test_schema_check_refuses_what_is_no_id(args, bad, capsys):
    from saga_dspy.schema.__main__ import main

    assert main(["check", *args, "--cache-dir", str(TEST_CACHE)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad} of Wikidata") and err.count("\n") == 1
