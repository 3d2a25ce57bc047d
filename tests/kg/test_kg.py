"""The endpoint client over the real bundled store: embedded and through a real Oxigraph HTTP server,
with the same assertions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from conftest import make_settings

from saga_dspy.kg.endpoint import EmbeddedEndpoint, HttpEndpoint, open_endpoint
from saga_dspy.kg.errors import EndpointUnavailable, QueryRefused, QuerySyntaxError, QueryTimeout
from saga_dspy.kg.guard import check_read_only
from saga_dspy.kg.label_service import rewrite_label_service
from saga_dspy.kg.prefixes import with_prefixes
from saga_dspy.kg.results import AskResult, Binding, SelectResult, parse_sparql_json

WD = "http://www.wikidata.org/entity/"
CROSS_JOIN = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"


@pytest.fixture(params=["embedded", "http"], scope="module")
def ep(request, endpoint, oxigraph_server):
    if request.param == "embedded":
        return endpoint
    return HttpEndpoint(make_settings(endpoint=oxigraph_server, http_retries=1), oxigraph_server)


def test_qald10_gold_query_finds_riemann(ep):
    result = ep.query("SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }")
    assert isinstance(result, SelectResult)
    assert result.variables == ["x"]
    assert [b.value for b in result.column("x")] == [WD + "Q42299"]


def test_p2302_constraint_gives_p19_subject_types(ep):
    result = ep.query(
        "SELECT DISTINCT ?class WHERE { wd:P19 p:P2302 ?st . ?st ps:P2302 wd:Q21503250 ; pq:P2308 ?class ;"
        " pq:P2309 wd:Q21503252 }"
    )
    classes = {b.value.removeprefix(WD) for b in result.column("class")}
    assert {"Q215627", "Q95074", "Q729"} <= classes  # person, fictional character, animal


def test_ask_and_typed_literals(ep):
    assert ep.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }") == AskResult(True)
    assert ep.query("ASK { wd:Q42299 wdt:P138 wd:Q761383 }") == AskResult(False)
    born = ep.select("SELECT ?d WHERE { wd:Q1001 wdt:P569 ?d }").column("d")
    assert born and born[0].datatype == "http://www.w3.org/2001/XMLSchema#dateTime"
    assert born[0].value.startswith("1869-10-02")


def test_statement_nodes_and_qualifiers(ep):
    result = ep.select("SELECT ?v ?q WHERE { wd:Q100 p:P31 ?s . ?s ps:P31 ?v ; pq:P642 ?q }")
    assert (result.rows[0]["v"].value, result.rows[0]["q"].value) == (WD + "Q21518270", WD + "Q771")


def test_property_entities_use_wikibase_vocabulary(ep):
    result = ep.select("SELECT ?t ?d WHERE { wd:P19 wikibase:propertyType ?t ; wikibase:directClaim ?d }")
    assert result.rows[0]["t"].value == "http://wikiba.se/ontology#WikibaseItem"
    assert result.rows[0]["d"].value == "http://www.wikidata.org/prop/direct/P19"


def test_label_service_is_emulated(ep):
    result = ep.select(
        "SELECT ?x ?xLabel WHERE { wd:Q761383 wdt:P138 ?x . "
        'SERVICE wikibase:label { bd:serviceParam wikibase:language "en". } }'
    )
    assert result.rows[0]["xLabel"] == Binding("literal", "Bernhard Riemann", None, "en")


def test_non_ascii_labels_round_trip(ep):
    result = ep.select('SELECT ?e WHERE { ?e rdfs:label "1. FC Köln"@en }')
    assert WD + "Q104770" in {b.value for b in result.column("e")}
    label = ep.select("SELECT ?l WHERE { wd:Q104770 rdfs:label ?l }").rows[0]["l"]
    assert label.value == "1. FC Köln" and label.lang == "en"


def test_malformed_sparql_carries_the_parser_message(ep):
    with pytest.raises(QuerySyntaxError) as info:
        ep.query("SELECT ?x WHERE { wd:Q1 wdt:P31 }")
    assert "1:" in str(info.value) or "expected" in str(info.value).lower()
    assert len(str(info.value)) <= 400


@pytest.mark.parametrize(
    "update",
    [
        "INSERT DATA { wd:Q1 wdt:P31 wd:Q5 }",
        "DELETE DATA { wd:Q761383 wdt:P138 wd:Q42299 }",
        "DELETE WHERE { ?s ?p ?o }",
        "PREFIX ex: <http://example.org/> WITH <http://g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
        "LOAD <http://example.org/data.nt>",
        "CLEAR ALL",
        "DROP GRAPH <http://g>",
        "CREATE GRAPH <http://g>",
        "ADD DEFAULT TO <http://g>",
        "MOVE DEFAULT TO <http://g>",
        "COPY DEFAULT TO <http://g>",
    ],
)
def test_updates_are_refused_and_the_store_is_unchanged(ep, update):
    with pytest.raises(QueryRefused):
        ep.query(update)
    assert ep.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }").value is True
    assert ep.query("ASK { wd:Q1 wdt:P31 wd:Q5 }").value is False


def test_federated_service_is_refused(ep):
    with pytest.raises(QueryRefused, match="example.org"):
        ep.query("SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }")
    with pytest.raises(QueryRefused):
        ep.query("SELECT * WHERE { SERVICE ?where { ?s ?p ?o } }")


def test_huge_result_is_capped_and_marked(endpoint, oxigraph_server):
    for ep in (
        EmbeddedEndpoint(make_settings(row_cap=50, embedded_workers=1), endpoint.store_path),
        HttpEndpoint(make_settings(row_cap=50), oxigraph_server),
    ):
        result = ep.query("SELECT ?s WHERE { ?s wdt:P31 ?o } LIMIT 500")
        assert len(result.rows) == 50 and result.capped
        small = ep.query("SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }")
        assert not small.capped
        ep.close()


def test_embedded_deadline_kills_a_runaway_query(endpoint):
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        endpoint.query(CROSS_JOIN, timeout=1.5)
    assert time.monotonic() - started < 1.5 + 1.0
    # the endpoint keeps working after the kill
    assert endpoint.query("ASK { wd:Q761383 wdt:P138 wd:Q42299 }").value is True


def test_oxigraph_server_timeout_is_a_timeout_not_a_parse_error(oxigraph_server):
    # the server fixture runs with --timeout-s 3: it answers 200 and cuts the JSON stream off
    ep = HttpEndpoint(make_settings(http_retries=1), oxigraph_server)
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        ep.query(CROSS_JOIN, timeout=10)
    assert time.monotonic() - started < 10 + 2


def test_dead_endpoint_is_unavailable_quickly():
    from conftest import free_port

    ep = HttpEndpoint(make_settings(http_retries=2), f"http://127.0.0.1:{free_port()}/sparql")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailable):
        ep.query("ASK { ?s ?p ?o }", timeout=2)
    assert time.monotonic() - started < 10


class _Flaky(BaseHTTPRequestHandler):
    """A loopback SPARQL server: 429 with Retry-After first, then 503, then an answer."""

    calls: list[str] = []

    def do_POST(self):
        type(self).calls.append(self.headers.get("User-Agent", ""))
        n = len(type(self).calls)
        if n == 1:
            self.send_response(429)
            self.send_header("Retry-After", "0")
            self.end_headers()
        elif n == 2:
            self.send_response(503)
            self.end_headers()
        else:
            body = json.dumps({"head": {}, "boolean": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_retries_429_and_5xx_with_user_agent(monkeypatch):
    monkeypatch.setattr("saga_dspy.kg.http_endpoint.time.sleep", lambda s: None)
    _Flaky.calls = []
    server = HTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ep = HttpEndpoint(make_settings(http_retries=3), f"http://127.0.0.1:{server.server_port}/sparql")
        assert ep.query("ASK { ?s ?p ?o }").value is True
        assert len(_Flaky.calls) == 3
        assert all(ua.startswith("saga-dspy") for ua in _Flaky.calls)
    finally:
        server.shutdown()


def test_syntax_errors_are_not_retried(oxigraph_server, monkeypatch):
    calls = []
    ep = HttpEndpoint(make_settings(http_retries=3), oxigraph_server)
    original = ep._once
    monkeypatch.setattr(ep, "_once", lambda *a: calls.append(1) or original(*a))
    with pytest.raises(QuerySyntaxError):
        ep.query("SELECT WHERE {")
    assert calls == []  # refused by our parser: nothing was sent
    with pytest.raises(QuerySyntaxError, match="unbound"):  # grammatical, but the server's checks reject it
        ep.query("SELECT ?x WHERE { ?x ?p ?o } GROUP BY ?p")
    assert len(calls) == 1


def test_result_cache_stores_successes_only(tmp_path, endpoint):
    ep = EmbeddedEndpoint(make_settings(cache_dir=tmp_path, result_cache=True, embedded_workers=1), endpoint.store_path)
    try:
        ep.query("SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }")
        assert len(ep.cache) == 1
        with pytest.raises(QuerySyntaxError):
            ep.query("SELECT ?x WHERE {")
        with pytest.raises(QueryTimeout):
            ep.query(CROSS_JOIN, timeout=1)
        assert len(ep.cache) == 1
        again = ep.query("SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }")
        assert again.column("x")[0].value == WD + "Q42299"
    finally:
        ep.close()


def test_guard_ignores_keywords_inside_strings_and_iris():
    check_read_only('SELECT ?x WHERE { ?x rdfs:label "DELETE me INSERT" . ?x ?p <http://ex.org/DROP> } # CLEAR')
    check_read_only("SELECT ?x WHERE { SERVICE wikibase:label { bd:serviceParam wikibase:language 'en' } }")
    with pytest.raises(QueryRefused):
        check_read_only("SELECT ?x WHERE { ?x ?p ?o } ; INSERT DATA { <a:b> <a:c> <a:d> }")


def test_prefixes_added_only_when_missing():
    assert with_prefixes("SELECT * WHERE { ?s wdt:P31 wd:Q5 }").startswith("PREFIX wd: <")
    declared = "PREFIX wd: <http://example.org/> SELECT * WHERE { ?s ?p wd:Q5 }"
    assert with_prefixes(declared) == declared


def test_label_service_rewrite_keeps_explicit_label_patterns():
    query = (
        "SELECT ?x ?name WHERE { ?x wdt:P31 wd:Q5 "
        "SERVICE wikibase:label { bd:serviceParam wikibase:language 'en'. ?x rdfs:label ?name } }"
    )
    rewritten = rewrite_label_service(query)
    assert "SERVICE" not in rewritten and "?x rdfs:label ?name" in rewritten


def test_parse_sparql_json_forms():
    assert parse_sparql_json(True) == AskResult(True)
    assert parse_sparql_json({"boolean": False}) == AskResult(False)
    select = parse_sparql_json([{"x": {"type": "uri", "value": WD + "Q1"}}])
    assert select.variables == ["x"] and select.rows[0]["x"].is_iri
    with pytest.raises(ValueError):
        parse_sparql_json({"head": {}})
    with pytest.raises(ValueError):
        parse_sparql_json([{"x": {"type": "weird", "value": "1"}}])


def test_open_endpoint_rejects_nonsense():
    with pytest.raises(ValueError):
        open_endpoint(make_settings(endpoint="ftp://nowhere"))


def test_search_ranks_exact_label_first(search):
    hits = search.search("Riemannian geometry", limit=5)
    assert hits[0].id == "Q761383"
    prop = search.search("place of birth", limit=3, kind="property")
    assert prop[0].id == "P19" and prop[0].datatype == "WikibaseItem"
    assert search.search("Q42299")[0].label == "Bernhard Riemann"
    assert search.search("   ") == []


def test_search_ranks_entities_the_query_names_above_text_relevance(search):
    """BM25 alone put "Worshipful Company of Founders" first and Tencent 14th for this query."""
    assert "Q860580" in [h.id for h in search.search("Tencent company founders", limit=8, kind="item")][:2]
    siemens = [h.id for h in search.search("Siemens AG", limit=8, kind="item")]
    assert "Q81230" in siemens and "Q27490304" in siemens  # the archive whose label holds the words stays
    mayor = [h.id for h in search.search("Who is the mayor of Paris", limit=8, kind="item")]
    assert mayor[:2] == ["Q12371988", "Q90"]  # the longer named phrase first; "the" names nothing
    star_wars = [h.id for h in search.search("Star Wars Episode IV", limit=8, kind="item")]
    assert star_wars[0] == "Q17738" and "Q462" in star_wars  # the film the words name; the franchise stays


@pytest.mark.parametrize(
    ("text", "qid", "why"),
    [
        ("obama", "Q76", "a surname: the far better-linked person, not the town whose whole label it is"),
        ("Einstein", "Q937", "the physicist, not the family-name item that is the exact label"),
        ("city", "Q515", "of two items labelled 'city', the one thousands of statements point to"),
        ("Nashville", "Q23197", "the city many statements point to, not the film with as many statements"),
        ("George W Bush", "Q207", "punctuation and case do not break a whole-name match"),
        ("California", "Q99", "an exact label beats an alias of another entity ('California' for Los Angeles)"),
        ("Guy Ritchie", "Q192990", "a name that leaves query words unmatched ('guy' for male) ranks below"),
    ],
)
def test_search_ranks_by_name_coverage_and_the_graphs_priors(search, text, qid, why):
    assert search.search(text, limit=8, kind="item")[0].id == qid, why


def test_cli_query_and_search_json(settings, store_path):
    env_args = ["--cache-dir", str(settings.cache_dir)]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "saga_dspy.kg",
            "query",
            "--json",
            *env_args,
            "SELECT ?x WHERE { wd:Q761383 wdt:P138 ?x }",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["results"]["bindings"][0]["x"]["value"] == WD + "Q42299"
    out = subprocess.run(
        [sys.executable, "-m", "saga_dspy.kg", "search", "--json", "--limit", "3", *env_args, "Riemannian geometry"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(out.stdout)[0]["id"] == "Q761383"
    out = subprocess.run(
        [sys.executable, "-m", "saga_dspy.kg", "query", "--json", *env_args, "CLEAR ALL"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and json.loads(out.stdout)["error"]["kind"] == "refused"


def test_dotted_freebase_names_become_full_iris():
    from saga_dspy.kg.prefixes import FREEBASE_PREFIXES, expand_dotted_names

    query = "SELECT ?x WHERE { ns:m.0abc ns:people.person.place_of_birth ?x . ?x ns:type.object.name 'a.b:c' }"
    out = expand_dotted_names(query, FREEBASE_PREFIXES)
    assert "<http://rdf.freebase.com/ns/people.person.place_of_birth>" in out
    assert "<http://rdf.freebase.com/ns/m.0abc>" in out and "'a.b:c'" in out
    assert expand_dotted_names("SELECT * WHERE { ?s wdt:P31 ?o }", FREEBASE_PREFIXES).endswith("?o }")
