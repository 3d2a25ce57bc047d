"""The endpoint's check memo: a text checked once is not parsed again, and nothing unchecked is sent."""

from __future__ import annotations

import pytest

from saga_dspy.kg import sparql_parse
from saga_dspy.kg.check_memo import CheckMemo
from saga_dspy.kg.endpoint import EmbeddedEndpoint
from saga_dspy.kg.errors import QueryRefused, QuerySyntaxError
from tests.conftest import make_settings
from tests.kg.test_kg_hardening import bypass_attempts

WD = "http://www.wikidata.org/entity/"
LABELS = (
    "SELECT ?e ?l WHERE {{ VALUES ?e {{ {values} }} ?e <http://www.w3.org/2000/01/rdf-schema#label> ?l "
    'FILTER(LANG(?l) = "en") }}'
)


def _labels(ids):
    return LABELS.format(values=" ".join(f"<{WD}{i}>" for i in ids))


@pytest.fixture()
def fresh(endpoint):
    """The session endpoint with an empty memo (restored afterwards)."""
    saved = endpoint.check_memo
    endpoint.check_memo = CheckMemo()
    yield endpoint
    endpoint.check_memo = saved


def _forbid_parsing(monkeypatch):
    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: pytest.fail(f"parsed again: {q[:80]}"))


def test_the_same_text_is_not_parsed_again_and_another_is(fresh, monkeypatch):
    first = fresh.select(_labels(["Q42"]))
    assert {b.value for b in first.column("e")} == {WD + "Q42"}
    calls = []
    real = sparql_parse.parseQuery
    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: calls.append(q) or real(q))
    again = fresh.select(_labels(["Q42"]))
    assert again.rows == first.rows and calls == []
    second = fresh.select(_labels(["Q64", "Q90"]))  # other IRIs: another text, checked in full
    assert {b.value for b in second.column("e")} == {WD + "Q64", WD + "Q90"}
    assert len(calls) == 1 and fresh.check_memo.hits == 1 and fresh.check_memo.misses == 2


def test_an_iri_that_closes_a_string_is_never_pasted_into_a_checked_text(fresh):
    """An IRI may hold quote and # characters: lifted out of a VALUES block inside a long string and pasted
    back after the check, it closed the string and opened a comment, so the text sent was another query."""
    hidden = "SELECT * WHERE { ?s ?p '''VALUES ?v { <x:a'''#> }\nSERVICE <http://127.0.0.1:9/x> { ?a ?b ?c } # '''\n}"
    with pytest.raises(QueryRefused, match="SERVICE"):
        fresh.prepare(hidden)


@pytest.mark.parametrize("name", list(bypass_attempts("http://x")))
def test_bypass_attempts_beside_a_checked_values_block_are_still_refused(name, fresh, monkeypatch):
    fresh.select(_labels(["Q42"]))
    attempt = bypass_attempts("http://127.0.0.1:9/sparql")[name]
    head, _, body = attempt.partition("WHERE")
    prologue = head[: head.find("SELECT")] if "SELECT" in head else ""
    inside = [prologue + _labels(["Q42"]).replace("} ?e", "} " + body + " ?e", 1)] if body else []
    for query in (
        attempt.replace("WHERE {", f"WHERE {{ VALUES ?e {{ <{WD}Q1> }}", 1),
        _labels(["Q42"]) + " ; " + attempt,
        *inside,
    ):
        with pytest.raises((QueryRefused, QuerySyntaxError)):
            fresh.query(query)


def test_refusals_name_the_query_as_written_and_are_not_remembered(fresh):
    bad = _labels(["Q42"]).replace("SELECT", "SELEKT")
    for _ in range(2):
        with pytest.raises(QuerySyntaxError) as err:
            fresh.query(bad)
        assert "SELEKT" in str(err.value)
    assert fresh.check_memo.hits == 0


def test_the_memo_is_bounded():
    memo = CheckMemo(capacity=2)
    for i in range(5):
        memo.checked(f"ASK {{ <x:{i}> ?p ?o }}", lambda q: (q, "ASK"))
    assert len(memo._entries) == 2


def test_oversized_values_queries_are_still_refused(settings, store_path):
    ep = EmbeddedEndpoint(make_settings(max_query_chars=500), store_path)
    try:
        ep.select(_labels(["Q42"]))
        with pytest.raises(QueryRefused):
            ep.select(_labels([f"Q{i}" for i in range(100)]))
    finally:
        ep.close()


def test_pattern_analysis_reuses_the_parse_of_the_check_it_follows(fresh, monkeypatch):
    """The execute tool checks a query, then analyses its patterns: one parse, not two."""
    from saga_dspy.grounding.patterns import parse_query
    from saga_dspy.kg.flavours import WIKIDATA

    calls = []
    real = sparql_parse.parseQuery
    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: calls.append(q) or real(q))
    query = "SELECT ?x WHERE { wd:Q42 wdt:P31 ?x . ?x rdfs:label ?l } LIMIT 3  # hand-off"
    fresh.select(query)
    assert len(calls) == 1
    parsed = parse_query(query, WIKIDATA)
    assert len(calls) == 1, "the analysis parsed the query again"
    assert [(p.subject.value, p.predicate) for p in parsed.patterns][0] == (
        WD + "Q42",
        "http://www.wikidata.org/prop/direct/P31",
    )
    # a tree is taken once (translating rewrites it): a second analysis of another text parses anew
    assert parse_query(query + " ", WIKIDATA) is not None and len(calls) == 2
