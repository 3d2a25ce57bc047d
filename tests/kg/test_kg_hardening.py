"""Attacks on the kg layer, each against real parts: a canary HTTP server that must hear nothing,
a writable Oxigraph server that must stay unchanged, fault-injecting servers on loopback,
worker processes killed, starved and orphaned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import free_port, make_settings, oxigraph_binary
from helpers.fault_server import start_fault_server
from helpers.processes import alive, start_kg_serve

from saga_dspy.kg.endpoint import EmbeddedEndpoint, HttpEndpoint, _Worker, retry_after_seconds
from saga_dspy.kg.errors import (
    EndpointUnavailable,
    MalformedResponse,
    QueryRefused,
    QuerySyntaxError,
    QueryTimeout,
    QueryTooCostly,
    SparqlError,
)

CROSS_JOIN = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"


class _Recorder(BaseHTTPRequestHandler):
    """Records every request; answers like an empty SPARQL endpoint."""

    def _record(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.server.requests.append((self.command, self.path, self.rfile.read(length).decode("utf-8", "replace")))
        body = json.dumps(
            {"head": {"vars": ["a"]}, "results": {"bindings": [{"a": {"type": "literal", "value": "leak"}}]}}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = _record

    def log_message(self, *args):
        pass


def _serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.requests = []
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def canary():
    server = _serve(_Recorder)
    yield server
    server.shutdown()


def bypass_attempts(url: str) -> dict[str, str]:
    """Queries that hide a SERVICE call to `url` from a regex tokenizer, or name it outright."""
    return {
        "comment ended by CR": f"SELECT * WHERE {{ ?s ?p ?o # note\rSERVICE <{url}> {{ ?a ?b ?c }} }}",
        "comment ended by CRLF": f"SELECT * WHERE {{ ?s ?p ?o # note\r\nSERVICE <{url}> {{ ?a ?b ?c }} }}",
        "\\u escape hides #": f"SELECT * WHERE {{ ?s ?p <http://a/\\u0041#x> . SERVICE <{url}> {{ ?a ?b ?c }} }}",
        "\\u escaped IRI": "SELECT * WHERE { SERVICE <" + "".join(f"\\u{ord(c):04X}" for c in url) + "> { ?a ?b ?c } }",
        "< as comparison": (
            f"SELECT * WHERE {{ ?o ?p ?a FILTER(?o<?a&&'>'=?x) SERVICE <{url}> {{ ?a ?b ?c }} FILTER(?x!='') }}"
        ),
        "prefix redefines wikibase": (
            f"PREFIX wikibase: <{url}#> SELECT * WHERE {{ SERVICE wikibase:label {{ ?a ?b ?c }} }}"
        ),
        "BASE and relative IRI": f"BASE <{url}> SELECT * WHERE {{ SERVICE <> {{ ?a ?b ?c }} }}",
        "nested SILENT": f"SELECT * WHERE {{ {{ SELECT * WHERE {{ SERVICE SILENT <{url}> {{ ?a ?b ?c }} }} }} }}",
        "label text in a string": (
            f'SELECT * WHERE {{ ?x ?p "SERVICE wikibase:label {{ }}" SERVICE <{url}> {{ ?a ?b ?c }} }}'
        ),
        "variable target": "SELECT * WHERE { BIND(<" + url + "> AS ?u) SERVICE ?u { ?a ?b ?c } }",
        "update after a query": f"SELECT * WHERE {{ ?s ?p ?o }} ; LOAD <{url}>",
        "declared, then called": f"PREFIX wd: <http://www.wikidata.org/entity/>\nPREFIX x: <{url}>\n"
        f"SELECT * WHERE {{ SERVICE x: {{ ?a ?b ?c }} }}",
        "declarations before an update": f"PREFIX wd: <http://www.wikidata.org/entity/> PREFIX x: <{url}> LOAD x:",
        "LOAD": f"LOAD <{url}>",
        "escaped CR ends a comment": f"SELECT * WHERE {{ ?s ?p ?o # note\\u000DSERVICE <{url}> {{ ?a ?b ?c }}\n}}",
        "escaped CRLF ends a comment": f"SELECT * WHERE {{ ?s ?p ?o # n\\u000D\\u000ASERVICE <{url}> {{ ?a ?b ?c }} }}",
        "line separator ends a comment": f"SELECT * WHERE {{ ?s ?p ?o # note\u2028SERVICE <{url}> {{ ?a ?b ?c }}\n}}",
        "form feed ends a comment": f"SELECT * WHERE {{ ?s ?p ?o # note\x0cSERVICE <{url}> {{ ?a ?b ?c }}\n}}",
        "VALUES IRI closes a string": "SELECT * WHERE { ?s ?p '''VALUES ?v { <x:a'''#> }\n"
        f"SERVICE <{url}> {{ ?a ?b ?c }} # '''\n}}",
        "escaped VALUES IRI closes a string": "SELECT * WHERE { ?s ?p '''VALUES ?v { <x:a'''#> }\\u000A"
        f"SERVICE <{url}> {{ ?a ?b ?c }} # '''\\u000A}}",
        "IRI with # before the clause": f"SELECT * WHERE {{ ?s <http://a/#b> ?o SERVICE <{url}> {{ ?a ?b ?c }} }}",
        "update word after an IRI-like comparison": "ASK { ?o ?p ?a FILTER(?o<?a&&'>'=?x) FILTER(?x != ' DELETE ') }",
    }


def _canary_url(canary) -> str:
    return f"http://127.0.0.1:{canary.server_port}/sparql"


@pytest.mark.parametrize("name", list(bypass_attempts("http://x")))
def test_bypass_attempts_never_reach_the_canary_through_the_api(name, canary, endpoint, oxigraph_server):
    query = bypass_attempts(_canary_url(canary))[name]
    canary.requests.clear()
    for ep in (endpoint, HttpEndpoint(make_settings(http_retries=1), oxigraph_server)):
        with pytest.raises((QueryRefused, QuerySyntaxError)):
            ep.query(query)
    assert canary.requests == []


def test_mwapi_is_refused_off_wdqs(endpoint):
    with pytest.raises(QueryRefused, match="mwapi"):
        endpoint.query('SELECT * WHERE { SERVICE wikibase:mwapi { bd:serviceParam wikibase:api "EntitySearch" } }')


def test_bypass_attempts_never_reach_the_canary_through_the_cli(canary, settings, store_path):
    canary.requests.clear()
    for name, query in bypass_attempts(_canary_url(canary)).items():
        out = subprocess.run(
            [sys.executable, "-m", "saga_dspy.kg", "query", "--json", "--cache-dir", str(settings.cache_dir), "-"],
            input=query,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert json.loads(out.stdout)["error"]["kind"] in ("refused", "syntax"), name
        assert "Traceback" not in out.stderr
    assert canary.requests == []


def test_bypass_attempts_never_reach_the_canary_through_kg_serve(canary, settings, store_path):
    """The project's own server is Oxigraph, which runs any SERVICE it is sent: only the guard stands between."""
    port = free_port()
    serve = start_kg_serve(port, settings.cache_dir)
    try:
        ep = HttpEndpoint(make_settings(http_retries=1), f"http://127.0.0.1:{port}/query")
        assert ep.ask("ASK { wd:Q761383 wdt:P138 wd:Q42299 }") is True
        canary.requests.clear()
        for name, query in bypass_attempts(_canary_url(canary)).items():
            with pytest.raises((QueryRefused, QuerySyntaxError)):
                ep.query(query)
            assert canary.requests == [], name
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(10)


