"""The endpoint's check memo: a shape checked once is not parsed again, and nothing unchecked is sent."""

from __future__ import annotations

import pytest

from saga_dspy.kg import sparql_parse
from saga_dspy.kg.check_memo import CheckMemo, query_shape
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


def test_a_query_of_a_checked_shape_is_not_parsed_and_answers_for_its_own_iris(fresh, monkeypatch):
    first = fresh.select(_labels(["Q42"]))
    assert {b.value for b in first.column("e")} == {WD + "Q42"}
    _forbid_parsing(monkeypatch)
    second = fresh.select(_labels(["Q64", "Q90"]))
    assert {b.value for b in second.column("e")} == {WD + "Q64", WD + "Q90"}
    assert fresh.check_memo.hits == 1 and fresh.check_memo.misses == 1
    again = fresh.select(_labels(["Q42"]))  # the very same text: a hit as well
    assert again.rows == first.rows


def test_shapes_lift_only_iri_lists_of_values_blocks():
    shape, lists = query_shape(
        'SELECT * WHERE { VALUES ?a { <x:1>  <x:2> } VALUES ?b { "lit" } VALUES ?c { <x:3> } ?a ?p ?c }'
    )
    assert lists == ["<x:1> <x:2>", "<x:3>"]
    assert "<urn:saga:values:0>" in shape and "<urn:saga:values:1>" in shape and '"lit"' in shape
    assert query_shape("SELECT * WHERE { VALUES ?a { <x y> } }")[1] == []  # not an IRIREF: parsed with the rest


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


def test_a_query_that_names_a_placeholder_itself_is_checked_in_full(fresh):
    fresh.select(_labels(["Q42"]))
    query = "SELECT ?e ?x WHERE { VALUES ?e { <http://www.wikidata.org/entity/Q42> } BIND(<urn:saga:values:0> AS ?x) }"
    result = fresh.select(query)
    assert [(r["e"].value, r["x"].value) for r in result.rows] == [(WD + "Q42", "urn:saga:values:0")]


def test_refusals_name_the_query_as_written_and_are_not_remembered(fresh):
    bad = _labels(["Q42"]).replace("SELECT", "SELEKT")
    for _ in range(2):
        with pytest.raises(QuerySyntaxError) as err:
            fresh.query(bad)
        assert "urn:saga" not in str(err.value)
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
