"""Files a user names are checked for type and size before they are read: /dev/zero, a FIFO, a directory or a
huge file as --program, SAGA_PROGRAM, a schema index or a data file is one clear line within seconds, not a
hang or gigabytes read until MemoryError."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import REPO, TEST_CACHE

from saga_dspy.input_files import InputFileError, check_input_file, read_input_bytes


@pytest.fixture()
def specials(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:  # sparse: 600 MB on paper, nothing on disk
        fh.truncate(600 * 2**20)
    link = tmp_path / "zero-link.json"
    link.symlink_to("/dev/zero")
    return {"device": "/dev/zero", "FIFO": fifo, "directory": tmp_path, "huge": huge, "link": link}


def test_special_and_huge_files_are_refused_before_reading(specials, tmp_path):
    for name, path in specials.items():
        with pytest.raises(InputFileError) as caught:
            check_input_file(path, "data file")
        assert str(path) in str(caught.value), name
    with pytest.raises(FileNotFoundError, match="no such file"):
        check_input_file(tmp_path / "missing.json", "data file")
    bomb = tmp_path / "bomb.json.gz"
    import gzip

    with gzip.open(bomb, "wb") as fh:
        fh.write(b" " * (3 * 2**20))
    with pytest.raises(InputFileError, match="inflates"):
        read_input_bytes(bomb, "schema index", max_bytes=2**20)


def test_every_reader_checks_its_file(specials):
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.loading.datasets import read_records
    from saga_dspy.schema.index import SchemaIndex

    for path in (specials["device"], specials["link"], specials["FIFO"]):
        with pytest.raises(InputFileError):
            read_records(path)
        with pytest.raises(InputFileError):
            SchemaIndex.load(path)
        with pytest.raises(InputFileError):
            SagaProgram.load(path)


def _run(args, env_extra=None, timeout=60):
    env = {**os.environ, "SAGA_TEST_CACHE_DIR": str(TEST_CACHE), **(env_extra or {})}
    started = time.monotonic()
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - started


def test_the_command_lines_say_one_line_within_seconds(specials):
    zero, fifo = str(specials["device"]), str(specials["FIFO"])
    base = [sys.executable, "-m", "saga_dspy.eval", "--cache-dir", str(TEST_CACHE), "--no-mlflow", "--limit", "1"]
    for args, env in (
        (base + ["--program", zero], None),
        (base + ["--data-file", fifo, "--dataset", "mine"], None),
        (base, {"SAGA_PROGRAM": fifo}),
        (base + ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"], {"SAGA_SCHEMA_INDEX": zero}),
    ):
        proc, seconds = _run(args, env)
        assert proc.returncode == 2, (args, env, proc.stderr[-2000:])
        assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert seconds < 45


@pytest.fixture()
def bad_lexicons(tmp_path, specials):
    """A lexicon file broken each way a user or a crash leaves it: (path, what the one line says)."""
    import gzip
    import json

    from saga_dspy.config import default_data_dir

    good = (default_data_dir() / "lexicon" / "wikidata.json.gz").read_bytes()
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(good[: len(good) // 2])
    junk = tmp_path / "junk.json.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(200))
    not_json = tmp_path / "text.json"
    not_json.write_text("words: many\n")
    old = tmp_path / "old.json.gz"
    with gzip.open(old, "wt") as fh:
        json.dump({"version": 0, "words": {}}, fh)
    bad_table = tmp_path / "table.json"
    bad_table.write_text(json.dumps({"version": 1, "properties": {"born": {"P19": "many"}}}))
    return [
        (tmp_path / "typo.json.gz", "no such file"),
        (truncated, "gzip"),
        (junk, "gzip"),
        (not_json, "not JSON"),
        (old, "version 0"),
        (bad_table, "properties/born/P19"),
        (specials["device"], "not a regular file"),
        (specials["FIFO"], "not a regular file"),
        (specials["directory"], "not a regular file"),
    ]


def test_a_bad_lexicon_is_one_line_before_any_question(bad_lexicons):
    """--lexicon is checked with the run's other files: rc 2, one line naming the file and what is wrong, before
    the LM is built (no traceback per question, no run that ends 0 with F1 0, no hang on a FIFO)."""
    base = [sys.executable, "-m", "saga_dspy.eval", "--cache-dir", str(TEST_CACHE), "--no-mlflow", "--limit", "1"]
    base += ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--out", str(bad_lexicons[0][0].parent / "run")]
    for path, said in bad_lexicons:
        proc, seconds = _run(base + ["--lexicon", str(path)], timeout=60)
        assert proc.returncode == 2, (path, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and said in lines[0], (path, proc.stderr[-2000:])
        assert seconds < 30


def test_a_missing_bundled_lexicon_is_an_error(tmp_path):
    """The graph's bundled lexicon gone is said, not silently replaced by an empty one (a graph with none bundled,
    Freebase, runs on the grammar alone as before)."""
    from saga_dspy.config import Settings
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.running.run_inputs import check_file_inputs
    from saga_dspy.grounding.lexicon import load_lexicon

    settings = Settings(data_dir=tmp_path, cache_dir=TEST_CACHE)
    with pytest.raises(FileNotFoundError, match="bundled lexicon .* is missing"):
        load_lexicon(settings)
    with pytest.raises(EvalError, match="--lexicon none"):
        check_file_inputs(settings)
    assert not load_lexicon(settings.model_copy(update={"lexicon": "none"}))
    assert not load_lexicon(settings.model_copy(update={"kg": "freebase"}))


def test_an_error_names_the_input_it_was_reading(tmp_path, capsys):
    """An error met while a file is taken apart (a schema index of the wrong shape, a data file's record, a run
    folder's tampered config.json) says which file or run in its one line, unexpected or not."""
    import json

    from saga_dspy.cli import run_main
    from saga_dspy.eval.__main__ import main as eval_main
    from saga_dspy.eval.loading.datasets import load_questions
    from saga_dspy.schema.index import FORMAT, FORMAT_VERSION, SchemaIndex

    index = tmp_path / "index.json"
    index.write_text(json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, "properties": 5}))
    listed = tmp_path / "listed.json"
    listed.write_text("[1]")
    records = tmp_path / "records.json"
    records.write_text("[1, 2]")
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text('{"id": "a"}\n')
    (run / "config.json").write_text("[]")
    for call, named in (
        (lambda argv: SchemaIndex.load(index), f"schema index {index}"),
        (lambda argv: SchemaIndex.load(listed), f"schema index {listed}"),
        (lambda argv: load_questions("mine", "test", data_file=records), f"data file {records}"),
        (lambda argv: eval_main(["rescore", str(run)]), f"run {run}"),
    ):
        assert run_main(call, []) in (1, 2)
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"(reading {named})" in err, err