def test_bypass_attempts_never_reach_the_canary_through_the_execute_tool(canary, settings, endpoint, search):
    from saga_dspy.grounding.context import QuestionContext
    from saga_dspy.schema import load_hierarchy, load_schema_index
    from saga_dspy.tools import make_tools

    schema = load_schema_index(settings)
    ctx = QuestionContext(settings, endpoint, search, schema, load_hierarchy(settings, endpoint, schema))
    execute = {t.__name__: t for t in make_tools(ctx)}["execute_sparql"]
    canary.requests.clear()
    for name, query in bypass_attempts(_canary_url(canary)).items():
        observation = execute(query).text
        assert "leak" not in observation, name
    assert canary.requests == []


def test_the_embedded_worker_has_no_network_even_past_the_guard(canary, endpoint):
    """Defence in depth: a SERVICE handed straight to a worker still cannot leave the process."""
    worker = _Worker(endpoint.store_path, 4096, 60)
    try:
        answer = worker.request((f"SELECT * WHERE {{ SERVICE <{_canary_url(canary)}> {{ ?a ?b ?c }} }}", 10, {}, 0), 20)
    finally:
        worker.kill()
    assert answer[0] == "error"
    assert canary.requests == []


def test_http_queries_are_always_sent_as_queries(canary):
    canary.requests.clear()
    ep = HttpEndpoint(make_settings(http_retries=1), _canary_url(canary))
    ep.query("SELECT ?a WHERE { ?a ?b ?c }")
    [(method, _, body)] = canary.requests
    form = urllib.parse.parse_qs(body)
    assert method == "POST" and "query" in form and "update" not in form


