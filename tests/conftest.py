"""Shared fixtures: the real bundled store (built once per machine into a test cache),
a real Oxigraph HTTP server on a free loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from saga_dspy.config import Settings, apply_offline_env

apply_offline_env()
REPO = Path(__file__).resolve().parents[1]
TEST_CACHE = Path(os.environ.get("SAGA_TEST_CACHE_DIR", REPO / ".cache" / "test"))


# the prompt layout before the cost defaults: the mechanism tests read DSPy's own layout (every field after the
# trajectory, whole observations, three shown candidates) and the plain pools; tests/agent/test_prompt_layout.py
# runs the defaults
DSPY_LAYOUT = {
    "demo_picks": False,
    "demo_anchors": 0,
    "state_in_trajectory": False,
    "closing_line": "dspy",
    "compact_observations": False,
    "shown_candidates": 3,
    "thought_tokens": 0,
}


def make_settings(**overrides) -> Settings:
    base = {"cache_dir": TEST_CACHE, "result_cache": False, "query_timeout": 20.0, **DSPY_LAYOUT}
    base.update(overrides)
    return Settings(**base)


def scripted_settings(split: str):
    """QALD-10 settings for runs driven by a scripted LM: no pool demos, no tracking, no LM cache."""
    return make_settings(
        dataset="qald10", split=split, demos=0, max_steps=6, mlflow=False, lm="scripted", lm_cache=False
    )


@pytest.fixture(scope="session")
def settings() -> Settings:
    return make_settings()


@pytest.fixture(scope="session")
def store_path(settings) -> Path:
    from saga_dspy.kg.store import ensure_store

    return ensure_store(settings)


@pytest.fixture(scope="session")
def endpoint(settings, store_path):
    from saga_dspy.kg.endpoint import EmbeddedEndpoint

    ep = EmbeddedEndpoint(settings, store_path)
    yield ep
    ep.close()


@pytest.fixture(scope="session")
def search(settings, store_path):
    from saga_dspy.kg.search import LocalSearch

    return LocalSearch(store_path / "search.sqlite")


@pytest.fixture(scope="session")
def schema(settings):
    """The bundled schema index (the sample's)."""
    from saga_dspy.schema import load_schema_index

    return load_schema_index(settings)


@pytest.fixture(scope="session")
def hierarchy(settings, endpoint, schema):
    from saga_dspy.schema import load_hierarchy

    return load_hierarchy(settings, endpoint, schema)


@pytest.fixture
def ask(settings, endpoint, search, schema, hierarchy):
    """A question's grounding context on the real store, with its answer type (label, class id)."""
    from saga_dspy.grounding.context import QuestionContext

    def build(question: str, answer_type: tuple[str, str]):
        return QuestionContext(
            settings, endpoint, search, schema, hierarchy, question=question, variant="full", answer_type=answer_type
        )

    return build


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def oxigraph_binary() -> str:
    exe = Path(sys.executable).with_name("oxigraph")
    return str(exe) if exe.exists() else (shutil.which("oxigraph") or "oxigraph")


@pytest.fixture(scope="session")
def oxigraph_server(store_path):
    """A real `oxigraph serve-read-only` over the sample store; yields its query URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            oxigraph_binary(),
            "serve-read-only",
            "--location",
            str(store_path),
            "--bind",
            f"127.0.0.1:{port}",
            "--timeout-s",
            "3",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/query"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP answer of any status: it is up
                break
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("oxigraph server did not start")
    yield url
    proc.terminate()
    proc.wait(10)


from helpers.runs import two_variant_run  # noqa: E402, F401 (a fixture: run directories of a scripted eval)
