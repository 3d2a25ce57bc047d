"""`python -m saga_dspy.kg build | query SPARQL | search TEXT | serve`: the knowledge-graph layer by hand."""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from saga_dspy.cli import ArgumentParser, run_main

from ..config import add_settings_args, apply_offline_env, settings_from_args
from .endpoint import open_endpoint
from .errors import SparqlError
from .results import AskResult, SelectResult
from .search import open_search
from .store import ensure_store
from .worker_limits import exit_with_parent

COMMON = ["cache_dir", "data_dir"]


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m saga_dspy.kg", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    build = sub.add_parser("build", help="load the bundled sample into the embedded store (and its label index)")
    build.add_argument("--force", action="store_true", help="rebuild even if the store is ready")
    build.add_argument("--json", action="store_true")
    add_settings_args(build, COMMON)

    query = sub.add_parser("query", help="run one read-only SPARQL query")
    query.add_argument("sparql", help="the query ('-' reads it from standard input)")
    query.add_argument("--json", action="store_true", help="SPARQL-JSON output")
    add_settings_args(query, COMMON + ["endpoint", "kg", "query_timeout", "row_cap", "result_cache"])

    search = sub.add_parser("search", help="search entity and property labels")
    search.add_argument("text")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--kind", choices=["item", "property"])
    search.add_argument("--json", action="store_true")
    add_settings_args(search, COMMON + ["endpoint", "search"])

    serve = sub.add_parser("serve", help="serve the sample store over HTTP with `oxigraph serve-read-only`")
    serve.add_argument("--port", type=port_number, default=7878)
    serve.add_argument("--timeout", type=int, default=30, help="server-side query timeout, seconds")
    add_settings_args(serve, COMMON)
    return parser


def port_number(text: str) -> int:
    """A TCP port, 1 to 65535 (argparse type)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1 to 65535)")
    return port


def _label(binding) -> str:
    value = binding.value
    return value.rsplit("/", 1)[-1] if binding.is_iri and "wikidata.org/entity/" in value else value


def _print_table(result: SelectResult) -> None:
    print("\t".join(result.variables))
    for row in result.rows:
        print("\t".join(_label(row[v]) if v in row else "" for v in result.variables))
    note = " (capped)" if result.capped else ""
    print(f"-- {len(result.rows)} row(s){note}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    args = _parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:  # pydantic's ValidationError: one line per bad setting
        errors: list[dict[str, Any]] = getattr(exc, "errors", lambda: [])()
        lines = [f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in errors] or [str(exc)]
        print("error: " + "; ".join(lines), file=sys.stderr)
        return 2
    if args.command == "build":
        started = time.monotonic()
        path = ensure_store(settings, force=args.force, log=lambda m: print(m, file=sys.stderr))
        out = {"store": str(path), "seconds": round(time.monotonic() - started, 2)}
        print(json.dumps(out) if args.json else f"store ready at {path} ({out['seconds']} s)")
        return 0
    if args.command == "query":
        sparql = sys.stdin.read() if args.sparql == "-" else args.sparql
        with open_endpoint(settings) as endpoint:
            try:
                result = endpoint.query(sparql)
            except SparqlError as exc:
                if args.json:
                    print(json.dumps({"error": {"kind": exc.kind, "message": exc.message}}))
                else:
                    print(f"error ({exc.kind}): {exc.message}", file=sys.stderr)
                return 2
        if args.json:
            print(json.dumps(result.to_json(), ensure_ascii=False))
        elif isinstance(result, AskResult):
            print("true" if result.value else "false")
        else:
            _print_table(result)
        return 0
    if args.command == "search":
        hits = open_search(settings).search(args.text, limit=args.limit, kind=args.kind)
        if args.json:
            print(json.dumps([h.to_json() for h in hits], ensure_ascii=False))
        else:
            for hit in hits:
                extra = f" [{hit.datatype}]" if hit.datatype else ""
                print(f"{hit.id}\t{hit.label}{extra}\t{hit.description}")
        return 0
    if args.command == "serve":
        path = ensure_store(settings)
        exe = Path(sys.executable).with_name("oxigraph")
        binary = str(exe) if exe.exists() else shutil.which("oxigraph")
        if not binary:
            print("the `oxigraph` server binary is missing: pip install oxigraph", file=sys.stderr)
            return 1
        print(f"SPARQL endpoint: http://127.0.0.1:{args.port}/query", file=sys.stderr)
        command = [binary, "serve-read-only", "--location", str(path), "--bind", f"127.0.0.1:{args.port}"]
        server = subprocess.Popen(
            [*command, "--timeout-s", str(args.timeout)],
            env={**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"},  # its errors in one line
            preexec_fn=functools.partial(exit_with_parent, os.getpid()),  # SIGTERM, SIGKILL: no orphan server
        )
        try:
            return server.wait()
        except KeyboardInterrupt:
            server.terminate()
            server.wait(10)
            return 130
    return 1


def console_main() -> None:
    """The `saga-kg` console script: errors as one line, like `python -m saga_dspy.kg`."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
