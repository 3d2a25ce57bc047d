"""The grounding layer on the real bundled sample: the type state Θ, the five tools, the
conflict check, the hints of the execute tool, the renderers' budgets and the ablation switches."""

from __future__ import annotations

import threading

import pytest
from conftest import make_settings

from saga_dspy.grounding.context import QuestionContext
from saga_dspy.grounding.patterns import NEGATED, OPTIONAL, REQUIRED, UNION, parse_query
from saga_dspy.grounding.render import Block, render_blocks, render_table
from saga_dspy.grounding.state import TypeFact, TypeState
from saga_dspy.kg.flavours import WIKIDATA
from saga_dspy.kg.results import Binding, SelectResult
from saga_dspy.kg.search import SearchHit
from saga_dspy.tools import do_stop, make_tools
from saga_dspy.tools.search import _hint_pick
from saga_dspy.variants import VARIANT_FLAGS, GroundingFlags
from tests.helpers.tools import observing


@pytest.fixture(scope="session")
def settings(settings):
    """The lookup view alone: without the proposer's candidate section (`shown_candidates` 0; tests/proposer)."""
    return settings.model_copy(update={"shown_candidates": 0})


@pytest.fixture
def make(settings, endpoint, search, schema, hierarchy):
    """make(variant="full", **kw) -> (ctx, tools by name)."""

    def build(variant: str = "full", settings_=None, **kw):
        ctx = QuestionContext(settings_ or settings, endpoint, search, schema, hierarchy, variant=variant, **kw)
        return ctx, observing(make_tools(ctx))

    return build


# --- Θ: variable typing ------------------------------------------------------------------------------------

DOMAINS = {"P19": ("Q5", "Q729"), "P57": ("Q11424",), "P39": ("Q5",)}
RANGES = {"P19": ("Q2221906",), "P57": ("Q5",), "P39": ("Q4164871",)}


def typed(sparql: str, state: TypeState | None = None) -> TypeState:
    state = state or TypeState()
    state.update_from_query(
        parse_query(sparql, WIKIDATA), WIKIDATA, lambda p: DOMAINS.get(p, ()), lambda p: RANGES.get(p, ())
    )
    return state


def test_variable_types_from_explicit_type_patterns():
    st = typed("SELECT ?x ?c WHERE { ?x wdt:P19 ?c . ?x wdt:P31 wd:Q5 . ?c wdt:P31/wdt:P279* wd:Q515 }")
    assert st.variables["x"][0] == TypeFact("Q5", "pattern")  # the explicit pattern wins over P19's domain
    assert TypeFact("Q729", "domain of P19") in st.variables["x"]
    assert st.variables["c"][0] == TypeFact("Q515", "pattern (or subclass)")
    assert TypeFact("Q2221906", "range of P19") in st.variables["c"]


def test_variable_types_from_domain_and_range_both_ways():
    st = typed("""SELECT * WHERE { wd:Q1 wdt:P19 ?born . ?film wdt:P57 ?director . ?e ^wdt:P19 wd:Q90 .
                  wd:Q90 ^wdt:P19 ?p .
                  ?s p:P39 ?st . ?st ps:P39 ?office . ?a wdt:P19/wdt:P57 ?b }""")
    v = st.variables
    assert [f.cls for f in v["born"]] == ["Q2221906"] and v["born"][0].source == "range of P19"
    assert [f.cls for f in v["film"]] == ["Q11424"] and v["film"][0].source == "domain of P57"
    assert [f.cls for f in v["director"]] == ["Q5"]
    assert [f.cls for f in v["e"]] == ["Q2221906"]  # ?e ^P19 Q90 = Q90 P19 ?e: ?e is P19's object
    assert {f.cls for f in v["p"]} == {"Q5", "Q729"}  # Q90 ^P19 ?p = ?p P19 Q90: ?p is P19's subject
    assert [f.cls for f in v["s"]] == ["Q5"] and [f.cls for f in v["office"]] == ["Q4164871"]
    assert "st" not in v  # a statement node gets nothing
    assert {f.cls for f in v["a"]} == {"Q5", "Q729"} and [f.cls for f in v["b"]] == ["Q5"]  # path ends


