"""Leading PREFIX declarations are read without the grammar, and nothing else changes: the same checks, the
same errors at the same places, one parse a query on the HTTP path, and pattern analysis still resolves them."""

from __future__ import annotations

import logging

import pytest

from saga_dspy.kg import sparql_parse
from saga_dspy.kg.endpoint import HttpEndpoint
from saga_dspy.kg.errors import QueryRefused, QuerySyntaxError
from saga_dspy.kg.prefixes import WIKIDATA_PREFIXES
from saga_dspy.kg.sparql_parse import (
    canonical_text,
    parse_sparql,
    query_algebra,
    split_declarations,
    with_declarations,
)
from tests.conftest import make_settings

WDQS_HEAD = "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in sorted(WIKIDATA_PREFIXES.items()))


def test_only_an_exact_leading_run_of_declarations_is_split():
    declared, rest = split_declarations(
        "PREFIX wd: <http://www.wikidata.org/entity/>\nprefix : <http://x/> "
        "PREFIX a.b-c: <u:v>\n# a comment\nPREFIX z: <q> SELECT * {}"
    )
    assert declared == {"wd": "http://www.wikidata.org/entity/", "": "http://x/", "a.b-c": "u:v"}
    assert rest == "\n# a comment\nPREFIX z: <q> SELECT * {}"
    for kept in (
        "BASE <http://x/> PREFIX a: <b> ASK {}",
        "PREFIX a: <x y> ASK {}",
        "PREFIX é: <x> ASK {}",
        "PREFIX a.: <x> ASK {}",
        "PREFIXa: <x> ASK {}",
    ):
        assert split_declarations(kept) == ({}, kept)


def test_a_query_after_declarations_is_checked_as_a_whole():
    parsed = parse_sparql(
        WDQS_HEAD + "PREFIX ex: <http://ex/>\nSELECT ?x WHERE { wd:Q42 ex:p ?x "
        "SERVICE wikibase:label { bd:serviceParam wikibase:language 'en' } }",
        {},
    )
    assert parsed.form == "SELECT" and parsed.leading["ex"] == "http://ex/"
    assert parsed.prefixes == {**WIKIDATA_PREFIXES, "ex": "http://ex/"}
    assert [s.iri for s in parsed.services] == ["http://wikiba.se/ontology#label"]
    assert parsed.text.startswith(WDQS_HEAD)  # what is sent is the whole text


def test_errors_name_their_place_in_the_whole_text():
    with pytest.raises(QuerySyntaxError, match="at line 3, column"):
        parse_sparql("PREFIX a: <http://a/>\nPREFIX b: <http://b/>\nSELECT ?x WHERE { ?x a:p ", {})
    with pytest.raises(QueryRefused, match="INSERT is a SPARQL update"):
        parse_sparql("PREFIX a: <http://a/>\nINSERT DATA { a:x a:p a:y }", {})


def test_pattern_analysis_resolves_the_declarations_of_a_handed_off_tree():
    text = (
        "PREFIX ex: <http://www.wikidata.org/prop/direct/>\n"
        "SELECT ?x WHERE { <http://www.wikidata.org/entity/Q42> ex:P31 ?x }"
    )
    sparql_parse.hand_off(parse_sparql(text, WIKIDATA_PREFIXES))
    algebra = query_algebra(text, {}).algebra
    assert "http://www.wikidata.org/prop/direct/P31" in str(algebra)


def test_the_http_path_parses_a_query_once_and_sends_it_with_its_declarations(oxigraph_server, monkeypatch):
    ep = HttpEndpoint(make_settings(http_retries=1), oxigraph_server)
    parsed: list[str] = []
    real = sparql_parse.parseQuery
    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: parsed.append(q) or real(q))
    query = "SELECT ?x WHERE { wd:Q42 wdt:P31 ?x }"
    sent = ep.prepare(query)
    assert (
        sent
        == "PREFIX wd: <http://www.wikidata.org/entity/>\nPREFIX wdt: <http://www.wikidata.org/prop/direct/>\n" + query
    )
    assert parsed == [query]
    assert ep.select(query).column("x")  # Oxigraph reads the declarations put before it


