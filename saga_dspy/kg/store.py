"""The bundled Wikidata sample as a persistent Oxigraph store in the cache directory.

Built on first use from `data/wikidata-sample/*.nt.gz`; later opens reuse it. The
store directory is named by a hash of the dump, so a changed dump is rebuilt.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import time
from pathlib import Path

import filelock

from ..config import Settings
from .label_index import LABEL_INDEX_VERSION, build_label_index, label_index_version

SAMPLE_NAME = "wikidata-sample"
READY = "READY"


def sample_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / SAMPLE_NAME


def dump_files(settings: Settings) -> list[Path]:
    files = sorted(sample_dir(settings).glob("*.nt.gz"))
    if not files:
        raise FileNotFoundError(
            f"no bundled sample in {sample_dir(settings)}; run scripts/build_sample.py --sources ../shared/data"
        )
    return files


def dump_hash(settings: Settings) -> str:
    digest = hashlib.sha256()
    for path in dump_files(settings):
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def store_path(settings: Settings) -> Path:
    return Path(settings.cache_dir) / "stores" / f"{SAMPLE_NAME}-{dump_hash(settings)}"


def _build_lock(root: Path) -> filelock.FileLock:
    """One build of the store at a time across processes (an OS lock on `<root>/.lock`, released if one dies)."""
    root.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(root / ".lock"))


def ensure_store(settings: Settings, force: bool = False, log=None) -> Path:
    """Path of a ready store for the bundled dump, building it (and its search index) if needed."""
    path = store_path(settings)
    if (path / READY).exists() and not force and _index_current(path):
        return path
    with _build_lock(path.parent):
        if (path / READY).exists() and not force:
            if not _index_current(path):
                _reindex(path, log or (lambda msg: None))
            return path
        _build(settings, path, log or (lambda msg: None))
    return path


def _index_current(path: Path) -> bool:
    return label_index_version(path / "search.sqlite") == LABEL_INDEX_VERSION


def _reindex(path: Path, log) -> None:
    """Rebuild only the label index of a ready store (a new index version); readers of the old file keep it."""
    import pyoxigraph

    log(f"rebuilding the label index (version {LABEL_INDEX_VERSION})")
    store = pyoxigraph.Store.read_only(str(path))
    tmp = path / "search.sqlite.tmp"
    build_label_index(store, tmp)
    del store
    os.replace(tmp, path / "search.sqlite")


def _build(settings: Settings, path: Path, log) -> None:
    import pyoxigraph  # lazy: the store's engine is loaded only when a store is built

    started = time.monotonic()
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    store = pyoxigraph.Store(str(tmp))
    for dump in dump_files(settings):
        log(f"loading {dump.name}")
        with gzip.open(dump, "rb") as handle:
            # a GzipFile is a binary file object; pyoxigraph's stub names typing.IO only
            store.bulk_load(handle, format=pyoxigraph.RdfFormat.N_TRIPLES)  # type: ignore[arg-type]
    store.flush()
    store.optimize()
    log("building the label index")
    build_label_index(store, tmp / "search.sqlite")
    del store
    (tmp / READY).write_text(f"built in {time.monotonic() - started:.1f}s\n")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    for old in path.parent.glob(f"{SAMPLE_NAME}-*"):
        if old != path and not old.name.endswith(".lock"):
            shutil.rmtree(old, ignore_errors=True)
