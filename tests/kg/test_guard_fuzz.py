"""Differential fuzz of the guard against Oxigraph's own reading of the bytes sent.

Seeded and bounded: a few seconds by default, longer with SAGA_FUZZ_SECONDS (SAGA_FUZZ_SEED picks another
sequence). Generated queries mix comments, codepoint escapes, line ends (LF, CR, CRLF, escaped CR, U+2028 …),
long and short strings, VALUES blocks with IRIs holding quote and `#` characters, `<` comparisons that read
as IRIs, BASE and PREFIX games, SERVICE clauses and update keywords. Whenever an endpoint's check accepts a
text, the `oxigraph` binary (the same Rust parser as pyoxigraph and `kg serve`) must read exactly that text
as a query whose plan calls no SERVICE outside the endpoint's allowlist, and never as an update."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pyoxigraph
import pytest
from conftest import make_settings, oxigraph_binary

from saga_dspy.kg.endpoint import HttpEndpoint
from saga_dspy.kg.errors import SparqlError
from saga_dspy.kg.guard import EMULATED_SERVICES, SERVICE_ALLOWLIST
from saga_dspy.kg.prefixes import WIKIDATA_PREFIXES

SECONDS = float(os.environ.get("SAGA_FUZZ_SECONDS", "5"))
SEED = int(os.environ.get("SAGA_FUZZ_SEED", "0"))
CANARY = "http://127.0.0.1:1/canary"  # Oxigraph refuses port 1 outright: even a miss sends nothing
LABEL = 'SERVICE wikibase:label { bd:serviceParam wikibase:language "en" }'
DECLARED = "".join(f"PREFIX {name}: <{iri}>\n" for name, iri in WIKIDATA_PREFIXES.items())

PAYLOADS = [
    f"SERVICE <{CANARY}> {{ ?a ?b ?c }}",
    f"SERVICE SILENT <{CANARY}> {{ ?a ?b ?c }}",
    f"service <{CANARY}> {{ }}",
    f"{{ SELECT * WHERE {{ SERVICE <{CANARY}> {{ ?a ?b ?c }} }} }}",
    "SERVICE \\u003C" + CANARY + "> { }",
    "\\u0053ERVICE <" + CANARY + "> { }",
    "SERVICE ?u { }",
    "SERVICE wikibase:mwapi { }",
    LABEL,
    "} ; DELETE WHERE { ?s ?p ?o",
    "} ; LOAD <" + CANARY + "> ; SELECT * {",
    "DELETE WHERE { ?s ?p ?o }",
    "INSERT DATA { <x:a> <x:b> <x:c> }",
    "BIND('a'@insert AS ?t) } ; DELETE WHERE { ?s ?p ?o",  # a language tag that spells a keyword, then a real one
]
LINE_ENDS = ["\n", "\r", "\r\n", "\\u000D", "\\u000A", "\\u000D\\u000A", "\u2028", "\x0c", "\x85", "\\u2028", " "]
QUOTES = ["'''", '"""', "'", '"', "\\u0027\\u0027\\u0027", "\\u0027", "\\u0022"]
ODD_IRIS = ["<x:a'''#>", "<x:a'#>", "<x:a#>", "<x:'''>", "<x:a#b#c>", "<x:\\u0027\\u0027\\u0027#>", "<x:a>"]
ESCAPES = ["\\u0041", "\\u003E", "\\u003C", "\\u0027", "\\u0023", "\\u005C", "\\u007D", "\\U0000003E", "\\u000A"]
BENIGN = [
    "?s ?p ?o .",
    "?s ?p ?o",
    "FILTER(?o < ?a)",
    "FILTER(?o<?a)",
    "BIND('x' AS ?z)",
    "VALUES ?v { <x:a> <x:b> }",
    "OPTIONAL { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }",
    "?s wdt:P31 wd:Q5 .",
    "# a comment\n",
    '"""long\nstring""" ?p ?o .',
    "?s wd:Q1\\#x ?o .",  # a local-name escape: `#` inside a prefixed name, a comment to a naive tokenizer
    "?s wd:Q1\\'x ?o .",
    "FILTER(?o<<x:a>)",
    "BIND('x'@delete AS ?z)",  # a language tag, not the keyword
]


def _shape(rng: random.Random) -> str:
    """One query body: a payload behind one of the classes of hiding context, its parts drawn afresh."""
    pay, le, le2, q, iri = (
        rng.choice(PAYLOADS),
        rng.choice(LINE_ENDS),
        rng.choice(LINE_ENDS),
        rng.choice(QUOTES),
        rng.choice(ODD_IRIS),
    )
    q2 = rng.choice([q, rng.choice(QUOTES)])
    shapes = [
        f"?s ?p ?o # note{le}{pay}{le2}",  # comment ends: CR, escaped CR, U+2028 …
        f"?s ?p {q}VALUES ?v {{ {iri} }}{le}{pay} # {q2}{le2}",  # an IRI that closes a string
        f"VALUES ?v {{ {iri} <x:b> }} ?s ?p {q}{pay}{q2} .",
        f"?o ?p ?a FILTER(?o<?a&&{q}>{q}=?x) {pay} FILTER(?x!={q2}{q2})",  # `<` as comparison or IRI
        f"?s ?p <http://a/{rng.choice(ESCAPES)}#x> . {pay}{le}",  # an escape that spells structure
        f'?x ?p "{LABEL}" {pay}',  # the label clause's text in a string
        f"?s ?p {q}{rng.choice(ESCAPES)}{pay}{rng.choice(ESCAPES)}{q2} .",
        f"{rng.choice(BENIGN)} {pay} {rng.choice(BENIGN)}",
    ]
    return rng.choice(shapes)


