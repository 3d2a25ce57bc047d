"""Checks the execute tool runs around a query: the per-pattern domain-conflict check,
the reversed-direction probe for empty patterns, and unknown-IRI hints."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..kg.errors import SparqlError
from ..kg.flavours import CLAIM, DIRECT
from ..kg.query_text import declared_prefixes, tokenize
from ..kg.results import AskResult, SelectResult
from ..schema import EntityTypes, check_domain
from .context import QuestionContext
from .patterns import NEGATED, REQUIRED, ParsedQuery, Pattern, Term, render_pattern, render_term
from .render import class_names, clip

MAX_PROBES = 4


@dataclass
class Conflict:
    pattern: Pattern
    term: Term
    subject: str  # rendered subject (wd:Q212 / ?x)
    label: str
    types: tuple[str, ...]
    pid: str
    domain: tuple[str, ...]
    reason: str
    required: bool
    declared: bool  # the subject is a variable typed by an explicit pattern (not a known entity)

    def describe(self, ctx: QuestionContext) -> str:
        who = f"{self.subject} ({self.label})" if self.label else self.subject
        kind = "declared types" if self.declared else "types"
        return (
            f"{who} cannot be the subject of {ctx.property_label(self.pid)} ({self.pid}): its {kind} "
            f"{{{class_names(self.types, ctx.class_label, 3)}}} are not (subclasses of) the property's domain "
            f"{{{class_names(self.domain, ctx.class_label, 4)}}}"
        )

    def short(self, ctx: QuestionContext) -> str:
        return (
            f"{self.pid} on {self.subject} ({class_names(self.types, ctx.class_label, 2)}) "
            f"vs domain {class_names(self.domain, ctx.class_label, 2)}"
        )


def _domain_steps(p: Pattern, flavour) -> list[tuple[Term, str]]:
    """(term, pid) pairs where `term` sits in the subject position of property `pid` (domain applies)."""
    out: list[tuple[Term, str]] = []
    if p.alternative:
        return out
    for steps, term, is_subject in ((p.subject_steps, p.subject, True), (p.object_steps, p.obj, False)):
        if not steps or len(steps) != 1:
            continue
        step = steps[0]
        ref = flavour.prop_ref(step.iri)
        if ref is None or ref.pid == flavour.type_pid:
            continue
        as_subject = is_subject != step.inverse
        if as_subject and ref.role in (DIRECT, CLAIM):
            out.append((term, ref.pid))
    return out


def declared_types(parsed: ParsedQuery, flavour) -> dict[str, tuple[str, ...]]:
    """Variables typed by explicit exact type patterns in the required part of this query."""
    out: dict[str, list[str]] = {}
    for p in parsed.patterns:
        if p.context == REQUIRED and p.type_kind == "exact" and p.subject.kind == "var" and p.obj.kind == "iri":
            cls = flavour.entity_id(p.obj.value)
            if cls:
                out.setdefault(p.subject.value, []).append(cls)
    return {k: tuple(v) for k, v in out.items()}


def find_conflicts(ctx: QuestionContext, parsed: ParsedQuery | None) -> list[Conflict]:
    """Every (non-negated) pattern whose subject demonstrably conflicts with its property's domain."""
    if parsed is None:
        return []
    flavour = ctx.flavour
    declared = declared_types(parsed, flavour)
    todo: list[tuple[Pattern, Term, str]] = []
    constants: list[str] = []
    for p in parsed.patterns:
        if p.context == NEGATED:
            continue
        for term, pid in _domain_steps(p, flavour):
            ps = ctx.schema.get(pid)
            if ps is None or ps.domain is None:
                continue
            if term.kind == "iri":
                eid = flavour.entity_id(term.value)
                if eid is None:
                    continue
                constants.append(eid)
            elif term.kind != "var" or term.value not in declared:
                continue
            todo.append((p, term, pid))
    if not todo:
        return []
    types = ctx.entity_types(constants) if constants else {}
    out = []
    for p, term, pid in todo:
        if term.kind == "iri":
            eid = flavour.entity_id(term.value)
            et = types.get(eid) if eid else None
            is_declared = False
        else:
            eid = None
            et = EntityTypes(declared[term.value], False, "given")
            is_declared = True
        if et is None or not et.types:
            continue
        ps = ctx.schema.get(pid)
        decision = check_domain(et, ps.domain, ctx.hierarchy, ctx.filter_mode, pid=pid)
        if decision.inferred and eid and _carries(ctx, eid, pid):
            decision = check_domain(et, ps.domain, ctx.hierarchy, ctx.filter_mode, pid=pid, carried=True)
        if decision.keep:
            continue
        label = ctx.labels([eid]).get(eid, "") if eid else ""
        out.append(
            Conflict(
                p,
                term,
                render_term(term, flavour),
                label,
                tuple(et.types),
                pid,
                tuple(ps.domain.classes),
                decision.reason,
                p.context == REQUIRED,
                is_declared,
            )
        )
    return out