def test_type_state_ignores_negation_and_unparsable_queries():
    st = typed("SELECT ?x WHERE { ?x wdt:P19 wd:Q90 . MINUS { ?z wdt:P31 wd:Q5 } FILTER NOT EXISTS { ?y wdt:P57 ?q } }")
    assert "z" not in st.variables and "y" not in st.variables and "x" in st.variables
    before = dict(st.variables)
    assert (
        st.update_from_query(
            parse_query("SELECT ?x WHERE { ?x wdt:P31 ", WIKIDATA), WIKIDATA, lambda p: (), lambda p: ()
        )
        == {}
    )
    assert st.variables == before
    # a variable reused with a new meaning takes the new facts
    typed("SELECT ?x WHERE { ?x wdt:P31 wd:Q6256 }", st)
    assert [f.cls for f in st.variables["x"]] == ["Q6256"]


def test_pattern_contexts_and_lenient_parsing():
    parsed = parse_query(
        """SELECT ?x WHERE { ?x wdt:P31 / wdt:P279 * wd:Q5 .
        OPTIONAL { ?x wdt:P19 ?b } { ?x wdt:P26 ?s } UNION { ?x wdt:P451 ?s }
        FILTER NOT EXISTS { ?x wdt:P570 ?d } FILTER(?b != "x" ^^ xsd:string) }""",
        WIKIDATA,
    )
    assert parsed is not None  # WDQS-style spaces before * and around ^^ are accepted
    ctx = {p.path_text: p.context for p in parsed.patterns}
    assert ctx["wdt:P31/wdt:P279*"] == REQUIRED and ctx["wdt:P19"] == OPTIONAL
    assert ctx["wdt:P26"] == UNION and ctx["wdt:P570"] == NEGATED


def test_knowledge_log_is_compact_and_bounded():
    st = TypeState()
    for i in range(10):
        st.note("fail empty", f"query number {i} " + "x" * 300)
    lines = st.render_log().splitlines()
    assert len(lines) == 6 and all(len(line) <= 140 for line in lines)
    assert lines[-1].startswith("[fail] empty: query number 9")
    st.note("ok", "3 rows")
    st.note("info", "Q5 is human")
    assert st.render_log().splitlines()[-2:] == ["[ok] 3 rows", "[info] type discovered: Q5 is human"]


# --- the execute tool ----------------------------------------------------------------------------------------


