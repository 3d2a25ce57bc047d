"""The query form a question needs (ASK / COUNT / SELECT), the form a SPARQL query has, and the rewrite of a final
query's head to the needed form."""

from __future__ import annotations

import re
from typing import Any, Literal

from saga_dspy.agent.answer_type import AnswerTypeInfo
from saga_dspy.grounding.lexicon import Lexicon, question_keys
from saga_dspy.kg.query_text import matching_brace, query_form, tokenize
from saga_dspy.kg.results import SelectResult

QueryForm = Literal["ASK", "COUNT", "SELECT", "ANY"]
_HOW_MANY = re.compile(r"\bhow\s+many\b", re.IGNORECASE)  # grammar: the English counting question
# grammar: a question opening with an auxiliary verb is a yes/no question
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|does|do|did|has|have|had|can|could|will|would|should|shall|may|might)\b",
    re.IGNORECASE,
)


def is_yes_no_question(question: str) -> bool:
    return bool(_YES_NO.match(question or ""))


def is_how_many_question(question: str, lexicon: Lexicon | None = None) -> bool:
    """A counting question: "how many", or a wording whose train questions' gold queries were mostly COUNTs
    (the lexicon: "how often did" -> COUNT where the train data says so)."""
    if _HOW_MANY.search(question or ""):
        return True
    return lexicon is not None and lexicon.vote(question_keys(question or ""), "form") == "COUNT"


def decide_query_form(answer_type: AnswerTypeInfo | None, question: str, lexicon: Lexicon | None = None) -> QueryForm:
    """ASK for a boolean answer, COUNT for a counting quantity question (`is_how_many_question`), SELECT otherwise.

    `None` (no answer-type step: the `no-answer-type` ablation removes the prior only) decides
    from the question's wording alone: ASK for a yes/no question, COUNT for a counting one, else SELECT."""
    if answer_type is None:
        if is_yes_no_question(question):
            return "ASK"
        return "COUNT" if is_how_many_question(question, lexicon) else "SELECT"
    if answer_type.is_boolean:
        return "ASK"
    if answer_type.label == "quantity" and is_how_many_question(question, lexicon):
        return "COUNT"
    if not answer_type.label and is_yes_no_question(question):
        return "ASK"
    return "SELECT"


QUERY_FORMS = ("SELECT", "COUNT", "ASK", "CONSTRUCT", "DESCRIBE")


def form_of(sparql: str | None) -> str | None:
    """ASK, COUNT (a SELECT projecting COUNT), SELECT, another keyword, or None."""
    if not sparql or not str(sparql).strip():
        return None
    tokens = tokenize(str(sparql))
    form = query_form(tokens)
    if form == "SELECT":
        head = _select_head(tokens)
        if any(t.upper == "COUNT" for t in head):
            return "COUNT"
    return form


def _select_head(tokens) -> list:
    """Tokens between SELECT and the WHERE keyword / first `{` of the main query."""
    start = next((i for i, t in enumerate(tokens) if t.kind == "name" and t.upper == "SELECT"), None)
    if start is None:
        return []
    out = []
    for tok in tokens[start + 1 :]:
        if (tok.kind == "name" and tok.upper in ("WHERE", "FROM")) or tok.text == "{":
            break
        out.append(tok)
    return out


def _main_group(sparql: str) -> tuple[int, int, int] | None:
    """(start of the form keyword, index of the main `{`, index of its `}`) as character offsets."""
    tokens = tokenize(sparql)
    form_index = None
    for i, tok in enumerate(tokens):
        if tok.kind == "name" and tok.upper in ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE"):
            form_index = i
            break
    if form_index is None:
        return None
    open_index = next((i for i in range(form_index, len(tokens)) if tokens[i].text == "{"), None)
    if open_index is None:
        return None
    close_index = matching_brace(tokens, open_index)
    if close_index < 0:
        return None
    return tokens[form_index].start, tokens[open_index].start, tokens[close_index].end


def _where_variables(body: str) -> list[str]:
    seen: list[str] = []
    for tok in tokenize(body):
        if tok.kind == "var":
            name = tok.text[1:]
            if name not in seen and not re.search(r"(Label|Description|AltLabel)$", name):
                seen.append(name)
    return seen