# --- a writable endpoint stays unchanged ---------------------------------------------------------


@pytest.fixture(scope="module")
def writable_server():
    location = tempfile.mkdtemp(prefix="saga-writable-")
    port = free_port()
    proc = subprocess.Popen(
        [oxigraph_binary(), "serve", "--location", location, "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            data = urllib.parse.urlencode(
                {"update": "INSERT DATA { <http://ex/a> <http://ex/p> <http://ex/b> }"}
            ).encode()
            urllib.request.urlopen(f"{base}/update", data=data, timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("writable oxigraph server did not start")
            time.sleep(0.2)
    yield base
    proc.terminate()
    proc.wait(10)


def _dump(base: str) -> str:
    data = urllib.parse.urlencode({"query": "SELECT ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o } } "}).encode()
    named = urllib.request.urlopen(f"{base}/query", data=data, timeout=5).read()
    data = urllib.parse.urlencode({"query": "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"}).encode()
    return urllib.request.urlopen(f"{base}/query", data=data, timeout=5).read().decode() + named.decode()


SMUGGLED_UPDATES = [
    "INSERT DATA { <http://ex/x> <http://ex/p> <http://ex/y> }",
    "DELETE WHERE { ?s ?p ?o }",
    "CLEAR ALL",
    "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }",
    "SELECT * WHERE { ?s ?p ?o # x\rDELETE WHERE { ?s ?p ?o }",
    "ASK { ?s ?p ?o FILTER(?o<?s&&'>'=?x) } ; INSERT DATA { <http://ex/x> <http://ex/p> 'y' }",
    "PREFIX x: <http://ex/\\u0041#> DELETE WHERE { ?s ?p ?o }",
    "\\u0044ELETE WHERE { ?s ?p ?o }",
]


@pytest.mark.parametrize("path", ["/query", "/update", "/"])
def test_a_writable_endpoint_stays_unchanged(writable_server, path):
    before = _dump(writable_server)
    assert "http://ex/a" in before
    ep = HttpEndpoint(make_settings(http_retries=1), writable_server + path)
    for update in SMUGGLED_UPDATES:
        with pytest.raises(SparqlError):
            ep.query(update)
    assert _dump(writable_server) == before


# --- worker processes ------------------------------------------------------------------------------


def test_a_parent_killed_mid_query_leaves_no_worker_alive(store_path):
    script = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from conftest import make_settings\n"
        "from saga_dspy.kg.endpoint import EmbeddedEndpoint\n"
        f"ep = EmbeddedEndpoint(make_settings(embedded_workers=2, query_timeout=300), {str(store_path)!r})\n"
        "w = ep._idle.queue[0]\n"
        "print(' '.join(str(x.process.pid) for x in ep._idle.queue), flush=True)\n"
        f"ep.query({CROSS_JOIN!r})\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    time.sleep(1.5)  # the query is running in one of them
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)


def test_a_runaway_query_stays_under_its_memory_limit(store_path):
    # 2 GB: a worker opening a store fresh from its build (RocksDB recovery) can need more than 1 GB of address space
    ep = EmbeddedEndpoint(make_settings(embedded_workers=1, worker_memory_mb=2048), store_path)
    try:
        started = time.monotonic()
        with pytest.raises(QueryTooCostly, match="memory.*2048 MB"):
            ep.query("SELECT ?a ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?c ?f", timeout=60)
        assert time.monotonic() - started < 30
        assert ep.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }").value is True
    finally:
        ep.close()


