"""`eval --resume --out DIR`: the recorded run continued from its config.json, never another one; a flag that says
otherwise refused with one line. The real CLI (`eval.__main__.main`) over the real embedded store, a scripted LM."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from conftest import TEST_CACHE
from helpers.scripted_lm import TwoVariantLM, scripted_plans

from saga_dspy.cli import run_main
from saga_dspy.eval import __main__ as eval_main
from saga_dspy.eval.running.resume import resume_command

IDS = ("0", "5", "17", "9")


class RecordingLM(TwoVariantLM):
    """The two-variant scripted LM, noting the questions its controller was asked about."""

    def __init__(self, plans):
        super().__init__(plans, {})
        self.questions: dict[str, set[str]] = {"full": set(), "spinach": set()}

    def respond(self, outputs, fields):
        if "next_tool_name" in outputs:  # spinach's controller is the one without an answer type
            self.questions["full" if "answer_type" in fields else "spinach"].add(fields.get("question", ""))
        return super().respond(outputs, fields)


@pytest.fixture(scope="module")
def plans(store_path):
    from conftest import scripted_settings

    from saga_dspy.eval.loading.evalset import load_eval_set

    evalset = load_eval_set(scripted_settings("test"), ids=list(IDS), progress=False)
    return scripted_plans(evalset.items), {item.id: item.question for item in evalset.items}


def _main(argv, monkeypatch, capsys, lm) -> tuple[int, str, str]:
    monkeypatch.setattr(eval_main, "cli_lm", lambda settings: lm)
    rc = run_main(eval_main.main, argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def first_run_argv(out: Path) -> list[str]:
    """A run whose every setting differs from the defaults a bare command would take."""
    return [
        "--dataset",
        "qald10",
        "--split",
        "test",
        "--ids",
        ",".join(IDS),
        "--variant",
        "full",
        "--variant",
        "spinach",
        "--lm",
        "scripted",
        "--no-lm-cache",
        "--cache-dir",
        str(TEST_CACHE),
        "--no-result-cache",
        "--demos",
        "0",
        "--max-steps",
        "5",
        "--no-mlflow",
        "--no-progress",
        "--out",
        str(out),
    ]


def test_a_bare_resume_continues_the_recorded_run_and_refuses_a_conflicting_flag(plans, tmp_path, monkeypatch, capsys):
    plan, question_of = plans
    out = tmp_path / "run"
    monkeypatch.chdir(tmp_path)  # a run started with defaults would land in ./runs/
    rc, _, err = _main(first_run_argv(out), monkeypatch, capsys, RecordingLM(plan))
    assert rc == 0, err
    full, spinach = out / "full", out / "spinach"
    assert len(_lines(full / "predictions.jsonl")) == 4 and len(_lines(spinach / "predictions.jsonl")) == 4
    recorded = json.loads((full / "config.json").read_text())
    assert recorded["invocation"]["variants"] == ["full", "spinach"] and recorded["invocation"]["ids"] == list(IDS)

    # as a kill during the first variant leaves it: two of its questions finished, the second variant not begun
    kept = (full / "predictions.jsonl").read_text().splitlines()[:2]
    (full / "predictions.jsonl").write_text("\n".join(kept) + "\n")
    for name in ("metrics.json",):
        (full / name).unlink()
    for path in sorted(spinach.iterdir()):
        path.unlink()
    spinach.rmdir()
    (out / "comparison.json").unlink()

    # the hint's command, exactly: nothing but --resume --out DIR
    command = resume_command(out)
    assert command == f"python -m saga_dspy.eval --resume --out {out}"
    lm = RecordingLM(plan)
    rc, text, err = _main(shlex.split(command)[3:], monkeypatch, capsys, lm)
    assert rc == 0, err
    assert "resuming" in err and "2 done, 2 to run" in err
    done_first = [json.loads(line)["id"] for line in kept]
    lines = _lines(full / "predictions.jsonl")
    assert [x["id"] for x in lines[:2]] == done_first  # kept as they were
    assert sorted(x["id"] for x in lines) == sorted(IDS)
    assert sorted(x["id"] for x in _lines(spinach / "predictions.jsonl")) == sorted(IDS)  # the second variant too
    # full's controller was asked about its two unfinished questions only, spinach's about all four
    assert lm.questions["full"] == {question_of[i] for i in IDS if i not in done_first}
    assert lm.questions["spinach"] == {question_of[i] for i in IDS}
    assert not (tmp_path / "runs").exists() and sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "full",
        "spinach",
    ]
    for variant in ("full", "spinach"):
        cfg = json.loads((out / variant / "config.json").read_text())
        assert (
            cfg["settings"]["max_steps"] == 5 and cfg["settings"]["demos"] == 0 and cfg["settings"]["lm"] == "scripted"
        )
        assert cfg["settings"]["mlflow"] is False and cfg["ids"] == list(IDS) and cfg["variant"] == variant
    assert len(json.loads((full / "config.json").read_text())["resumed"]) == 1
    assert "spinach" in text and "full" in text  # the summary table of both variants

    # a flag that says otherwise than the record: one line, exit 2, nothing run
    before = (full / "predictions.jsonl").read_text()
    for conflicting, said in [
        (["--dataset", "qald7"], "--dataset qald10, not --dataset qald7"),
        (["--max-steps", "15"], "--max-steps 5, not --max-steps 15"),
        (["--variant", "full"], "--variant full --variant spinach, not --variant full"),
        (["--ids", "0,5"], "--ids 0,5,17,9, not --ids 0,5"),
        (
            ["--mlflow-uri", "sqlite:///x.db", "--lm", "openai/gpt-4o-mini"],
            "--lm scripted, not --lm openai/gpt-4o-mini",
        ),
    ]:
        lm = RecordingLM(plan)
        rc, _, err = _main(["--resume", "--out", str(out), *conflicting], monkeypatch, capsys, lm)
        assert rc == 2, (conflicting, err)
        assert len(err.strip().splitlines()) == 1 and said in err and err.startswith("error: --resume:"), err
        assert lm.calls == 0
    assert (full / "predictions.jsonl").read_text() == before
    # a flag given again with the recorded value, or one that only changes how the run goes, is fine
    rc, _, err = _main(
        ["--resume", "--out", str(out), "--max-steps", "5", "--num-threads", "2", "--no-progress"],
        monkeypatch,
        capsys,
        RecordingLM(plan),
    )
    assert rc == 0 and "0 to run" in err, err
    # one variant's folder of the run: that variant, in its own folder
    rc, _, err = _main(["--resume", "--out", str(full)], monkeypatch, capsys, RecordingLM(plan))
    assert rc == 0 and "[full] resuming" in err and not (full / "full").exists() and not (full / "spinach").exists()


def test_a_resume_of_a_folder_without_a_recorded_run_starts_nothing(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    lm = RecordingLM({})
    rc, _, err = _main(["--resume", "--out", str(empty), "--no-mlflow"], monkeypatch, capsys, lm)
    assert rc == 2 and "holds no recorded run" in err and len(err.strip().splitlines()) == 1
    assert list(empty.iterdir()) == [] and lm.calls == 0


def test_a_resume_that_names_its_run_starts_it_where_nothing_is_recorded(plans, tmp_path, monkeypatch, capsys):
    """A script's resumable step (`--resume --dataset ... --out DIR`) starts the run it names the first time, then
    continues it."""
    plan, _ = plans
    out = tmp_path / "fresh"
    for _ in range(2):
        rc, _, err = _main([*first_run_argv(out), "--resume"], monkeypatch, capsys, RecordingLM(plan))
        assert rc == 0, err
        assert len(_lines(out / "full" / "predictions.jsonl")) == 4
    assert "0 to run" in err and "starting the one the flags name" not in err


_CHILD = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, whatever the parent ignores
sys.path.insert(0, {tests!r})
from helpers.scripted_lm import ScriptedLM
from saga_dspy.cli import run_main
from saga_dspy.eval import __main__ as eval_main
plans = {{q: [tuple(a) for a in p] for q, p in json.load(open({plans!r})).items()}}
eval_main.cli_lm = lambda settings: ScriptedLM(plans, delay=1.0)  # questions left when the signal comes, under load too
sys.exit(run_main(eval_main.main, {argv!r}))
"""


