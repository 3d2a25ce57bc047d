"""Child process that owns a read-only pyoxigraph store and answers queries.

Started by `EmbeddedEndpoint` as `python -m saga_dspy.kg.oxigraph_worker STORE PARENT_PID
MEMORY_MB CPU_SECONDS`; requests and answers are pickled over stdin/stdout. Living in its
own process lets the parent kill a query that runs past its deadline; before the store
opens, the worker binds itself to its parent's life, to its limits and away from any
network (`worker_limits`)."""

from __future__ import annotations

import pickle
import sys

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


def term_tuple(term):
    """A pyoxigraph term as (type, value, datatype, lang), SPARQL-JSON's vocabulary."""
    import pyoxigraph

    if term is None:
        return None
    if isinstance(term, pyoxigraph.NamedNode):
        return ("uri", term.value, None, None)
    if isinstance(term, pyoxigraph.BlankNode):
        return ("bnode", term.value, None, None)
    if isinstance(term, pyoxigraph.Literal):
        datatype: str | None = term.datatype.value
        if term.language or datatype in (XSD_STRING, RDF_LANGSTRING):
            datatype = None
        return ("literal", term.value, datatype, term.language)
    return ("literal", str(term), None, None)


def term_bytes(term: tuple | None) -> int:
    """The text a term carries (value, datatype, language), as a result's size counts it."""
    return 0 if term is None else len(term[1]) + len(term[2] or "") + len(term[3] or "")


def answer(store, sparql: str, row_cap: int, prefixes: dict, max_bytes: int = 0) -> tuple:
    """One answer message: ("select", variables, rows, capped), ("ask", value), or ("too_large", rows, bytes)
    once the rows' values pass `max_bytes` (0: no bound), ("syntax" | "memory" | "error", message)."""
    import pyoxigraph

    try:
        result = store.query(sparql, prefixes=prefixes)
        if isinstance(result, pyoxigraph.QueryBoolean):
            return ("ask", bool(result))
        if isinstance(result, pyoxigraph.QuerySolutions):
            variables = [v.value for v in result.variables]
            items = ([solution[i] for i in range(len(variables))] for solution in result)
        else:  # CONSTRUCT / DESCRIBE: triples as subject/predicate/object rows
            variables = ["subject", "predicate", "object"]
            items = ([t.subject, t.predicate, t.object] for t in result)
        rows: list[list[tuple]] = []
        capped, size = False, 0
        for item in items:
            if len(rows) >= row_cap:
                capped = True
                break
            row = [term_tuple(term) for term in item]
            size += sum(term_bytes(term) for term in row)
            if max_bytes and size > max_bytes:
                return ("too_large", len(rows) + 1, size)
            rows.append(row)
        return ("select", variables, rows, capped)
    except SyntaxError as exc:
        return ("syntax", str(exc))
    except MemoryError:
        return ("memory", "")
    except Exception as exc:  # evaluation errors from Oxigraph
        return ("error", f"{type(exc).__name__}: {exc}")


def main() -> None:
    # Imported here, not at the top: the parent imports this module only for term_tuple.
    import pyoxigraph

    from .worker_limits import deny_network, die_with_parent, limit_cpu_for_next_query, limit_memory

    store_path, parent_pid, memory_mb, cpu_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    die_with_parent(parent_pid)
    said = {""}  # a limit that cannot be set is said once, in one line

    def say(note: str) -> None:
        if note not in said:
            print(note, file=sys.stderr)
            said.add(note)

    say(limit_memory(memory_mb))
    if not deny_network():
        print(
            "oxigraph worker: no seccomp filter on this platform; SERVICE is refused by the guard only", file=sys.stderr
        )
    store = pyoxigraph.Store.read_only(store_path)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    pickle.dump(("ready",), stdout)
    stdout.flush()
    while True:
        try:
            sparql, row_cap, prefixes, max_bytes = pickle.load(stdin)
        except EOFError:
            return
        say(limit_cpu_for_next_query(cpu_seconds))
        pickle.dump(answer(store, sparql, row_cap, prefixes, max_bytes), stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


if __name__ == "__main__":
    main()