def test_workers_answer_under_a_lower_hard_address_space_limit(store_path):
    """Under `ulimit -v 3500000` (a hard limit below the workers' 4096 MB) the workers take the hard limit as their
    own instead of dying on a refused raise: queries are answered, and nothing is printed but one line at most."""
    import resource

    hard_kb = 3_500_000

    def lower_limits():
        resource.setrlimit(resource.RLIMIT_AS, (hard_kb * 1024, hard_kb * 1024))
        resource.setrlimit(resource.RLIMIT_CPU, (600, 600))

    script = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from conftest import make_settings\n"
        "from saga_dspy.kg.endpoint import EmbeddedEndpoint\n"
        f"ep = EmbeddedEndpoint(make_settings(embedded_workers=1), {str(store_path)!r})\n"
        "print(ep.query('ASK { wd:Q761383 wdt:P138 wd:Q42299 }').value)\n"
        "print(len(ep.query('SELECT ?p WHERE { wd:Q42299 ?p ?o } LIMIT 5').rows))\n"
        "ep.close()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],  # the repository: its saga_dspy, whatever is installed
        preexec_fn=lower_limits,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "5"], (proc.stdout, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "not allowed" not in proc.stderr, proc.stderr[-2000:]


def test_a_failed_respawn_does_not_poison_the_pool(store_path, monkeypatch):
    ep = EmbeddedEndpoint(make_settings(embedded_workers=1), store_path)
    try:
        original = _Worker.__init__

        def broken(self, *args):
            raise OSError("no more processes")

        monkeypatch.setattr(_Worker, "__init__", broken)
        with pytest.raises(QueryTimeout):
            ep.query(CROSS_JOIN, timeout=1)
        with pytest.raises(EndpointUnavailable, match="could not start"):
            ep.query("ASK { ?s ?p ?o }")
        monkeypatch.setattr(_Worker, "__init__", original)
        assert ep.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }").value is True
    finally:
        ep.close()


def test_a_crashed_worker_reads_as_a_clear_message_and_close_kills_busy_workers(store_path):
    ep = EmbeddedEndpoint(make_settings(embedded_workers=1), store_path)
    worker = ep._idle.queue[0]
    errors = []

    def run():
        try:
            ep.query(CROSS_JOIN, timeout=60)
        except SparqlError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)
    worker.process.send_signal(signal.SIGKILL)
    thread.join(20)
    assert "Ran out of input" not in str(errors[0]) and "SIGKILL" in str(errors[0])
    busy = []
    thread = threading.Thread(target=lambda: busy.append(run()))
    thread.start()
    time.sleep(1.0)
    pids = [w.process.pid for w in ep._live]
    ep.close()  # the worker is checked out by the running query
    thread.join(20)
    assert pids and not any(alive(p) for p in pids)
    assert "closed" in str(errors[-1])


# --- HTTP: one deadline, Retry-After, malformed answers ----------------------------------------


@pytest.fixture(scope="module")
def faulty():
    server = start_fault_server()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_trickled_answer_cannot_outlive_the_deadline(faulty):
    ep = HttpEndpoint(make_settings(http_retries=1), f"{faulty}/trickle")
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        ep.query("ASK { ?s ?p ?o }", timeout=3)
    assert time.monotonic() - started < 4.5


