"""A candidate's answers: do they (or a property's values) fit the expected answer type, and which properties do
they hold? A scalar kind ("date", "quantity") wants a datatype; a class wants values of that class or a subclass
(its direct superclass too: human ~ person)."""

from __future__ import annotations

from collections.abc import Sequence

from ..kg.flavours import DIRECT
from ..kg.flavours.datatypes import DATES as _DATES
from ..kg.flavours.datatypes import NUMBERS as _NUMBERS
from ..kg.flavours.datatypes import STRINGS as _STRINGS
from ..kg.results import Binding
from .context import QuestionContext
from .render import body_pids
from .state import AnswerType

SCALAR_ANSWERS = {
    "date": _DATES,
    "time": _DATES,
    "year": _DATES,
    "quantity": _NUMBERS,
    "number": _NUMBERS,
    "count": _NUMBERS,
    "amount": _NUMBERS,
    "string": _STRINGS,
    "text": _STRINGS,
    "name": _STRINGS,
}
_XSD = "http://www.w3.org/2001/XMLSchema#"
# the XSD datatypes of a kind's literals in SPARQL results (a string: none, or xsd:string)
_LITERALS = {
    _DATES: ("dateTime", "date", "gYear", "gYearMonth"),
    _NUMBERS: ("decimal", "integer", "double", "float", "int", "long"),
    _STRINGS: ("", "string"),
}
SAMPLED = 20  # answers whose types are read
HELD_SAMPLE = 200  # answers whose properties are read


def scalar_kind(at: AnswerType) -> tuple[str, ...] | None:
    """The datatypes of a scalar answer kind, None for an item answer."""
    return SCALAR_ANSWERS.get(at.label.lower().strip())


def fits_answer(ctx: QuestionContext, pid: str, values: Sequence = ()) -> bool:
    """Does this property's range (indexed, or seen in this question) or its values fit the expected answer type?"""
    at = ctx.state.answer_type
    if at is None:
        return False
    ps = ctx.schema.get(pid)
    scalar = scalar_kind(at)
    if scalar:
        return bool(ps and ps.datatype in scalar)
    if not at.qid:
        return False
    h = ctx.hierarchy
    ranges = list(ps.range.classes) if ps and ps.range else list(ctx.state.observed_range(pid))
    try:
        if any(_of_class(ctx, at.qid, r) for r in ranges):
            return True
        for v in values[:5]:
            for t in v.types:
                if at.qid in h.ancestors(t):
                    return True
    except Exception:  # noqa: BLE001 - ranking is best effort
        return False
    return False


def answers_fit(ctx: QuestionContext, body: str) -> bool | None:
    """Do the answers of `SELECT DISTINCT ?x WHERE { body }` fit the expected answer type, by a sample of them
    (for a scalar kind, a literal of its datatype: an unknown value is no date; for a class, an answer typed by it
    or a subclass)? None where nothing tells: no answer type, no answers, or answers with no types."""
    at = ctx.state.answer_type
    if at is None or not (scalar_kind(at) or at.qid):
        return None
    rows = ctx.rows(f"SELECT DISTINCT ?x WHERE {{ {body} }} LIMIT {SAMPLED}", optional=True)
    return values_fit(ctx, [row["x"] for row in rows if "x" in row])


def values_fit(ctx: QuestionContext, answers: Sequence[Binding]) -> bool | None:
    """Do these answer values (a sample) fit the expected answer type? None where nothing tells: no answer type,
    no answers, or answers with no types."""
    at = ctx.state.answer_type
    if at is None or not (scalar_kind(at) or at.qid) or not answers:
        return None
    answers = list(answers)[:SAMPLED]
    scalar = scalar_kind(at)
    if scalar:
        wanted = _LITERALS.get(scalar, ())
        return any(a.type == "literal" and (a.datatype or "").removeprefix(_XSD) in wanted for a in answers)
    ids = [i for a in answers if a.is_iri and (i := ctx.flavour.entity_id(a.value))]
    if not ids:
        return False
    typed = [et.types for et in ctx.entity_types(ids).values() if et is not None and et.types]
    if not typed:
        return None
    return any(_of_class(ctx, at.qid, t) for types in typed for t in types)


def _of_class(ctx: QuestionContext, qid: str, cls: str) -> bool:
    """`cls` is the answer type `qid`, a subclass of it, or its direct superclass (human ~ person); broader
    classes would make everything fit."""
    h = ctx.hierarchy
    return cls == qid or cls in h.parents(qid) or qid in h.ancestors(cls)


def held_properties(ctx: QuestionContext, body: str) -> list[str]:
    """The properties some of the answers of `SELECT DISTINCT ?x WHERE { body }` hold (a sample of them) as direct
    statements (what a `wdt:` hop can follow), besides the ones the query already uses and the type, subclass and
    example properties."""
    sample = f"{{ SELECT DISTINCT ?x WHERE {{ {body} }} LIMIT {HELD_SAMPLE} }} ?x ?p ?v"
    return direct_properties(ctx, sample, body_pids(body))


def direct_properties(ctx: QuestionContext, pattern: str, used: Sequence[str] = ()) -> list[str]:
    """The direct (`wdt:`) properties `?p` binds in `pattern`, sorted, besides `used` and the type, subclass and
    example properties (a refinement: the optional deadline)."""
    flavour = ctx.flavour
    rows = ctx.rows(f"SELECT DISTINCT ?p WHERE {{ {pattern} }}", optional=True)
    skip = {*used, flavour.type_pid, flavour.subclass_pid, flavour.example_pid}
    found = {ref.pid for row in rows if (ref := flavour.prop_ref(row["p"].value)) is not None and ref.role == DIRECT}
    return sorted(found - skip)


__all__ = ["SCALAR_ANSWERS", "answers_fit", "direct_properties", "fits_answer", "held_properties", "scalar_kind"]