def test_execute_updates_type_state_and_range_evidence(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?film WHERE { ?film wdt:P57 wd:Q42574 }")  # films directed by James Cameron
    assert out.startswith("[OK]") and "Titanic (Q44578)" in out
    facts = ctx.state.variables["film"]
    assert facts[0].source == "observed" and any(f.source == "domain of P57" for f in facts)
    assert "Q42574" in ctx.state.entities  # the query's constant, with its types
    assert "?film:" in ctx.type_context()
    # the films themselves are remembered with their types, but the context lists them only through ?film
    films = [e for e, info in ctx.state.entities.items() if info.source == "result" and info.types]
    assert films and not any(e in ctx.type_context() for e in films) and "?film: film" in ctx.type_context()
    # P361 (part of) has no indexed range: the types of what it returned become trace-local evidence
    assert ctx.schema.get("P361").range is None
    tools["execute_sparql"]("SELECT ?o WHERE { wd:Q209857 wdt:P361 ?o }")
    assert ctx.state.observed_range("P361")
    ctx.set_question("What was the Kingdom of Lombardy-Venetia part of?")  # P361 then ranks among the full ones
    entry = tools["get_wikidata_entry"]("Q209857")
    assert "(seen in this question)" in entry
    assert "[ok]" in ctx.knowledge_log()


def test_blocked_when_empty_and_type_incompatible(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q26013 wdt:P607 ?x }")  # War of 1812 as a participant
    assert out.startswith("[BLOCKED]")
    assert "War of 1812" in out and "conflict (P607)" in out and "war" in out and "domain" in out
    assert ctx.counters["blocked"] == 1 and ctx.executions[-1].status == "blocked"
    assert "[fail] blocked:" in ctx.knowledge_log()


def test_rows_are_shown_despite_a_conflict(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wdt:P103 ?x }")  # Ukraine's "native language"
    assert out.startswith("[OK] 2 rows") and "Ukrainian (Q8798)" in out
    assert "Note: type conflict" in out and "P103" in out
    assert ctx.executions[-1].status == "ok" and ctx.executions[-1].conflicts


def test_warning_when_empty_without_conflict(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q11817 wdt:P26 wd:Q30 }")
    assert out.startswith("[WARNING]") and "[BLOCKED]" not in out
    assert ctx.counters["empty"] == 1 and ctx.executions[-1].status == "empty"


def test_declared_variable_types_never_block(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?w WHERE { ?w wdt:P31 wd:Q198 ; wdt:P607 ?c }")  # wars as participants
    assert "[BLOCKED]" not in out


def test_reversed_direction_hint(make):
    ctx, tools = make()
    out = tools["execute_sparql"]("ASK { wd:Q30 wdt:P17 wd:Q60 }")  # the USA "in the country" New York City
    assert "false" in out and "reversed `wd:Q60 wdt:P17 wd:Q30` does" in out
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q30 wdt:P131 ?x }")
    assert out.startswith("[WARNING]") and "reversed `?x wdt:P131 wd:Q30`" in out
    # a matching ASK gets no probe
    out = tools["execute_sparql"]("ASK { wd:Q60 wdt:P17 wd:Q30 }")
    assert "true" in out and "reversed" not in out
    # a blocked pattern that matches the other way round says so too (War of 1812 "participated in" Jackson)
    out = tools["execute_sparql"]("ASK { wd:Q26013 wdt:P607 wd:Q11817 }")
    assert out.startswith("[BLOCKED]") and "reversed `wd:Q11817 wdt:P607 wd:Q26013` does" in out
    # with a type pattern the failing pattern is probed alone first: it matches, so no direction claim
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q60 wdt:P17 ?x . ?x wdt:P31 wd:Q5 }")
    assert out.startswith("[WARNING]") and "reversed" not in out


def test_unknown_iri_hints(make):
    ctx, tools = make()
    tools["get_wikidata_entry"]("Q212")  # its neighbourhood shows "head of state (P35)"
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wd:head_of_state ?x }")
    assert "wd:head_of_state is not an identifier" in out
    assert "head of state (P35, seen in this question)" in out
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wdt:P35 ?x . ?x wdt:P31 wd:Q999999999 }")
    assert "Not in the knowledge graph: wd:Q999999999" in out
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wdt:P999999 ?x }")
    assert "P999999 is not a known property" in out
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wdt:Q5 ?x }")
    assert "Q5 is an item" in out


def test_errors_come_back_as_observations(make, settings, schema, hierarchy, search):
    ctx, tools = make()
    out = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q212 wdt:P35 ?x ")
    assert out.startswith("[ERROR] syntax")
    assert ctx.executions[-1].status == "error" and ctx.counters["errors"] == 1
    assert tools["execute_sparql"]("INSERT DATA { wd:Q1 wdt:P31 wd:Q5 }").startswith("[ERROR] refused")
    assert tools["execute_sparql"]("").startswith("[ERROR]")
    assert tools["get_wikidata_entry"]("not an id").startswith("[ERROR]")
    assert tools["get_wikidata_entry"](None).startswith("[ERROR]")  # type: ignore[arg-type]
    assert tools["get_property_examples"]("nope").startswith("[ERROR]")
    assert "[NOT FOUND]" in tools["get_wikidata_entry"]("Q999999999")

    class Broken:
        settings, name = None, "broken"

        def query(self, sparql, timeout=None):
            raise RuntimeError("the endpoint fell over")

    broken = QuestionContext(settings, Broken(), search, schema, hierarchy)
    btools = observing(make_tools(broken))
    assert btools["get_wikidata_entry"]("Q42").startswith("[ERROR]")
    assert btools["execute_sparql"]("SELECT * WHERE { ?s ?p ?o } LIMIT 1").startswith("[ERROR]")
    assert btools["stop"]().startswith("Stopped. No query")


