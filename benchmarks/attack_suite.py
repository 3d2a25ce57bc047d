"""Attack classes against the kg layer (Endpoint API, `kg query` CLI, `kg serve`), the program and the
evaluation, loopback only.

Run from a checkout's root (that checkout's saga_dspy is attacked):
    python benchmarks/attack_suite.py --cache-dir DIR [--json]
Prints `attack class | held | broke`. Bounded: every attack has a deadline and the
script stops by itself (a few minutes). Uses only APIs older checkouts have too, so the
same script measures before and after a change; a section that fails outright counts as one broken attack of
its classes (its error goes to stderr)."""

from __future__ import annotations

import argparse
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
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from attack_common import (  # noqa: E402
    CROSS_JOIN,
    RESULTS,
    Recorder,
    alive,
    bounded,
    free_port,
    record,
    serve,
    settings,
)
from attack_integrity import (  # noqa: E402
    record_caps_and_inputs,
    record_injection,
    record_integrity,
    record_serve_and_settings,
)
from helpers.fault_server import start_fault_server  # noqa: E402

from saga_dspy.config import Settings  # noqa: E402
from saga_dspy.kg import endpoint as endpoint_module  # noqa: E402
from saga_dspy.kg.endpoint import EmbeddedEndpoint, HttpEndpoint  # noqa: E402
from saga_dspy.kg.errors import SparqlError  # noqa: E402


