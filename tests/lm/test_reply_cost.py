"""What a local-model reply costs: a thought kept short (a token cap, an end at an invented `Action:` /
`Observation:`), prompt-lookup drafts, and the engine's token totals; on scripted llama objects (no model)."""

from __future__ import annotations

import re

import numpy as np
from helpers.char_llama import CharTokens
from helpers.dspy_cache import fresh_dspy_cache  # noqa: F401  (autouse: a memory-only DSPy cache)

from saga_dspy.config import Settings
from saga_dspy.lm import LocalLlamaLM
from saga_dspy.lm.field_limits import FieldLimit, capped, invented_at, parse_limits
from saga_dspy.lm.llama import reply_limits
from saga_dspy.lm.prompt_lookup import DraftingEval, RecentLookup

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ASKS = (
    "Respond with the corresponding output fields, starting with the field `[[ ## next_thought ## ]]`, then "
    "`[[ ## next_tool_name ## ]]`, then `[[ ## next_tool_args ## ]]`, and then ending with the marker for "
    "`[[ ## completed ## ]]`."
)
_MARKER = re.compile(r"\[\[ ## (\w+) ## \]\]\n")


class FieldLlama(CharTokens):
    """llama-cpp-python's token interface, one token a character (eos 7): the model writes `values[field]` for
    the field whose marker the reply's text last holds (after what that field already holds), then `\\n\\n[[`;
    after the last field it ends its turn. `sampled[field]` is what it wrote into each field."""

    metadata = {"tokenizer.chat_template": CHATML}
    cache = None

    def __init__(self, values: dict[str, str]):
        self.values = values
        self.sampled: dict[str, str] = {}
        self.draft_model = None

    def n_ctx(self):
        return 100_000

    def generate(self, tokens, **sampling):
        text = self.detokenize(tokens).decode()
        reply = text[text.rindex("<|im_start|>assistant\n") :]
        marks = list(_MARKER.finditer(reply))
        field = marks[-1].group(1)
        written = reply[marks[-1].end() :]
        value = self.values[field]
        assert value.startswith(written), written  # nothing the model would not have written
        self.sampled.setdefault(field, "")
        for c in value[len(written) :] + "\n\n[[":
            self.sampled[field] += c
            yield ord(c) + 1000
        yield 7


INVENTED = (
    "I need the country. Action: search_wikidata(Poland)\nObservation: Q36 country (sovereign state) — the "
    "country is Q36, so I look up Q36 next."
)