def _soup(rng: random.Random) -> str:
    parts = PAYLOADS + LINE_ENDS + QUOTES + ODD_IRIS + ESCAPES + BENIGN + ["#", "{", "}", "<", ">", ".", " "]
    return "".join(rng.choice(parts) for _ in range(rng.randint(2, 9)))


def generate(rng: random.Random) -> str:
    body = _shape(rng) if rng.random() < 0.8 else _soup(rng)
    form = rng.choice(["SELECT * WHERE {", "ASK {", "SELECT ?s WHERE {", "CONSTRUCT { ?s ?p ?o } WHERE {"])
    prologue = rng.choice(
        [
            "",
            "",
            "PREFIX ex: <http://ex/>\n",
            f"PREFIX wikibase: <{CANARY}#>\n",
            f"PREFIX x: <{CANARY}>\n",
            f"BASE <{CANARY}/>\n",
            "BASE <http://wikiba.se/> PREFIX wikibase: <ontology#>\n",
            "PREFIX wd: <http://www.wikidata.org/entity/> \\u000D",
        ]
    )
    tail = rng.choice(["}", "}\n", "} LIMIT 3", "} # end", "}\r", "} ; " + rng.choice(PAYLOADS)])
    return f"{prologue}{form} {body} {tail}"


class OxigraphReader:
    """What `oxigraph query` makes of a text on an empty store: its plan's SERVICE targets, or a syntax error
    (then `oxigraph update` on a scratch store must reject the text too)."""

    def __init__(self, root: Path):
        self.store, self.scratch, self.plan = root / "empty", root / "scratch", root / "plan.json"
        for path in (self.store, self.scratch):
            store = pyoxigraph.Store(str(path))
            store.flush()
            del store
        self.binary = oxigraph_binary()

    def services(self, text: str) -> list[str] | None:
        """The SERVICE nodes of the plan, or None when the text is no query to Oxigraph (and no update)."""
        self.plan.unlink(missing_ok=True)
        out = self._run("query", self.store, text, "--explain-file", str(self.plan), "--results-format", "json")
        if self.plan.exists():
            return [
                name for name in _plan_names(json.loads(self.plan.read_text())["plan"]) if name.startswith("Service")
            ]
        assert "error at" in out.stderr, f"oxigraph neither planned nor rejected {text!r}: {out.stderr[:300]}"
        update = self._run("update", self.scratch, text)
        assert update.returncode != 0 and "error at" in update.stderr, f"oxigraph reads an update in {text!r}"
        return None

    def _run(self, command: str, store: Path, text: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.binary, command, "--location", str(store), *extra],
            input=text,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "RUST_BACKTRACE": "0"},
        )


def _plan_names(node: dict) -> list[str]:
    names, stack = [], [node]
    while stack:
        node = stack.pop()
        names.append(node["name"])
        stack.extend(node.get("children", []))
    return names


def _allowed(services: list[str], allowlist: frozenset[str]) -> bool:
    return all(any(name.startswith(f"Service(<{iri}>") for iri in allowlist) for name in services)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    return OxigraphReader(tmp_path_factory.mktemp("oxigraph-reader"))


def test_whatever_the_guard_accepts_oxigraph_reads_as_a_query_without_service_or_update(endpoint, reader):
    endpoints = [
        (endpoint, frozenset(), DECLARED),  # the embedded store: Oxigraph with the prefixes predeclared
        (HttpEndpoint(make_settings(), "http://127.0.0.1:1/sparql"), frozenset(), ""),
        (HttpEndpoint(make_settings(), "https://query.wikidata.org/sparql"), SERVICE_ALLOWLIST, ""),
    ]
    assert EMULATED_SERVICES <= SERVICE_ALLOWLIST
    rng = random.Random(SEED)
    deadline = time.monotonic() + SECONDS
    tried = accepted = 0
    broken: list[tuple[str, str, list[str] | None]] = []
    while time.monotonic() < deadline or tried < 50:
        text = generate(rng)
        tried += 1
        for ep, allowlist, head in endpoints:
            try:
                sent = ep.prepare(text)
            except SparqlError:
                continue
            accepted += 1
            services = reader.services(head + sent)
            if services is not None and not _allowed(services, allowlist):
                broken.append((text, sent, services))
    assert not broken, f"{len(broken)} of {tried} texts passed the guard and call a SERVICE: {broken[:3]}"
    assert accepted >= 10, f"only {accepted} checks of {tried} texts accepted: the fuzz explores nothing"