def test_stop_marks_the_last_successful_query(make):
    ctx, tools = make()
    good = "SELECT ?x WHERE { wd:Q11817 wdt:P607 ?x }"
    tools["execute_sparql"](good)
    tools["execute_sparql"]("SELECT ?x WHERE { wd:Q11817 wdt:P26 wd:Q30 }")  # empty
    tools["execute_sparql"]("SELECT ?x WHERE {")  # error
    result = do_stop(ctx)
    assert result.final is not None and result.final.sparql == good and good in result.text
    assert ctx.counters["executions"] == 3


# --- lookups ------------------------------------------------------------------------------------------------------


def test_wrong_entity_lookup_shows_the_property_removed(make):
    """The paper's Garry Marshall case on the sample: "Star Wars" the franchise has a director
    statement, but P57's domain is audiovisual works; the filter removes it and says why."""
    ctx, tools = make()
    hits = tools["search_wikidata"]("Star Wars")
    assert "Q462 Star Wars" in hits and "media franchise" in hits
    out = tools["get_wikidata_entry"]("Q462")
    assert "Type filter: 1 of 15 properties removed" in out
    assert "director (P57) [domain:" in out and "probably the wrong entity" in out
    assert "\n- director (P57)" not in out
    film = tools["get_wikidata_entry"]("Q44578")  # Titanic: a film keeps its director
    assert "- director (P57)" in film and "James Cameron (Q42574)" in film


def test_lookup_format_annotations_and_qualifiers(make):
    ctx, tools = make(
        settings_=make_settings(observation_chars=12000),
        question="Who is the head of government of Ukraine, and with whom does it have diplomatic relations?",
    )
    out = tools["get_wikidata_entry"]("Q212")
    assert out.startswith("Ukraine (Q212): country in Eastern Europe")
    assert "Types: " in out and "sovereign state (Q3624078)" in out
    p6 = next(line for line in out.splitlines() if line.startswith("- head of government (P6):"))
    assert " / range: human" in p6 and " / domain: " not in p6  # the filter found its domain holds: not repeated
    assert "native language (P103) [domain: ethnic group" in out  # the removed property's domain says why
    assert "object has role (P3831)" in out  # qualifiers
    assert "Malta (Q233) (+64 more)" in out  # long value lists are truncated with counts (3 of 67 shown)
    assert ctx.counters["lookups"] == 1
    assert ctx.state.entities["Q212"].types


def test_class_level_entity_gets_superclasses_as_types(make):
    ctx, tools = make()
    out = tools["get_wikidata_entry"]("Q3624078")
    assert "Types: none declared; a class, subclass of state (Q7275), country (Q6256)" in out
    assert "Type filter skipped" not in out
    assert "a class; these are its superclasses" in ctx.knowledge_log()


def test_untyped_entity_skips_the_filter_and_uses_the_fallback_pruning(make):
    calls = []

    def prune(question, text):
        calls.append((question, text))
        return ["P641"]  # sport

    ctx, tools = make(question="Which sport does SK Brann play?", prune=prune)
    out = tools["get_wikidata_entry"]("Q205685")  # SK Brann has no P31 in the sample
    assert "Type filter skipped: the entity has no types." in out
    assert (
        len(calls) == 1
        and calls[0][0] == "Which sport does SK Brann play?"
        and "headquarters location (P159)" in calls[0][1]
    )
    assert "pruned for relevance" in out and "- sport (P641)" in out and "headquarters location" not in out
    assert ctx.counters["prune_calls"] == 1
    # a typed entity is never pruned by the LM in the full variant
    tools["get_wikidata_entry"]("Q11817")
    assert len(calls) == 1
    # nor is an entity without any property (nothing to prune)
    empty = tools["get_wikidata_entry"]("Q8037034")  # Worshipful Company of Founders: no statements kept in the sample
    assert "No outgoing properties" in empty and len(calls) == 1