def test_ctrl_c_prints_the_exact_command_that_continues_the_run(plans, tmp_path, monkeypatch, capsys):
    """A real Ctrl-C (SIGINT) in the middle of a CLI run: the hint is a whole command, and that command, as
    printed, finishes the run."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import REPO

    plan, question_of = plans
    out = tmp_path / "run"
    script = tmp_path / "plans.json"
    script.write_text(json.dumps(plan))
    argv = first_run_argv(out)
    at = argv.index("spinach")
    del argv[at - 1 : at + 1]  # one variant: --variant full
    code = _CHILD.format(tests=str(REPO / "tests"), plans=str(script), argv=argv)
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    while not ((out / "predictions.jsonl").is_file() and (out / "predictions.jsonl").read_text().strip()):
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()[1][-2000:]
        time.sleep(0.1)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr[-2000:]
    (hint,) = [line for line in stdout.splitlines() if line.startswith("interrupted:")]
    command = hint.split("`")[1]
    assert command == f"python -m saga_dspy.eval --resume --out {out}"
    assert len(_lines(out / "predictions.jsonl")) < len(IDS)
    rc, _, err = _main(shlex.split(command)[3:], monkeypatch, capsys, RecordingLM(plan))
    assert rc == 0, err
    assert sorted(x["id"] for x in _lines(out / "predictions.jsonl")) == sorted(IDS)
