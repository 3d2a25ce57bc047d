"""The locks between processes (the store's build, the local model's assembly) are `filelock`'s: while another
process holds one it cannot be taken, and it is free again once that process lets go or dies."""

from __future__ import annotations

import subprocess
import sys
import time

import filelock
import pytest
from conftest import REPO

from saga_dspy.kg.store import _build_lock
from saga_dspy.lm.model_files import _file_lock

_HOLD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from saga_dspy.kg.store import _build_lock
from saga_dspy.lm.model_files import _file_lock
lock = {make}
with lock:
    Path({held!r}).touch()
    time.sleep(300)
"""


@pytest.mark.parametrize(
    "make",
    ["_build_lock(Path({root!r}))", "_file_lock(Path({root!r}) / 'model.gguf.lock')"],
    ids=["store build", "model assembly"],
)
def test_a_lock_held_by_another_process_cannot_be_taken_until_it_dies(make, tmp_path):
    held = tmp_path / "held"
    code = _HOLD.format(repo=str(REPO), make=make.format(root=str(tmp_path)), held=str(held))
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not held.exists():
            assert holder.poll() is None and time.monotonic() < deadline, "the holder did not take the lock"
            time.sleep(0.05)
        lock = _build_lock(tmp_path) if "build" in make else _file_lock(tmp_path / "model.gguf.lock")
        with pytest.raises(filelock.Timeout):
            lock.acquire(timeout=0.3)
    finally:
        holder.kill()
        holder.wait(30)
    lock.acquire(timeout=10)  # the OS let go of the dead holder's lock
    lock.release()