def ask(llama, **options):
    lm = LocalLlamaLM(llama=llama, cache=False, **options)
    return lm(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q\n\n" + ASKS}])[0], lm


def test_a_thought_ends_where_it_starts_an_invented_action_and_the_model_goes_on_to_the_tool():
    values = {"next_thought": INVENTED, "next_tool_name": "search_wikidata", "next_tool_args": '{"query": "Poland"}'}
    llama = FieldLlama(values)
    out, _ = ask(llama, field_limits={"next_thought": FieldLimit(cut_invented=True)})
    assert out == (
        "[[ ## next_thought ## ]]\nI need the country.\n\n[[ ## next_tool_name ## ]]\nsearch_wikidata\n\n"
        '[[ ## next_tool_args ## ]]\n{"query": "Poland"}'
    )
    # the model stopped at the colon of its "Action:": none of the made-up observation was generated
    assert llama.sampled["next_thought"] == "I need the country. Action:"
    # without the limit (the old engine) the invented observation is in the reply, whole
    whole = FieldLlama(values)
    out, _ = ask(whole)
    assert "Observation: Q36 country" in out and whole.sampled["next_thought"] == INVENTED + "\n\n[["


def test_an_invented_observation_on_its_own_line_is_cut_too():
    assert invented_at("Look it up.\nObservation: Q36") == len("Look it up.")
    assert invented_at("Observation: the search found nothing") == 0
    assert invented_at("The action: search for it. An observation about Q5 is useful.") is None


def test_a_thought_is_capped_at_its_last_sentence_end_and_the_engine_writes_the_next_marker():
    thought = "The person asked about is Q42. Its birthplace is asked, so I look up P19 and write the query."
    values = {"next_thought": thought, "next_tool_name": "get_wikidata_entry", "next_tool_args": '{"qid": "Q42"}'}
    llama = FieldLlama(values)
    out, lm = ask(llama, field_limits={"next_thought": {"tokens": 40, "cut_invented": False}})
    assert out.startswith(
        "[[ ## next_thought ## ]]\nThe person asked about is Q42.\n\n[[ ## next_tool_name ## ]]\nget_wikidata_entry"
    )
    assert len(llama.sampled["next_thought"]) == 40  # forty tokens of thought, not the hundred it would write
    assert capped("One two three") == "One two three"  # no sentence end: cut where the cap is
    assert capped("Q42. Its birthplace is asked") == "Q42. Its birthplace is asked"  # it would keep too little
    # the engine's totals: one call, the tokens the model sampled (40 + the other fields' values and "\n\n[[")
    totals = lm.llama_engine.totals
    sampled = 40 + len("get_wikidata_entry\n\n[[") + len('{"qid": "Q42"}\n\n[[')
    assert totals["calls"] == 1 and totals["sampled"] == sampled and totals["written"] > 0


def test_the_settings_put_their_limits_on_the_thought_and_none_reproduces_the_old_reply():
    old = Settings(thought_tokens=0, cut_invented_turns=False, write_choices=False, write_arguments=False)
    assert reply_limits(old) == {}
    new = Settings(thought_tokens=48, cut_invented_turns=True)
    assert reply_limits(new) == {
        "next_thought": FieldLimit(48, True),
        "next_tool_args": FieldLimit(choice=True, json_object=True),
        "*": FieldLimit(choice=True),
    }
    assert parse_limits({"x": {"tokens": 0, "cut_invented": False}}) == {}
    lm = LocalLlamaLM(llama=FieldLlama({}), cache=False, field_limits=reply_limits(new))
    # the limits travel in every request's metadata, so DSPy's cache keys a reply by them
    assert lm.kwargs["metadata"]["field_limits"] == {
        "next_thought": {"tokens": 48, "cut_invented": True, "choice": False, "json_object": False},
        "next_tool_args": {"tokens": 0, "cut_invented": False, "choice": True, "json_object": True},
        "*": {"tokens": 0, "cut_invented": False, "choice": True, "json_object": False},
    }


TOOLS = ("search_wikidata", "get_wikidata_entry", "get_property_examples", "execute_sparql", "stop")
STRUCTURE = (  # ChatAdapter's field structure in the system message: the values a Literal field may take
    "[[ ## next_thought ## ]]\n{next_thought}\n\n[[ ## next_tool_name ## ]]\n{next_tool_name}        # note: the "
    f"value you produce must exactly match (no extra characters) one of: {'; '.join(TOOLS)}\n\n"
    "[[ ## next_tool_args ## ]]\n{next_tool_args}"
)


def test_the_engine_writes_the_rest_of_the_tool_name_the_first_tokens_begin():
    from saga_dspy.lm.markers import field_choices

    system = {"role": "system", "content": STRUCTURE}
    assert field_choices([system]) == {"next_tool_name": TOOLS}
    for name, begun in (("get_wikidata_entry", "get_w"), ("search_wikidata", "se"), ("stop", "st")):
        values = {"next_thought": "Look.", "next_tool_name": name, "next_tool_args": "{}"}
        llama = FieldLlama(values)
        lm = LocalLlamaLM(llama=llama, cache=False, field_limits={"*": FieldLimit(choice=True)})
        out = lm(messages=[system, {"role": "user", "content": "Q\n\n" + ASKS}])[0]
        assert f"[[ ## next_tool_name ## ]]\n{name}\n\n[[ ## next_tool_args ## ]]\n{{}}" in out
        assert llama.sampled["next_tool_name"] == begun  # the model chose; the engine wrote the rest and the marker
        assert llama.sampled["next_tool_args"] == "{}\n\n[["  # a field listing no values is the model's own
    # without the limit the model writes the whole name and the marker's opening
    whole = FieldLlama({"next_thought": "Look.", "next_tool_name": "get_wikidata_entry", "next_tool_args": "{}"})
    LocalLlamaLM(llama=whole, cache=False)(messages=[system, {"role": "user", "content": "Q\n\n" + ASKS}])
    assert whole.sampled["next_tool_name"] == "get_wikidata_entry\n\n[["


TOOL_LIST = "".join(  # the controller's instructions list each tool with its one argument (agent.react)
    f"({i}) {name}({arg}): what it does.\n"
    for i, (name, arg) in enumerate(
        (("search_wikidata", "query"), ("get_wikidata_entry", "qid"), ("execute_sparql", "sparql"), ("stop", "")), 1
    )
)


def test_the_engine_writes_the_arguments_opening_and_ends_the_reply_where_the_object_closes():
    from saga_dspy.lm.field_limits import closed_object, json_opening
    from saga_dspy.lm.markers import tool_arguments

    system = {"role": "system", "content": TOOL_LIST + STRUCTURE}
    assert tool_arguments([system]) == {
        "search_wikidata": "query",
        "get_wikidata_entry": "qid",
        "execute_sparql": "sparql",
    }
    limits = {"next_tool_args": FieldLimit(json_object=True), "*": FieldLimit(choice=True)}
    sparql = '{"sparql": "SELECT ?x WHERE { wd:Q42 wdt:P19 ?x . }"}'
    for name, args, opening in (
        ("search_wikidata", '{"query": "Douglas Adams"}', '{"query": "'),
        ("execute_sparql", sparql, '{"sparql": "'),
        ("stop", '{"candidate": 1}', ""),  # no argument listed: the model writes the object whole
    ):
        llama = FieldLlama({"next_thought": "Look.", "next_tool_name": name, "next_tool_args": args})
        lm = LocalLlamaLM(llama=llama, cache=False, field_limits=limits)
        out = lm(messages=[system, {"role": "user", "content": "Q\n\n" + ASKS}])[0]
        assert out.endswith(f"[[ ## next_tool_args ## ]]\n{args}"), out
        # the model wrote what follows the engine's opening, up to the object's end: no closing marker's "\n\n[["
        assert llama.sampled["next_tool_args"] == args[len(opening) :]
    # a brace inside the query's string does not end the object; a closed one ends it, trailing text left out
    assert closed_object('{"sparql": "SELECT ?x WHERE { ?x }') is None
    assert closed_object('{"query": "a"}\n\n') == '{"query": "a"}' and closed_object('"a"') is None
    assert json_opening("stop", {"stop": ""}) == "" and json_opening(None, {}) == ""
    # without the limit the model writes the object and the closing marker's opening
    whole = FieldLlama(
        {"next_thought": "Look.", "next_tool_name": "search_wikidata", "next_tool_args": '{"query": "x"}'}
    )
    LocalLlamaLM(llama=whole, cache=False)(messages=[system, {"role": "user", "content": "Q\n\n" + ASKS}])
    assert whole.sampled["next_tool_args"] == '{"query": "x"}\n\n[['


def test_recent_lookup_drafts_what_followed_the_latest_occurrence_of_the_last_tokens():
    ids = [5, 1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 6, 4, 1, 2, 3]
    assert RecentLookup(3)(np.array(ids)).tolist() == [7, 8, 6]  # the latest 1 2 3 before the end, not the first
    assert RecentLookup(10)(np.array([4, 4, 1, 2, 5, 1, 2])).tolist() == [5, 1, 2]  # a 2-gram when no 3-gram
    assert RecentLookup(3)(np.array([1, 2, 3, 4])).tolist() == []


class _Batch:
    def __init__(self):
        self.calls = []

    def set_batch(self, batch, n_past, logits_all):
        self.calls.append((list(batch), n_past, logits_all))


class _Ctx:
    def __init__(self):
        self.removed, self.decoded = [], 0

    def kv_cache_seq_rm(self, seq, p0, p1):
        self.removed.append(p0)
        return True

    def decode(self, batch):
        self.decoded += 1


class _Llama:
    def __init__(self):
        self._batch, self._ctx = _Batch(), _Ctx()
        self.input_ids = np.zeros(64, dtype=np.intc)
        self.n_tokens, self.n_batch, self.draft_model, self._requires_eval = 10, 512, None, True
        self.inner = []


def test_a_drafted_step_is_evaluated_with_every_position_s_logits_and_a_prompt_is_left_to_llama_cpp():
    llama = _Llama()
    evaluate = DraftingEval(llama, llama.inner.append)
    evaluate([1, 2, 3])
    assert llama.inner == [[1, 2, 3]] and not llama._batch.calls  # no draft model: llama-cpp-python's eval
    llama.draft_model = RecentLookup(4)
    evaluate([7, 8, 9])  # a sampled token and its draft
    assert llama._batch.calls == [([7, 8, 9], 10, True)] and llama.n_tokens == 13
    assert llama.input_ids[10:13].tolist() == [7, 8, 9] and llama._ctx.removed == [10]
    evaluate(list(range(20)))  # longer than a drafted step (a prompt's tail): the last position's logits only
    assert llama.inner[-1] == list(range(20))
