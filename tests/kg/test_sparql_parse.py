"""Leading PREFIX declarations are read without the grammar, and nothing else changes: the same checks, the
same errors at the same places, one parse a query on the HTTP path, and pattern analysis still resolves them."""

from __future__ import annotations

import pytest

from saga_dspy.kg import sparql_parse
from saga_dspy.kg.endpoint import HttpEndpoint
from saga_dspy.kg.errors import QueryRefused, QuerySyntaxError
from saga_dspy.kg.prefixes import WIKIDATA_PREFIXES
from saga_dspy.kg.sparql_parse import parse_sparql, query_algebra, split_declarations
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


def test_declarations_not_the_endpoints_own_are_parsed_again(oxigraph_server):
    ep = HttpEndpoint(make_settings(http_retries=1), oxigraph_server)
    assert ep._declarations_only("PREFIX wd: <http://www.wikidata.org/entity/>\n")
    assert not ep._declarations_only("PREFIX wd: <http://evil/>\n")
    assert not ep._declarations_only("PREFIX wd: <http://www.wikidata.org/entity/>\n# ;\n")