def test_lookup_round_trips_are_bounded(make):
    ctx, tools = make(answer_type=("human", "Q5"))
    for qid in ("Q761383", "Q11817", "Q30"):  # 1, 27 and 46 properties
        before = ctx.counters["sparql_queries"]
        tools["get_wikidata_entry"](qid)
        # N(e) in at most 3, the incoming section in at most 3 more (counts, subject types, example labels),
        # the candidate's narrowing in at most 3 more (the entity's names, the named values, the answers' count)
        assert ctx.counters["sparql_queries"] - before <= 9
    assert len(ctx.trace) == 3 and max(t["queries"] for t in ctx.trace) <= 9  # not growing with the properties


def test_search_annotates_properties_and_entity_types(make):
    ctx, tools = make()
    out = tools["search_wikidata"]("director")
    assert "P57 director" in out and "[domain: map, video game +19 more | range: human, sibling duo]" in out
    out = tools["search_wikidata"]("Andrew Jackson")
    assert "Q11817 Andrew Jackson" in out and "[human]" in out
    assert ctx.counters["searches"] == 2


def test_property_examples(make):
    ctx, tools = make()
    out = tools["get_property_examples"]("P57")
    assert out.startswith("director (P57)") and "Titanic (Q44578) → James Cameron (Q42574)" in out
    assert "Pattern: ?subject wdt:P57 ?value" in out
    out = tools["get_property_examples"]("wdt:P1082")  # population: examples lack values → sampled uses
    assert "Uses in the knowledge graph (sampled)" in out
    assert ctx.counters["examples"] == 2


# --- budgets ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [600, 1500, 3000])
def test_observations_fit_the_budget_and_say_what_they_cut(make, budget):
    small = make_settings(observation_chars=budget)
    ctx, tools = make(settings_=small)
    out = tools["get_wikidata_entry"]("Q30")
    # the top properties in full and the rest on one line: only the small budgets cut
    assert len(out) <= budget and ("[cut to fit" in out if budget < 3000 else "Other properties: " in out)
    out = tools["execute_sparql"]("SELECT ?x ?y WHERE { wd:Q30 wdt:P530 ?x . ?x wdt:P31 ?y }")
    assert len(out) <= budget and "more rows not shown" in out
    out = tools["search_wikidata"]("Jackson")
    assert len(out) <= budget


def test_render_blocks_upgrades_the_first_blocks_and_names_the_rest():
    blocks = [Block(f"- item {i}: " + "long description " * 5, f"- item {i}", f"item {i}") for i in range(30)]
    out = render_blocks(["head"], blocks, 700)
    assert len(out.text) <= 700 and out.shown_full >= 1 and "item 29" in out.text  # all fit compact
    out = render_blocks(["head"], blocks * 10, 700)
    assert len(out.text) <= 700 and "Not shown (budget):" in out.text and "more properties omitted" in out.text


def test_render_table_clips_cells():
    rows = [{"x": Binding("literal", "y" * 500)} for _ in range(3)]
    out = render_table(SelectResult(["x"], rows), lambda iri: (None, ""), 400)
    assert len(out) <= 400 and "…" in out


# --- ablations --------------------------------------------------------------------------------------------------------


def test_variants_map_to_flags_in_one_place(make, settings):
    assert set(VARIANT_FLAGS) == {
        "full",
        "no-type-filter",
        "no-type-state",
        "no-answer-type",
        "spinach",
        "no-query-form",
        "no-form-rewrite",
        "no-auto-run",
        "no-repeat-assist",
        "no-incoming",
        "paper",
        "paper-no-type-filter",
        "paper-no-type-state",
        "paper-no-answer-type",
    }
    assert GroundingFlags.for_variant("full") == GroundingFlags()
    for name in VARIANT_FLAGS:
        ctx, _ = make(variant=name)
        # the agent-only ablations (the stop remedies) keep the full variant's grounding
        agent_only = name in ("no-query-form", "no-form-rewrite", "no-auto-run", "no-repeat-assist")
        assert ctx.variant == ("full" if agent_only else name)
        # the paper's variants bring their own filter reading; the others use the settings' mode
        assert ctx.filter_mode == ("paper" if name.startswith("paper") else settings.filter_mode)
    with pytest.raises(ValueError):
        GroundingFlags.for_variant("nope")


