"""The kg layer's settings, result cache and `kg serve` under bad input: values rejected in one line, secrets
kept out of dumps, a corrupt cache survived, a served store that takes its server with it."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port, make_settings
from helpers.processes import alive, children, start_kg_serve
from pydantic import ValidationError

from saga_dspy.config import Settings
from saga_dspy.kg.endpoint import EmbeddedEndpoint

# --- settings and the result cache ----------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("query_timeout", 0),
        ("query_timeout", -1),
        ("query_timeout", math.nan),
        ("query_timeout", math.inf),
        ("row_cap", 0),
        ("row_cap", -1),
        ("http_retries", 0),
        ("embedded_workers", 0),
        ("max_query_chars", 0),
        ("worker_memory_mb", -1),
        ("endpoint", "ftp://nowhere"),
        ("endpoint", "file:///etc/passwd"),
        ("endpoint", "http://"),
    ],
)
def test_bad_settings_are_rejected(field, value):
    with pytest.raises(ValidationError):
        Settings(**{field: value})


def test_api_key_is_a_secret():
    settings = Settings(api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(settings) and "sk-very-secret" not in settings.model_dump_json()
    assert settings.api_key.get_secret_value() == "sk-very-secret"


def test_cli_rejects_bad_settings_in_one_line(settings):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "saga_dspy.kg",
            "query",
            "--query-timeout",
            "nan",
            "--cache-dir",
            str(settings.cache_dir),
            "ASK {}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr and "query-timeout" in out.stderr


def test_a_corrupt_cache_row_or_file_does_not_fail_queries_forever(tmp_path, store_path):
    query = "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }"
    settings = make_settings(cache_dir=tmp_path, result_cache=True, embedded_workers=1)
    ep = EmbeddedEndpoint(settings, store_path)
    try:
        ep.query(query)
        ep.cache._db.execute("UPDATE result SET value='{not json'")
        ep.cache._db.commit()
        assert ep.query(query).rows  # a miss, run again
        assert json.loads(
            sqlite3.connect(tmp_path / "results.sqlite").execute("SELECT value FROM result").fetchone()[0]
        )
    finally:
        ep.close()
    (tmp_path / "results.sqlite").write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"results.sqlite{suffix}").unlink(missing_ok=True)
    ep = EmbeddedEndpoint(settings, store_path)
    try:
        assert ep.query(query).rows
        assert ep.query(query).rows
    finally:
        ep.close()


def test_spaced_path_modifiers_and_datatypes_parse_and_run(endpoint):
    """Gold queries write `wdt:P279 *` and `"…" ^^ xsd:…`: the grammar allows the space, so the guard must too."""
    from saga_dspy.kg.results import SelectResult

    spaced = endpoint.query('SELECT ?c WHERE { wd:Q5 wdt:P279 * ?c FILTER("1" ^^ xsd:integer = 1) } LIMIT 3')
    closed = endpoint.query('SELECT ?c WHERE { wd:Q5 wdt:P279* ?c FILTER("1"^^xsd:integer = 1) } LIMIT 3')
    assert isinstance(spaced, SelectResult) and spaced.rows and spaced.rows == closed.rows
    from saga_dspy.kg.sparql_parse import close_spaced_operators

    assert close_spaced_operators("{ ?x wdt:P131 ? ?y . ?x (wdt:P31/wdt:P279) + ?z }") == (
        "{ ?x wdt:P131? ?y . ?x (wdt:P31/wdt:P279)+ ?z }"
    )
    assert close_spaced_operators("{ ?x wdt:P279 # a comment\n * ?y }") == "{ ?x wdt:P279 # a comment\n * ?y }"


# --- kg serve, settings that reach a header or a path -------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_kg_serve_takes_its_server_with_it(settings, sig):
    port = free_port()
    serve = start_kg_serve(port, settings.cache_dir)
    try:
        servers = children(serve.pid)
        assert servers
        os.kill(serve.pid, sig)
        serve.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in servers), "oxigraph serve-read-only outlived kg serve"
    finally:
        try:
            os.killpg(serve.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_kg_serve_refuses_a_port_out_of_range_in_one_line(settings):
    out = subprocess.run(
        [sys.executable, "-m", "saga_dspy.kg", "serve", "--port", "70000", "--cache-dir", str(settings.cache_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "70000" in out.stderr and "1 to 65535" in out.stderr
    assert "backtrace" not in out.stderr.lower() and "Traceback" not in out.stderr


def test_paths_with_a_tilde_are_the_users_home(monkeypatch):
    monkeypatch.setenv("SAGA_CACHE_DIR", "~/saga-cache")
    monkeypatch.setenv("SAGA_SCHEMA_INDEX", "~/index.json.gz")
    settings = Settings()
    assert settings.cache_dir == Path.home() / "saga-cache"
    assert settings.schema_index == Path.home() / "index.json.gz"
    assert Settings(program="~/p.json", out="~/runs").program == Path.home() / "p.json"


@pytest.mark.parametrize("agent", ["saga\r\nX-Evil: 1", "saga\nbot", "saga \udc80", "saga ☃"])
def test_a_user_agent_that_is_no_header_value_is_refused_by_the_settings(agent):
    with pytest.raises(ValidationError, match="user_agent"):
        Settings(user_agent=agent)
    assert Settings(user_agent="saga-dspy/0.1 (Zoë; mailto:x@y.org)").user_agent.startswith("saga")