def section(classes: list[str], fn, *args) -> None:
    """fn(*args); a section that raises counts as one broken attack in each of its classes still unrecorded."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - an old checkout may fail an attack before recording it
        print(f"{fn.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
        for cls in classes:
            if cls not in RESULTS:
                record(cls, False)


def rewritten_after_check(url: str) -> list[str]:
    """Texts the old check memo rewrote after deciding: a VALUES IRI holding quotes and `#`, lifted out of a
    long string and pasted back, closes the string and opens a comment in the text sent."""
    q = "'" * 3
    return [
        f"SELECT * WHERE {{ ?s ?p {q}VALUES ?v {{ <x:a{q}#> }}\nSERVICE <{url}> {{ ?a ?b ?c }} # {q}\n}}",
        f"SELECT * WHERE {{ ?s ?p {q}VALUES ?v {{ <x:a{q}#> }}\\u000ASERVICE <{url}> {{ ?a ?b ?c }} # {q}\\u000A}}",
        f"ASK {{ ?s ?p {q}VALUES ?v {{ <x:b> <x:c{q}#> }}\nSERVICE SILENT <{url}> {{ }} # {q}\n}}",
    ]


def decoded_line_ends(url: str) -> list[str]:
    """An escaped CR decoded after line ends were normalised: a comment to rdflib, a line end to Oxigraph."""
    return [
        f"SELECT * WHERE {{ ?s ?p ?o # note\\u000DSERVICE <{url}> {{ ?a ?b ?c }}\n}}",
        f"SELECT * WHERE {{ ?s ?p ?o # n\\u000D\\u000ASERVICE <{url}> {{ ?a ?b ?c }} }}",
        f"ASK {{ ?s ?p ?o #\\u000DSERVICE SILENT <{url}> {{ }}\n}}",
    ]


def bypasses(url: str) -> list[str]:
    return [
        f"SELECT * WHERE {{ ?s ?p ?o # note\rSERVICE <{url}> {{ ?a ?b ?c }} }}",
        f"SELECT * WHERE {{ ?s ?p <http://a/\\u0041#x> . SERVICE <{url}> {{ ?a ?b ?c }} }}",
        f"SELECT * WHERE {{ ?o ?p ?a FILTER(?o<?a&&'>'=?x) SERVICE <{url}> {{ ?a ?b ?c }} FILTER(?x!='') }}",
        f"PREFIX wikibase: <{url}#> SELECT * WHERE {{ SERVICE wikibase:label {{ ?a ?b ?c }} }}",
        f"SELECT * WHERE {{ {{ SELECT * WHERE {{ SERVICE SILENT <{url}> {{ ?a ?b ?c }} }} }} }}",
        f"SELECT * WHERE {{ SERVICE <{url}> {{ ?a ?b ?c }} }}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache-dir", type=Path, required=True, help="cache dir holding the built store")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from saga_dspy.kg.store import ensure_store

    store = ensure_store(settings(args.cache_dir))
    canary = serve(Recorder)
    url = f"http://127.0.0.1:{canary.server_port}/sparql"
    embedded = EmbeddedEndpoint(settings(args.cache_dir, embedded_workers=2), store)

    # 1. guard bypass through the API and the CLI
    for query in bypasses(url) + [
        'SELECT * WHERE { SERVICE wikibase:mwapi { bd:serviceParam wikibase:api "EntitySearch" } }'
    ]:
        canary.hits = 0
        done, outcome = bounded(lambda query=query: embedded.query(query, timeout=5), 10)
        refused = done and outcome[0] == "error" and isinstance(outcome[1], SparqlError)
        record("SERVICE bypass (API, embedded)", refused and canary.hits == 0)
    for query in bypasses(url):
        canary.hits = 0
        out = subprocess.run(
            [sys.executable, "-m", "saga_dspy.kg", "query", "--json", "--cache-dir", str(args.cache_dir), "-"],
            input=query,
            capture_output=True,
            text=True,
            timeout=60,
        )
        record("SERVICE bypass (CLI)", out.returncode == 2 and canary.hits == 0 and "Traceback" not in out.stderr)

    # 1b. the same over HTTP to the project's own `kg serve` (Oxigraph runs any SERVICE it is sent), by class
    port = free_port()
    serving = subprocess.Popen(
        [sys.executable, "-m", "saga_dspy.kg", "serve", "--port", str(port), "--cache-dir", str(args.cache_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    served = HttpEndpoint(settings(args.cache_dir, http_retries=1), f"http://127.0.0.1:{port}/query")
    for _ in range(150):
        if bounded(lambda: served.query("ASK {}", timeout=2), 4)[1][0] == "ok":
            break
        time.sleep(0.2)
    classes = {
        "SERVICE bypass (HTTP, kg serve)": bypasses(url),
        "SERVICE bypass: text rewritten after the check (kg serve)": rewritten_after_check(url),
        "SERVICE bypass: escape decoded after line ends (kg serve)": decoded_line_ends(url),
    }
    for cls, queries in classes.items():
        for query in queries:
            canary.hits = 0
            done, outcome = bounded(lambda q=query: served.query(q, timeout=5), 10)
            refused = done and outcome[0] == "error" and isinstance(outcome[1], SparqlError)
            record(cls, refused and canary.hits == 0)
    for query in rewritten_after_check(url) + decoded_line_ends(url):
        canary.hits = 0
        done, outcome = bounded(lambda q=query: embedded.query(q, timeout=5), 10)
        record(
            "SERVICE bypass, new classes (API, embedded: the guard, not the seccomp filter)",
            done and (outcome[0] == "error" and isinstance(outcome[1], endpoint_module.QueryRefused)),
        )

    # 1c. prompt injection: an entity description carries the queries, a scripted LM obeys it (the program)
    section(["prompt injection (program obeys a description)"], record_injection, args.cache_dir, store, canary, url)
    os.killpg(serving.pid, signal.SIGTERM)

    # 2. update smuggling against a writable server
    location = tempfile.mkdtemp(prefix="attack-writable-")
    port = free_port()
    binary = Path(sys.executable).with_name("oxigraph")
    server = subprocess.Popen(
        [str(binary), "serve", "--location", location, "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def post(kind: str, text: str) -> bytes:
        return urllib.request.urlopen(
            f"{base}/{kind}", data=urllib.parse.urlencode({kind: text}).encode(), timeout=5
        ).read()

    for _ in range(100):
        try:
            post("update", "INSERT DATA { <http://ex/a> <http://ex/p> <http://ex/b> }")
            break
        except OSError:
            time.sleep(0.2)
    dump = lambda: post("query", "SELECT * WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }")  # noqa: E731
    smuggled = [
        "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }",
        "SELECT * WHERE { ?s ?p ?o # x\rDELETE WHERE { ?s ?p ?o }",
        "ASK { ?s ?p ?o FILTER(?o<?s&&'>'=?x) } ; INSERT DATA { <http://ex/x> <http://ex/p> 'y' }",
        "\\u0044ELETE WHERE { ?s ?p ?o }",
        "PREFIX x: <http://a/\\u0041#> DELETE WHERE { ?s ?p ?o }",
        "INSERT DATA { <http://ex/x> <http://ex/p> <http://ex/y> }",
    ]
    for path in ("/query", "/update", "/"):
        for query in smuggled:
            before = dump()
            ep = HttpEndpoint(settings(args.cache_dir, http_retries=1), base + path)
            done, outcome = bounded(lambda ep=ep, query=query: ep.query(query, timeout=5), 10)
            after = dump()
            record("update smuggling (HTTP, writable server)", after == before)
            if after != before:  # re-seed for the next attempt
                post("update", "CLEAR ALL")
                post("update", "INSERT DATA { <http://ex/a> <http://ex/p> <http://ex/b> }")
    server.terminate()

    # 3. orphaned workers: the parent SIGKILLed mid-query
    script = (
        "import sys; sys.path.insert(0, '.')\n"
        "from saga_dspy.config import Settings\n"
        "from saga_dspy.kg.endpoint import EmbeddedEndpoint\n"
        f"ep = EmbeddedEndpoint(Settings(cache_dir={str(args.cache_dir)!r}, result_cache=False, embedded_workers=1,"
        f" query_timeout=60), {str(store)!r})\n"
        "print(ep._idle.queue[0].process.pid, flush=True)\n"
        f"ep.query({CROSS_JOIN!r})\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    time.sleep(1.5)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    time.sleep(3)
    record("orphaned worker after parent SIGKILL", not alive(pid))
    if alive(pid):
        os.kill(pid, signal.SIGKILL)

    # 4. runaway memory within the deadline
    runaway = EmbeddedEndpoint(settings(args.cache_dir, embedded_workers=1, worker_memory_mb=1024), store)
    worker_pid = runaway._idle.queue[0].process.pid
    peak = [0]

    def watch():
        while alive(worker_pid):
            try:
                for line in Path(f"/proc/{worker_pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS"):
                        peak[0] = max(peak[0], int(line.split()[1]) // 1024)
            except OSError:
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    done, outcome = bounded(
        lambda: runaway.query("SELECT ?a ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?c ?f", timeout=6), 12
    )
    clear = done and outcome[0] == "error" and "memory" in str(outcome[1])
    record("runaway query memory (peak <= 1.1 GB, clear error)", peak[0] <= 1100 and clear)
    print(
        f"runaway worker peak RSS: {peak[0]} MB; outcome: {outcome[1] if outcome else 'still running'}", file=sys.stderr
    )
    runaway.close()

    # 5. one failed respawn
    pool = EmbeddedEndpoint(settings(args.cache_dir, embedded_workers=1), store)
    original = endpoint_module._Worker.__init__

    def broken(self, *a, **k):
        raise OSError("no more processes")

    endpoint_module._Worker.__init__ = broken
    bounded(lambda: pool.query(CROSS_JOIN, timeout=1), 5)
    endpoint_module._Worker.__init__ = original
    bounded(lambda: pool.query("ASK { ?s ?p ?o }", timeout=5), 8)  # may report the failed start
    done, outcome = bounded(lambda: pool.query("ASK { ?s ?p ?o }", timeout=5), 8)
    record("pool after a failed respawn", done and outcome[0] == "ok")
    pool.close()

    # 6. HTTP deadline, Retry-After, malformed answers
    faulty = start_fault_server()
    faulty_url = f"http://127.0.0.1:{faulty.server_port}"

    def http(mode: str, retries: int = 1) -> HttpEndpoint:
        return HttpEndpoint(settings(args.cache_dir, http_retries=retries), f"{faulty_url}/{mode}")

    started = time.monotonic()
    done, outcome = bounded(lambda: http("trickle").query("ASK { ?s ?p ?o }", timeout=3), 12)
    record(
        "HTTP deadline (trickled body, 3 s timeout)",
        done and outcome[0] == "error" and time.monotonic() - started < 4.5,
    )
    for value in ("3600", "Wed, 21 Oct 2099 07:28:00 GMT"):
        started = time.monotonic()
        done, outcome = bounded(
            lambda value=value: http(f"retry-{urllib.parse.quote(value)}", 3).query("ASK { ?s ?p ?o }", timeout=5), 8
        )
        record("Retry-After beyond the deadline", done and time.monotonic() - started < 6)
    for value in ("-5", "nan"):
        done, outcome = bounded(lambda value=value: http(f"retry-{value}", 2).query("ASK { ?s ?p ?o }", timeout=5), 8)
        record("negative / nan Retry-After", done and outcome[0] == "error" and isinstance(outcome[1], SparqlError))
    for mode in ("badjson", "html", "incomplete", "boolean"):
        cache_dir = Path(tempfile.mkdtemp(prefix="attack-cache-"))
        ep = HttpEndpoint(settings(cache_dir, http_retries=1, result_cache=True), f"{faulty_url}/{mode}")
        done, outcome = bounded(lambda ep=ep: ep.query("SELECT ?x WHERE { ?x ?p ?o }", timeout=5), 8)
        kind = getattr(outcome[1], "kind", None) if done and outcome[0] == "error" else None
        record("malformed 200 answers (unavailable-kind, not cached)", kind == "unavailable" and len(ep.cache) == 0)

    # 7. cost caps
    started = time.monotonic()
    done, outcome = bounded(lambda: embedded.query("SELECT * WHERE { ?s ?p ?o } " + "#" * 1_000_000, timeout=5), 20)
    record("1 MB query refused fast", done and outcome[0] == "error" and time.monotonic() - started < 2)
    from saga_dspy.kg.search import LocalSearch

    search = LocalSearch(store / "search.sqlite")
    for n in (750, 1000):
        started = time.monotonic()
        done, outcome = bounded(lambda n=n: search.search(" ".join(f"w{i}x" for i in range(n))), 30)
        record("long entity search (750 / 1000 words)", done and outcome[0] == "ok" and time.monotonic() - started < 2)

    # 8. settings validation and a corrupt cache
    for field, value in (
        ("query_timeout", 0),
        ("query_timeout", -1),
        ("query_timeout", float("nan")),
        ("query_timeout", float("inf")),
        ("row_cap", 0),
        ("row_cap", -1),
        ("endpoint", "ftp://x"),
    ):
        try:
            Settings(**{field: value})
            record("numeric / URL settings validated", False)
        except ValueError:
            record("numeric / URL settings validated", True)
    cache_dir = Path(tempfile.mkdtemp(prefix="attack-cache-"))
    ep = EmbeddedEndpoint(settings(cache_dir, result_cache=True, embedded_workers=1), store)
    ep.query("ASK { ?s ?p ?o }")
    ep.cache._db.execute("UPDATE result SET value='{not json'")
    ep.cache._db.commit()
    done, outcome = bounded(lambda: ep.query("ASK { ?s ?p ?o }"), 10)
    record("corrupt result cache (row, file)", done and outcome[0] == "ok")
    ep.close()
    (cache_dir / "results.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (cache_dir / f"results.sqlite{suffix}").unlink(missing_ok=True)
    try:
        ep = EmbeddedEndpoint(settings(cache_dir, result_cache=True, embedded_workers=1), store)
        done, outcome = bounded(lambda: ep.query("ASK { ?s ?p ?o }"), 10)
        record("corrupt result cache (row, file)", done and outcome[0] == "ok")
        ep.close()
    except Exception:
        record("corrupt result cache (row, file)", False)
    embedded.close()

    # 9. evaluation integrity, resource caps, file inputs, kg serve, settings that reach a header or a path
    section(
        [
            "gold of a second --data-file with the same ids is its own",
            "the agent's query past the worker's CPU limit is not infrastructure",
            "run lock covers an --out inside or above a locked run",
        ],
        record_integrity,
        args.cache_dir,
        store,
    )
    section(
        [
            "a 256 MB literal from a short query: result byte cap, clear error",
            "file inputs (/dev/zero, a FIFO): refused before reading",
            "--mlflow-uri unreachable: one error within seconds",
            "a 200 reply with a nested JSON term or boolean is malformed",
        ],
        record_caps_and_inputs,
        args.cache_dir,
        store,
        faulty_url,
    )
    section(
        [
            "kg serve leaves no server behind (SIGTERM, SIGKILL)",
            "kg serve --port 70000: one line, no backtrace",
            "SAGA_CACHE_DIR='~/…' is the home directory",
            "a user agent with CRLF or a lone surrogate: a settings error or a SparqlError",
            "false positives: label text in a string, BASE with a relative PREFIX",
        ],
        record_serve_and_settings,
        args.cache_dir,
    )

    rows = [(cls, sum(v), len(v) - sum(v)) for cls, v in RESULTS.items()]
    if args.json:
        print(json.dumps({cls: {"held": h, "broke": b} for cls, h, b in rows}))
    else:
        print("attack class | held | broke")
        for cls, h, b in rows:
            print(f"{cls} | {h} | {b}")
    sys.stdout.flush()
    os._exit(0)  # threads still stuck in an unbounded old client must not keep the script alive


if __name__ == "__main__":
    main()