@pytest.mark.parametrize("value", ["3600", formatdate(time.time() + 3600, usegmt=True)])
def test_retry_after_past_the_deadline_gives_up_at_once(faulty, value):
    ep = HttpEndpoint(make_settings(http_retries=3), f"{faulty}/retry-{urllib.parse.quote(value)}")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailable, match="deadline"):
        ep.query("ASK { ?s ?p ?o }", timeout=5)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "soon"])
def test_unusable_retry_after_falls_back_to_backoff(faulty, value):
    ep = HttpEndpoint(make_settings(http_retries=2), f"{faulty}/retry-{value}")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailable, match="after 2 attempts"):
        ep.query("ASK { ?s ?p ?o }", timeout=5)
    assert time.monotonic() - started < 4


def test_retry_after_forms():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds("nan") is None and retry_after_seconds("") is None
    now = time.time()
    assert abs(retry_after_seconds(formatdate(now + 120, usegmt=True), now) - 120) < 2
    assert retry_after_seconds(formatdate(now - 120, usegmt=True), now) == 0.0


@pytest.mark.parametrize(
    "mode,query",
    [
        ("badjson", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("html", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("incomplete", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("boolean", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("shape", "ASK { ?x ?p ?o }"),
        ("nested", "SELECT ?x WHERE { ?x ?p ?o }"),
        ("oddboolean", "ASK { ?x ?p ?o }"),
    ],
)
def test_malformed_answers_are_unavailable_and_never_cached(faulty, tmp_path, mode, query):
    ep = HttpEndpoint(make_settings(http_retries=1, result_cache=True, cache_dir=tmp_path), f"{faulty}/{mode}")
    with pytest.raises(MalformedResponse):
        ep.query(query, timeout=5)
    assert len(ep.cache) == 0


@pytest.mark.parametrize(
    "tag", ["insert", "DELETE", "load", "clear", "drop", "create", "add", "move", "copy", "en-insert"]
)
def test_a_language_tag_that_spells_an_update_keyword_is_no_update(endpoint, tag):
    """`'a'@insert` is a literal with a language tag (one token to every SPARQL tokenizer), not the INSERT keyword;
    the keyword itself outside a string or a tag stays refused."""
    result = endpoint.query(f"SELECT ?x WHERE {{ BIND('a'@{tag} AS ?x) }}")
    assert result.rows[0]["x"].lang == tag.lower()
    with pytest.raises(QueryRefused, match="update"):
        endpoint.query(f"SELECT ?x WHERE {{ BIND('a'@{tag} AS ?x) }} ; INSERT DATA {{ <x:a> <x:b> <x:c> }}")
    with pytest.raises(QueryRefused, match="DELETE"):
        endpoint.query(f"ASK {{ ?o ?p ?a FILTER(?o<?a&&'>'=?x) FILTER(?x != '@{tag} DELETE ') }}")


def test_an_outage_page_is_the_endpoints_error_not_a_result_too_large(faulty):
    """An HTTP 500 with a 5 MB HTML page is an endpoint error that says its status, not `add LIMIT`: the status is
    judged before the size, and an error page is read only as far as its message."""
    ep = HttpEndpoint(make_settings(http_retries=1), f"{faulty}/outage")
    with pytest.raises(EndpointUnavailable, match="HTTP 500: Internal Server Error") as caught:
        ep.query("SELECT ?x WHERE { ?x ?p ?o }", timeout=10)
    assert "too large" not in str(caught.value) and "<" not in str(caught.value)


def test_a_large_html_page_is_a_malformed_reply_not_a_result_too_large(faulty, monkeypatch):
    """A 200 with an HTML page larger than any result: the content type is judged before the size."""
    from saga_dspy.kg import http_endpoint

    monkeypatch.setattr(http_endpoint, "MAX_RESPONSE_BYTES", 2**20)
    ep = HttpEndpoint(make_settings(http_retries=1, max_result_bytes=2**18), f"{faulty}/bightml")
    with pytest.raises(MalformedResponse, match="HTML page"):
        ep.query("SELECT ?x WHERE { ?x ?p ?o }", timeout=10)


def test_deeply_nested_json_is_a_malformed_reply_not_a_recursion_error(faulty):
    ep = HttpEndpoint(make_settings(http_retries=1), f"{faulty}/deep")
    with pytest.raises(MalformedResponse, match="not valid SPARQL-JSON.*depth"):
        ep.query("SELECT ?x WHERE { ?x ?p ?o }", timeout=10)


# --- cost caps --------------------------------------------------------------------------------------


GROWING = 'SELECT ?x WHERE {{ BIND(REPLACE(REPLACE("{seed}", "a", "{rep}"), "a", "{rep}") AS ?x) }}'
BIG_LITERAL = GROWING.format(seed="a" * 200, rep="a" * 100)  # 200 x 100 x 100 = 2 MB from a 300-character query


def test_a_result_over_the_byte_cap_is_the_agents_to_narrow(
    store_path, oxigraph_server, tmp_path, search, schema, hierarchy
):
    """Rows x text is capped like rows: a small query can build a huge literal, and the parent never holds it."""
    from saga_dspy.kg.cache import ResultCache
    from saga_dspy.kg.endpoint import result_bytes

    settings = make_settings(max_result_bytes=40_000, embedded_workers=1, result_cache=True, cache_dir=tmp_path)
    embedded = EmbeddedEndpoint(settings, store_path)
    try:
        for ep in (embedded, HttpEndpoint(settings, oxigraph_server)):
            for query in (BIG_LITERAL, "SELECT ?s ?l WHERE { ?s rdfs:label ?l } LIMIT 2000"):
                with pytest.raises(QueryTooCostly, match="result too large: add LIMIT") as caught:
                    ep.query(query)
                assert caught.value.kind == "too_costly" and not isinstance(caught.value, EndpointUnavailable)
            small = ep.query(GROWING.format(seed="a" * 10, rep="a" * 10))
            assert result_bytes(small) == 1000
        from saga_dspy.grounding.context import QuestionContext
        from saga_dspy.tools import make_tools

        ctx = QuestionContext(settings, embedded, search, schema, hierarchy)
        execute = {t.__name__: t for t in make_tools(ctx)}["execute_sparql"]
        assert "result too large: add LIMIT" in execute(BIG_LITERAL).text
        assert len(embedded.cache) == 2  # the small result of each endpoint, nothing of the refused ones
    finally:
        embedded.close()
    cache = ResultCache(tmp_path / "capped.sqlite", max_entry_bytes=500)
    cache.put("k", small)
    assert len(cache) == 0 and cache.get("k") is None


def test_an_oversized_query_is_refused_before_parsing(endpoint, monkeypatch):
    from saga_dspy.kg import sparql_parse

    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: pytest.fail("parsed an oversized query"))
    with pytest.raises(QueryRefused, match="20,000"):
        endpoint.query("SELECT * WHERE { ?s ?p ?o } " + "#" * 1_000_000)


def test_deeply_nested_queries_are_syntax_errors(endpoint):
    with pytest.raises(QuerySyntaxError):
        endpoint.query("SELECT ?x WHERE " + "{ " * 300 + "?x ?p ?o" + " }" * 300)


def test_long_search_text_is_fast_and_within_sqlite_limits(search):
    words = [f"w{i}x" for i in range(1000)]
    started = time.monotonic()
    search.search(" ".join(words))
    search.search(" ".join(words[:750]))
    search.search("Riemannian geometry " * 50_000)
    assert time.monotonic() - started < 10  # the uncapped phrase set took 13 s for the 1,000 words alone
    assert search.search("Riemannian geometry", limit=3)[0].id == "Q761383"
