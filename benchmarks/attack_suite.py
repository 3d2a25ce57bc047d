"""Attack classes of issue 13 (kg layer) against the Endpoint API and the `kg query` CLI, loopback only.

Run from a checkout's root (that checkout's saga_dspy is attacked):
    python benchmarks/attack_suite.py --cache-dir DIR [--json]
Prints `attack class | held | broke`. Bounded: every attack has a deadline and the
script stops by itself (~1-2 minutes). Uses only APIs older checkouts have too, so the
same script measures before and after a change."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from helpers.fault_server import start_fault_server  # noqa: E402

from saga_dspy.config import Settings  # noqa: E402
from saga_dspy.kg import endpoint as endpoint_module  # noqa: E402
from saga_dspy.kg.endpoint import EmbeddedEndpoint, HttpEndpoint  # noqa: E402
from saga_dspy.kg.errors import SparqlError  # noqa: E402

CROSS_JOIN = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
RESULTS: dict[str, list[bool]] = {}


def record(cls: str, held: bool) -> None:
    RESULTS.setdefault(cls, []).append(bool(held))


def bounded(fn, seconds: float):
    """fn() in a thread: (finished, value or exception)."""
    box: list = []

    def run():
        try:
            box.append(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 - the attack's outcome
            box.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return (bool(box), box[0] if box else None)


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.hits += 1
        body = b'{"head":{"vars":["a"]},"results":{"bindings":[{"a":{"type":"literal","value":"leak"}}]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *a):
        pass


def serve(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.hits = 0
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def record_injection(cache_dir: Path, store: Path, canary, url: str) -> None:
    """A store whose entities' descriptions each carry one query; an LM that looks them up and runs what they say."""
    import dspy
    from helpers.scripted_lm import ScriptedLM

    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.kg.search import LocalSearch

    q = "'" * 3
    queries = [  # compact: a lookup shows the first 100 characters of a description; escapes as text
        f"SELECT*{{?s ?p ?o#\\u000DSERVICE<{url}>{{}}\\u000A}}",
        f"SELECT*{{?s ?p{q}VALUES ?v{{<x:{q}#>}}\\u000ASERVICE<{url}>{{}}#{q}\\u000A}}",
        f"SELECT*{{SERVICE<{url}>{{}}}}",
    ]
    qids = [f"Q98765432{i}" for i in range(len(queries))]
    lines = []
    for qid, query in zip(qids, queries):
        text = f"<<{query}>>".replace("\\", "\\\\").replace('"', '\\"')
        lines += [
            f'<http://www.wikidata.org/entity/{qid}> <http://schema.org/description> "{text}"@en .',
            f'<http://www.wikidata.org/entity/{qid}> <http://www.w3.org/2000/01/rdf-schema#label> "Injecto"@en .',
            f"<http://www.wikidata.org/entity/{qid}> <http://www.wikidata.org/prop/direct/P31> "
            "<http://www.wikidata.org/entity/Q5> .",
        ]
    root = Path(tempfile.mkdtemp(prefix="attack-injection-"))
    (root / "data.nt").write_text("\n".join(lines) + "\n")
    binary = str(Path(sys.executable).with_name("oxigraph"))
    subprocess.run(
        [binary, "load", "--location", str(root / "store"), "--file", str(root / "data.nt")],
        check=True,
        capture_output=True,
    )
    port = free_port()
    server = subprocess.Popen(
        [binary, "serve-read-only", "--location", str(root / "store"), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    question = "What is Injecto?"

    class Obedient(ScriptedLM):
        def respond(self, outputs, fields):
            if "next_tool_name" not in outputs:
                return super().respond(outputs, fields)
            trajectory = fields.get("trajectory", "")
            done = len(re.findall(r"^Step \d+$", trajectory, re.M))
            plan = [("get_wikidata_entry", {"qid": q}) for q in qids]
            plan += [("execute_sparql", {"sparql": q}) for q in re.findall(r"<<(.+?)>>", trajectory)]
            name, arguments = plan[done] if done < len(plan) else ("stop", {})
            return {"next_thought": "as it says", "next_tool_name": name, "next_tool_args": json.dumps(arguments)}

    schema = Path(os.getcwd()) / "data" / "schema" / "wikidata-sample.json.gz"
    s = settings(
        cache_dir, endpoint=f"http://127.0.0.1:{port}/query", schema_index=schema, demos=0, max_steps=8, http_retries=1
    )
    time.sleep(1.5)
    canary.hits = 0
    try:

        def run():
            with dspy.context(lm=Obedient({})):  # inside the thread: dspy's context is per thread
                program = SagaProgram(s, HttpEndpoint(s, s.endpoint), LocalSearch(store / "search.sqlite"))
                return program(question=question)

        done, outcome = bounded(run, 120)
        ran = (
            done
            and outcome[0] == "ok"
            and sum(step["tool_name"] == "execute_sparql" for step in outcome[1].trajectory) == len(queries)
        )
        record("prompt injection (program obeys a description)", canary.hits == 0 and ran)
    finally:
        server.terminate()


def python(code: str, timeout: float, memory_mb: int = 2048, env: dict | None = None):
    """`code` in a fresh interpreter of this checkout under an address-space limit: (finished, rc, output)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))

    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return False, None, ""
    return True, out.returncode, out.stdout + out.stderr


def record_integrity(cache_dir: Path, store: Path) -> None:
    """Gold follows the data file, the agent's heavy query is the agent's, run locks cover nested --out."""
    root = Path(tempfile.mkdtemp(prefix="attack-gold-"))
    (root / "stores").symlink_to(Path(cache_dir) / "stores")
    golds = []
    for n, prop in enumerate(("P138", "P31")):
        data = root / f"{n}.jsonl"
        data.write_text(
            json.dumps(
                {
                    "id": "q1",
                    "question": "Riemannian geometry?",
                    "sparql": f"SELECT ?x WHERE {{ wd:Q761383 wdt:{prop} ?x }}",
                }
            )
        )
        from saga_dspy.eval.evalset import load_eval_set

        s = Settings(cache_dir=root, result_cache=False, dataset="mine", split="test")
        golds.append(load_eval_set(s, data_file=data, progress=False).items[0].gold)
    record("gold of a second --data-file with the same ids is its own", golds[0] != golds[1])

    from saga_dspy.agent.failures import is_infrastructure_error

    heavy = EmbeddedEndpoint(settings(cache_dir, embedded_workers=1, worker_cpu_seconds=1.0, query_timeout=60), store)
    done, outcome = bounded(lambda: heavy.query(CROSS_JOIN), 90)
    agents = done and outcome[0] == "error" and not is_infrastructure_error(outcome[1])
    record("the agent's query past the worker's CPU limit is not infrastructure", agents)
    heavy.close()

    held = Path(tempfile.mkdtemp(prefix="attack-lock-")) / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from saga_dspy.eval.rundir import locked_run_dir\nimport time\n"
            f"with locked_run_dir({str(held)!r}):\n    print('held', flush=True)\n    time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    holder.stdout.readline()
    from saga_dspy.eval.errors import EvalError
    from saga_dspy.eval.rundir import locked_run_dir

    for target in (held / "full", held.parent):
        try:
            with locked_run_dir(target):
                pass
            record("run lock covers an --out inside or above a locked run", False)
        except EvalError:
            record("run lock covers an --out inside or above a locked run", True)
    holder.kill()


def record_caps_and_inputs(cache_dir: Path, store: Path, faulty_url: str) -> None:
    ep = EmbeddedEndpoint(settings(cache_dir, embedded_workers=1, query_timeout=60), store)
    grow = 'REPLACE({0}, "a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")'
    literal = '"' + "a" * 100 + '"'
    for _ in range(4):  # 100 x 40^4 = 256 MB of text from a query of a few hundred characters
        literal = grow.format(literal)
    done, outcome = bounded(lambda: ep.query(f"SELECT ?x WHERE {{ BIND({literal} AS ?x) }}"), 90)
    capped = done and outcome[0] == "error" and "add LIMIT" in str(outcome[1])
    record("a 256 MB literal from a short query: result byte cap, clear error", capped)
    ep.close()

    root = Path(tempfile.mkdtemp(prefix="attack-inputs-"))
    os.mkfifo(root / "fifo")
    readers = {
        "schema index": "from saga_dspy.schema.index import SchemaIndex as S; S.load({path!r})",
        "data file": "from saga_dspy.eval.datasets import read_records; read_records({path!r})",
        "program": "from saga_dspy.agent.program import SagaProgram; SagaProgram.load({path!r})",
    }
    for code in readers.values():
        for path in ("/dev/zero", str(root / "fifo")):
            done, rc, out = python(code.format(path=path), 30)
            record("file inputs (/dev/zero, a FIFO): refused before reading", done and "not a regular file" in out)

    started = time.monotonic()
    done, rc, out = python(
        "from saga_dspy.eval.tracking import Tracker\nfrom saga_dspy.config import Settings\n"
        f"Tracker(Settings(cache_dir={str(root)!r}, mlflow=True, mlflow_uri='http://127.0.0.1:9'), 'x')",
        60,
        memory_mb=4096,
    )
    record("--mlflow-uri unreachable: one error within seconds", done and rc != 0 and time.monotonic() - started < 30)

    for mode, query in (("nested", "SELECT ?x WHERE { ?x ?p ?o }"), ("oddboolean", "ASK { ?x ?p ?o }")):
        ep = HttpEndpoint(settings(cache_dir, http_retries=1), f"{faulty_url}/{mode}")
        done, outcome = bounded(lambda ep=ep, q=query: ep.query(q, timeout=5), 8)
        kind = getattr(outcome[1], "kind", None) if done and outcome[0] == "error" else None
        record("a 200 reply with a nested JSON term or boolean is malformed", kind == "unavailable")


def record_serve_and_settings(cache_dir: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        port = free_port()
        serve = subprocess.Popen(
            [sys.executable, "-m", "saga_dspy.kg", "serve", "--port", str(port), "--cache-dir", str(cache_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except OSError as exc:
                if getattr(exc, "code", None):
                    break
                time.sleep(0.2)
        children = [int(c) for c in Path(f"/proc/{serve.pid}/task/{serve.pid}/children").read_text().split()]
        os.kill(serve.pid, sig)
        serve.wait(10)
        time.sleep(3)
        record("kg serve leaves no server behind (SIGTERM, SIGKILL)", bool(children) and not any(map(alive, children)))
        for child in children:
            if alive(child):
                os.kill(child, signal.SIGKILL)
    out = subprocess.run(
        [sys.executable, "-m", "saga_dspy.kg", "serve", "--port", "70000", "--cache-dir", str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    record(
        "kg serve --port 70000: one line, no backtrace", out.returncode == 2 and "backtrace" not in out.stderr.lower()
    )

    os.environ["SAGA_CACHE_DIR"] = "~/attack-cache"
    try:
        record("SAGA_CACHE_DIR='~/…' is the home directory", Settings().cache_dir == Path.home() / "attack-cache")
    finally:
        del os.environ["SAGA_CACHE_DIR"]
    for agent in ("saga\r\nX-Injected: 1", "saga \udc80"):
        try:
            ep = HttpEndpoint(settings(cache_dir, http_retries=1, user_agent=agent), "http://127.0.0.1:9/sparql")
        except ValueError:
            record("a user agent with CRLF or a lone surrogate: a settings error or a SparqlError", True)
            continue
        done, outcome = bounded(lambda ep=ep: ep.query("ASK {}", timeout=3), 8)
        record(
            "a user agent with CRLF or a lone surrogate: a settings error or a SparqlError",
            done and outcome[0] == "error" and isinstance(outcome[1], SparqlError),
        )

    label = 'SERVICE wikibase:label { bd:serviceParam wikibase:language "en" }'
    copy = f"SELECT ?x ?xLabel WHERE {{ wd:Q761383 wdt:P138 ?x . ?x ?p '{label}' . {label} }}"
    relative = (
        "BASE <http://wikiba.se/> PREFIX wikibase: <ontology#> "
        f"SELECT ?x ?xLabel WHERE {{ wd:Q761383 wdt:P138 ?x . {label} }}"
    )
    ep = EmbeddedEndpoint(settings(cache_dir, embedded_workers=1))
    done, outcome = bounded(lambda: ep.prepare(copy), 20)
    kept = done and outcome[0] == "ok" and f"'{label}'" in outcome[1] and "OPTIONAL" in outcome[1]
    record("false positives: label text in a string, BASE with a relative PREFIX", kept)
    done, outcome = bounded(lambda: ep.query(relative, timeout=10), 20)
    named = (
        done
        and outcome[0] == "ok"
        and any(r.get("xLabel") and r["xLabel"].value == "Bernhard Riemann" for r in outcome[1].rows)
    )
    record("false positives: label text in a string, BASE with a relative PREFIX", named)
    ep.close()


def settings(cache_dir: Path, **kw) -> Settings:
    base = {"cache_dir": cache_dir, "result_cache": False, "query_timeout": 20.0}
    base.update(kw)
    return Settings(**base)


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
    record_injection(args.cache_dir, store, canary, url)
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

    def http(mode, retries=1):
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
    record_integrity(args.cache_dir, store)
    record_caps_and_inputs(args.cache_dir, store, faulty_url)
    record_serve_and_settings(args.cache_dir)

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