def test_variant_comes_from_settings(endpoint, search, schema, hierarchy):
    ctx = QuestionContext(make_settings(variant="no-type-state"), endpoint, search, schema, hierarchy)
    assert ctx.variant == "no-type-state" and not ctx.flags.type_state


def test_ablation_type_filter_changes_the_lookup_and_the_execute(make):
    _, full = make("full")
    _, off = make("no-type-filter")
    a, b = full["get_wikidata_entry"]("Q462"), off["get_wikidata_entry"]("Q462")
    assert "\n- director (P57)" not in a and "\n- director (P57)" in b and "Type filter" not in b
    q = "SELECT ?x WHERE { wd:Q26013 wdt:P607 ?x }"
    assert full["execute_sparql"](q).startswith("[BLOCKED]") and off["execute_sparql"](q).startswith("[WARNING]")


def test_ablation_type_state_changes_what_the_controller_sees(make):
    ctx_on, on = make("full")
    ctx_off, off = make("no-type-state")
    for tools in (on, off):
        tools["get_wikidata_entry"]("Q11817")
        tools["execute_sparql"]("SELECT ?x WHERE { wd:Q11817 wdt:P607 ?x }")
    assert "Q11817 Andrew Jackson: human (Q5)" in ctx_on.type_context() and "[ok]" in ctx_on.knowledge_log()
    assert ctx_off.type_context() == "" and ctx_off.knowledge_log() == ""
    assert not ctx_off.state.entities and not ctx_off.state.variables


def test_ablation_answer_type_prior_changes_the_ranking(make):
    question = "Of which country was Andrew Jackson a citizen?"
    ctx_on, on = make("full", answer_type=("country", "Q6256"), question=question)
    ctx_off, off = make("no-answer-type", answer_type=("country", "Q6256"), question=question)
    a, b = on["get_wikidata_entry"]("Q11817"), off["get_wikidata_entry"]("Q11817")
    first = lambda text: next(line for line in text.splitlines() if line.startswith("- "))  # noqa: E731
    assert "★" in a and "★" not in b
    # the question ranks the property first in both; only the prior stars it and proposes the query
    assert first(a).startswith("- country of citizenship (P27) ★") and first(b).startswith(
        "- country of citizenship (P27)"
    )
    assert "wdt:P27 ?x" in a.splitlines()[-1] and "Best matches for the question: country of citizenship (P27)" in b
    assert "Expected answer type: country (Q6256)" in ctx_on.type_context()
    assert "Expected answer type" not in ctx_off.type_context()


def test_spinach_mode_prunes_every_neighbourhood_without_schema(make):
    calls = []

    def prune(question, text):
        calls.append(text)
        return ["P57", "P86"]

    ctx, tools = make("spinach", question="Who directed Star Wars?", prune=prune)
    out = tools["get_wikidata_entry"]("Q462")
    assert calls and "- director (P57)" in out and "composer (P86)" in out and "genre (P136)" not in out
    assert " / domain:" not in out and "Type filter" not in out
    assert "[domain:" not in tools["search_wikidata"]("director")
    assert tools["execute_sparql"]("SELECT ?x WHERE { wd:Q26013 wdt:P607 ?x }").startswith("[WARNING]")
    tools["get_wikidata_entry"]("Q11817")  # typed entities are pruned too
    assert len(calls) == 2 and ctx.type_context() == ""


# --- threads ----------------------------------------------------------------------------------------------------------