def _carries(ctx: QuestionContext, eid: str, pid: str) -> bool:
    """Whether the entity has a statement with this property (asked only for an inferred conflict; a failed
    probe counts as no)."""
    flavour = ctx.flavour
    try:
        result = ctx.query(f"ASK {{ <{flavour.entity_iri(eid)}> <{flavour.direct_iri(pid)}> ?o }}")
    except SparqlError:
        return False
    return isinstance(result, AskResult) and bool(result.value)


# --- reversed direction ---------------------------------------------------------------------------------------------


def _sparql_term(term: Term, bnodes: dict[str, str]) -> str | None:
    if term.kind == "iri":
        return f"<{term.value}>"
    if term.kind == "var":
        return f"?{term.value}"
    if term.kind == "bnode":
        return bnodes.setdefault(term.value, f"?_b{len(bnodes)}")
    return None


def _probe_candidates(parsed: ParsedQuery, flavour) -> list[Pattern]:
    out = []
    for p in parsed.patterns:
        if p.context != REQUIRED or p.predicate is None or p.type_kind:
            continue
        if flavour.prop_ref(p.predicate) is None:
            continue
        if p.obj.kind == "literal":
            continue
        if p.subject.kind != "iri" and p.obj.kind != "iri":
            continue  # var–var: reversing changes nothing checkable
        out.append(p)
    return out


def reversed_direction_hints(ctx: QuestionContext, parsed: ParsedQuery | None) -> list[str]:
    """For a single-pattern SELECT or the patterns of an ASK that came back empty/false: does the
    pattern match nothing while its reverse (object and subject swapped) does? Bounded probes."""
    if parsed is None:
        return []
    candidates = _probe_candidates(parsed, ctx.flavour)
    relevant = [p for p in parsed.patterns if p.context == REQUIRED and not p.type_kind]
    if parsed.form == "ASK":
        candidates = candidates[:MAX_PROBES]
    elif not (len(candidates) == 1 and len(relevant) == 1):
        return []
    whole = len([p for p in parsed.patterns if p.context == REQUIRED]) == 1  # the pattern is the whole query
    hints = []
    for p in candidates:
        bnodes: dict[str, str] = {}
        s, o = _sparql_term(p.subject, bnodes), _sparql_term(p.obj, bnodes)
        if s is None or o is None:
            continue
        pred = f"<{p.predicate}>"
        try:
            if not whole:  # the query as a whole failed; does this pattern alone match?
                alone = ctx.query(f"ASK {{ {s} {pred} {o} }}")
                if isinstance(alone, AskResult) and alone.value:
                    continue
            rev = ctx.query(f"ASK {{ {o} {pred} {s} }}")
        except SparqlError:
            continue
        text = render_pattern(p, ctx.flavour)
        reversed_text = f"{render_term(p.obj, ctx.flavour)} {p.path_text} {render_term(p.subject, ctx.flavour)}"
        if isinstance(rev, AskResult) and rev.value:
            hints.append(
                f"Direction: `{text}` matches nothing, but the reversed `{reversed_text}` does: "
                f"subject and object may be swapped."
            )
        elif not whole:
            hints.append(f"`{text}` matches nothing on its own (nor reversed).")
    return hints


# --- unknown IRIs -----------------------------------------------------------------------------------------------------

_SPLIT = re.compile(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])")


def _words(local: str) -> str:
    return " ".join(w for w in _SPLIT.split(local) if w).lower()


def _seen_matches(ctx: QuestionContext, words: str, want: str | None) -> list[str]:
    out = []
    wset = set(words.split())
    for eid, label in reversed(list(ctx.seen.items())):
        if want == "property" and not eid.startswith("P") and ctx.flavour.ids_say_kind:
            continue
        lab = label.lower()
        if lab == words or (wset and wset <= set(lab.split())) or (len(words) > 3 and words in lab):
            out.append(eid)
        if len(out) >= 3:
            break
    return out