def test_declarations_put_before_a_parse_give_the_parse_of_the_whole_text(monkeypatch):
    parsed = parse_sparql("PREFIX ex: <http://ex/>\nSELECT ?x WHERE { ?x ex:p ?o SERVICE wikibase:label { } }", {})
    calls = []
    real = sparql_parse.parseQuery
    monkeypatch.setattr(sparql_parse, "parseQuery", lambda q: calls.append(q) or real(q))
    whole = with_declarations(parsed, {"wikibase": "http://wikiba.se/ontology#"}, {})
    assert calls == [] and whole.text == "PREFIX wikibase: <http://wikiba.se/ontology#>\n" + parsed.text
    fresh = parse_sparql(whole.text, {})
    for field in ("text", "form", "prefixes", "variables", "leading", "body"):
        assert getattr(whole, field) == getattr(fresh, field), field
    assert [(s.iri, s.source) for s in whole.services] == [(s.iri, s.source) for s in fresh.services]
    assert whole.services[0].source == "SERVICE wikibase:label { }"


def test_escapes_are_decoded_before_line_ends_are_normalised():
    """Servers decode `\\u` escapes before anything else: a decoded CR must become a line end like a raw one."""
    assert canonical_text("ASK { ?s ?p ?o # x\\u000DSERVICE <x:y> { } }") == "ASK { ?s ?p ?o # x\nSERVICE <x:y> { } }"
    assert canonical_text("ASK {\r\n?s ?p 'a\\u0041' }") == "ASK {\n?s ?p 'aA' }"
    for odd in ("\u2028", "\x0c", "\x85", "\x0b", "\\u2028", "\\uD800"):
        with pytest.raises(QueryRefused, match="U\\+"):
            canonical_text(f"ASK {{ ?s ?p ?o # {odd} }}")


def test_a_text_another_tokenizer_reads_otherwise_is_refused():
    with pytest.raises(QueryRefused, match="read this query differently"):
        parse_sparql("SELECT * WHERE { ?o ?p ?a FILTER(?o<?a&&'>'=?x) SERVICE <x:y> { } FILTER(?x!='') }", {})
    with pytest.raises(QueryRefused, match="DELETE"):
        parse_sparql("ASK { ?o ?p ?a FILTER(?o<?a&&'>'=?x) FILTER(?x != ' DELETE ') }", {})
    parse_sparql("SELECT * WHERE { ?o ?p ?a FILTER(?o<?a&&'>'=?x) }", {})  # the comparison alone is fine


def test_service_clauses_are_found_at_their_own_place():
    """rdflib searched the whole text for a clause's source: a copy in a string, or nothing where a `#` in an
    IRI stood before the clause on its line (a parse failure)."""
    text = 'SELECT * { ?s <http://a/#b> "SERVICE <x:c> { }" SERVICE <x:c> { ?s ?p ?o } SERVICE <x:d> { } }'
    parsed = parse_sparql(text, {})
    assert [(s.iri, s.source) for s in parsed.services] == [
        ("x:c", "SERVICE <x:c> { ?s ?p ?o }"),
        ("x:d", "SERVICE <x:d> { }"),
    ]
    assert [text[slice(*s.span)] for s in parsed.services] == [s.source for s in parsed.services]


def test_the_label_rewrite_leaves_copies_in_strings_and_resolves_base(endpoint):
    label = 'SERVICE wikibase:label { bd:serviceParam wikibase:language "en" }'
    sent = endpoint.prepare(f"SELECT ?x ?xLabel WHERE {{ wd:Q761383 wdt:P138 ?x . ?x ?p '{label}' . {label} }}")
    assert f"'{label}'" in sent and sent.count("SERVICE") == 1 and "OPTIONAL" in sent
    relative = (
        "BASE <http://wikiba.se/> PREFIX wikibase: <ontology#> "
        f"SELECT ?x ?xLabel WHERE {{ wd:Q761383 wdt:P138 ?x . {label} }}"
    )
    assert endpoint.select(relative).rows[0]["xLabel"].value == "Bernhard Riemann"


def test_a_literal_outside_pythons_value_space_parses_without_a_logged_traceback(caplog):
    # Wikidata writes a year-precision date with month and day 00: a valid query, no valid Python datetime
    query = 'SELECT ?x WHERE { ?x wdt:P569 "1950-00-00T00:00:00Z"^^xsd:dateTime }'
    with caplog.at_level(logging.DEBUG):
        assert parse_sparql(query, WIKIDATA_PREFIXES).form == "SELECT"
        assert query_algebra(query, WIKIDATA_PREFIXES) is not None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