def test_contexts_do_not_share_state_across_threads(make):
    results = {}

    def run(name, qid):
        ctx, tools = make()
        tools["get_wikidata_entry"](qid)
        tools["execute_sparql"](f"SELECT ?x WHERE {{ wd:{qid} wdt:P31 ?x }}")
        results[name] = ctx

    threads = [threading.Thread(target=run, args=(f"t{i}", qid)) for i, qid in enumerate(["Q11817", "Q212", "Q462"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [list(results[f"t{i}"].state.entities)[0] for i in range(3)] == ["Q11817", "Q212", "Q462"]
    assert all(len(results[f"t{i}"].executions) == 1 for i in range(3))


def test_each_observation_names_the_next_move(make):
    """A small model repeats its last action unless the observation says what comes next."""
    question = "Who is Riemannian geometry named after?"
    ctx, tools = make(answer_type=("human", "Q5"), question=question)
    found = tools["search_wikidata"]("Riemannian geometry")
    assert found.splitlines()[-1].startswith('Next: get_wikidata_entry({"qid": "Q761383"})')
    entry = tools["get_wikidata_entry"]("Q761383")
    assert (
        entry.splitlines()[-1] == "Next: execute a query with the property that leads to the answer, e.g. "
        "SELECT DISTINCT ?x WHERE { wd:Q761383 wdt:P138 ?x }"
    )
    ok = tools["execute_sparql"]("SELECT DISTINCT ?x WHERE { wd:Q761383 wdt:P138 ?x }")
    assert ok.startswith("[OK]") and "Next: stop" in ok
    _, plain = make("no-answer-type", answer_type=("human", "Q5"), question=question)  # no ★, no concrete query
    assert (
        plain["get_wikidata_entry"]("Q761383").splitlines()[-1] == "Best matches for the question: named after (P138). "
        "Next: execute a query with the one that leads to the answer."
    )
    empty = tools["execute_sparql"]("SELECT ?x WHERE { wd:Q761383 wdt:P57 ?x }")
    assert "Next: stop" not in empty


def test_search_hint_names_the_entity_the_query_names(make):
    """Measured: the agent followed the hint to "Worshipful Company of Founders" for "Tencent
    company founders", and to a Siemens company archive for "Siemens AG"."""
    _, tools = make()
    assert (
        tools["search_wikidata"]("Tencent company founders")
        .splitlines()[-1]
        .startswith('Next: get_wikidata_entry({"qid": "Q860580"})')
    )
    assert (
        tools["search_wikidata"]("Siemens AG")
        .splitlines()[-1]
        .startswith('Next: get_wikidata_entry({"qid": "Q81230"})')
    )


def test_hint_pick_prefers_exact_then_the_longest_named_label_then_rank():
    hit = lambda qid, label: SearchHit(qid, label)  # noqa: E731
    first, berlin, east = hit("Q1", "Berlin Wall"), hit("Q64", "Berlin"), hit("Q2", "East Berlin")
    assert _hint_pick("berlin", [first, berlin]) is berlin  # exact label
    assert _hint_pick("mayor of East Berlin", [first, berlin, east]) is east  # the named label with most words
    assert _hint_pick("mayors of Berlin", [first, east, berlin]) is berlin
    founders, tencent = hit("Q78219918", "Founders"), hit("Q860580", "Tencent")
    assert _hint_pick("Tencent company founders", [tencent, founders]) is tencent  # equal words: search order
    assert _hint_pick("Bärlin", [first, berlin]) is first  # nothing named: the search's own order


def test_calibrated_conflict_check_spares_an_entity_that_carries_the_property(make, settings):
    """The calibrated mode's inferred conflicts (usage statistics) yield to the entity's own statement: Google
    carries *short name* (P1813) in the sample, Apple does not; both are public companies, a class of which
    (almost) no instance carries it."""
    from saga_dspy.grounding.checks import find_conflicts
    from saga_dspy.grounding.neighbourhood import fetch_neighbourhood, type_filter

    ctx, _ = make(settings_=settings.model_copy(update={"filter_mode": "calibrated"}))

    def conflicts(eid):
        return find_conflicts(ctx, parse_query(f"SELECT ?x WHERE {{ wd:{eid} wdt:P1813 ?x }}", ctx.flavour))

    assert conflicts("Q95") == []
    apple = conflicts("Q312")
    assert len(apple) == 1 and apple[0].pid == "P1813" and "no instance" in apple[0].reason
    # the lookup's filter: every property of a neighbourhood is carried, so none goes on inferred grounds
    google = type_filter(
        fetch_neighbourhood(ctx.endpoint, ctx.flavour, "Q95", qualifiers=False), ctx.schema, ctx.hierarchy, "calibrated"
    )
    assert "P1813" in google.kept and "carries the property" in google.decisions["P1813"].reason