def unknown_iri_hints(
    ctx: QuestionContext, sparql: str, parsed: ParsedQuery | None, *, check_existence: bool
) -> list[str]:
    """Name identifiers that are not well-formed ids, or (when `check_existence`) that the KG does not know,
    and suggest ids from this question's context or the search index."""
    flavour = ctx.flavour
    prefixes = flavour.id_prefixes()
    try:
        tokens = tokenize(sparql)
    except Exception:  # noqa: BLE001 - hints are best effort
        return []
    declared = declared_prefixes(tokens)
    malformed: dict[str, tuple[str, str]] = {}  # token → (kind, local)
    entities: dict[str, str] = {}  # id → token
    properties: dict[str, str] = {}
    for tok in tokens:
        if tok.kind != "pname":
            continue
        prefix, _, local = tok.text.partition(":")
        if prefix not in prefixes or not local:
            continue
        if prefix in declared and declared[prefix] != flavour.prefixes.get(prefix):
            continue
        kind, regex = prefixes[prefix]
        if not regex.match(local):
            malformed[tok.text] = (kind, local)
        elif kind == "entity" and local.startswith("Q"):
            entities[local] = tok.text
        elif kind == "property" or local.startswith("P"):
            properties[local] = tok.text
    if flavour.ids_say_kind:  # full IRIs written out
        for tok in tokens:
            if tok.kind != "iri":
                continue
            iri = tok.text[1:-1]
            if not iri.startswith(flavour.entity_ns):
                continue
            local = iri[len(flavour.entity_ns) :]
            if "/" in local or not local:
                continue
            if not re.match(r"^[QP][1-9]\d*$", local):
                malformed.setdefault(tok.text, ("entity", local))
            elif local.startswith("Q"):
                entities.setdefault(local, tok.text)
    hints: list[str] = []
    for token, (kind, local) in list(malformed.items())[:4]:
        hints.append(_suggest(ctx, token, kind, local))
    unknown_props = [pid for pid in properties if ctx.schema.get(pid) is None][:4]
    for pid in unknown_props:
        hints.append(f"{properties[pid]}: {pid} is not a known property.")
    if check_existence and entities:
        ids = list(entities)[:20]
        try:
            result = ctx.query(flavour.exists_query(ids))
            present = set()
            if isinstance(result, SelectResult):
                present = {flavour.entity_id(row["e"].value) for row in result.rows if "e" in row}
            missing = [i for i in ids if i not in present]
        except SparqlError:
            missing = []
        if missing:
            seen_ids = [(e, label) for e, label in reversed(list(ctx.seen.items())) if flavour.entity_re.match(e)]
            recent = [f"{e} {clip(label, 30)}" for e, label in seen_ids[:4]]
            seen = f" Entities seen in this question: {', '.join(recent)}." if recent else ""
            hints.append(f"Not in the knowledge graph: {', '.join(entities[i] for i in missing[:6])}.{seen}")
    return hints


def _suggest(ctx: QuestionContext, token: str, kind: str, local: str) -> str:
    flavour = ctx.flavour
    if flavour.ids_say_kind and re.fullmatch(r"[QqPp]\d+", local):
        other = "an item" if local.upper().startswith("Q") else "a property"
        label = ctx.seen.get(local.upper(), "")
        named = f" ({label})" if label else ""
        return f"{token}: {local.upper()} is {other}{named}, not the kind this prefix expects."
    words = _words(local)
    want = "property" if kind == "property" else None
    ids = _seen_matches(ctx, words, want)
    picks = [f"{ctx.seen.get(i, i)} ({i}, seen in this question)" for i in ids]
    if ctx.search is not None and words:
        try:
            for hit in ctx.search.search(words, limit=3, kind="property" if want else None):
                if hit.id not in ids:
                    picks.append(f"{clip(hit.label, 40)} ({hit.id})")
                    ctx.remember(hit.id, hit.label)
        except Exception:  # noqa: BLE001 - a failing search must not break the observation
            pass
    text = f"{token} is not an identifier (write ids, e.g. {flavour.token_examples})."
    if picks:
        text += " Did you mean: " + "; ".join(picks[:4]) + "?"
    return text


__all__ = ["Conflict", "find_conflicts", "reversed_direction_hints", "unknown_iri_hints", "declared_types"]
