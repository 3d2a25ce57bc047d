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
    from saga_dspy.eval.datasets import read_records
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