def rewrite_head(sparql: str, target: str) -> str | None:
    """The query with its head rewritten to `target` form (ASK / COUNT / SELECT) where that is safe, else None."""
    spans = _main_group(sparql)
    if spans is None:
        return None
    head_start, open_at, close_at = spans
    prologue, head, body, tail = (
        sparql[:head_start],
        sparql[head_start:open_at],
        sparql[open_at:close_at],
        sparql[close_at:],
    )
    head_tokens = tokenize(head)
    tail_words = {t.upper for t in tokenize(tail) if t.kind == "name"}
    if {"GROUP", "HAVING"} & tail_words:
        return None
    inner_select = any(t.kind == "name" and t.upper == "SELECT" for t in tokenize(body))
    current = form_of(sparql)
    if target == "ASK" and current in ("SELECT", "COUNT"):
        if current == "COUNT" or inner_select:
            return None
        return f"{prologue}ASK WHERE {body}"
    if target == "COUNT" and current == "SELECT":
        if inner_select or any(t.text == "(" for t in head_tokens):
            return None
        projected = [t.text[1:] for t in head_tokens if t.kind == "var"]
        projected = [v for v in projected if not re.search(r"(Label|Description|AltLabel)$", v)]
        if not projected and any(t.text == "*" for t in head_tokens):
            projected = _where_variables(body)
        if len(projected) != 1:
            return None
        return f"{prologue}SELECT (COUNT(DISTINCT ?{projected[0]}) AS ?count) WHERE {body}"
    if target == "SELECT" and current == "ASK":
        variables = _where_variables(body)
        if len(variables) != 1:
            return None
        return f"{prologue}SELECT DISTINCT ?{variables[0]} WHERE {body}"
    return None


def to_form(required: str, sparql: str, result: Any = None) -> str | None:
    """`sparql` rewritten to the `required` form where it has another one (`form_problem`) and the head rewrite
    exists; None otherwise. What the program does to a final query at the end (`form_rewrite`)."""
    return rewrite_head(sparql, required) if form_problem(required, sparql, result) else None


def keeps_the_question(sparql: str, target: str) -> bool:
    """Whether the head rewrite to `target` answers what the query's own body asks: a count of the one variable
    a SELECT projects does; an ASK of a SELECT's pattern does not (it drops the value the question asks about),
    nor does a SELECT of an ASK's. The program need not send a final query back for a rewrite that keeps it."""
    return target == "COUNT" and rewrite_head(sparql, target) is not None


def _is_numeric_literal(binding) -> bool:
    if binding.type != "literal":
        return False
    if (
        binding.datatype
        and binding.datatype.startswith("http://www.w3.org/2001/XMLSchema#")
        and any(
            binding.datatype.endswith(t)
            for t in ("integer", "decimal", "double", "float", "int", "long", "nonNegativeInteger")
        )
    ):
        return True
    return bool(re.fullmatch(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?", binding.value.strip()))


def form_problem(required: str, sparql: str, result: Any = None) -> str | None:
    """Why `sparql` does not have the required form (None when it does)."""
    actual = form_of(sparql)
    if required == "ANY" or actual is None:
        return None
    if required == "ASK" and actual != "ASK":
        return (
            "This is a yes/no question, so the final query must be an ASK query (`ASK WHERE { ... }`, "
            f"answering true or false), but it is a {actual} query. Write the ASK query, execute it, then stop."
        )
    if required in ("SELECT", "COUNT") and actual == "ASK":
        what = "how many there are" if required == "COUNT" else "the answer entities or values"
        return (
            f"The question asks for {what}, not yes/no, so the final query must be a SELECT query, "
            "but it is an ASK query. Write the SELECT query, execute it, then stop."
        )
    if required == "COUNT" and actual == "SELECT" and isinstance(result, SelectResult) and result.rows:
        values = result.values()
        # numbers the graph stores (an employee count, one per date) are the answer; counting them is not
        if not (values and all(_is_numeric_literal(b) for b in values)):
            return (
                "The question asks how many, so the final query should count the answers: "
                "`SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE { ... }` (or select the number the graph "
                "stores). Write it, execute it, then stop."
            )
    return None
