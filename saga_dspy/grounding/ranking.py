"""Question-aware property ranking for the lookup.

The question's content words are matched against each property's label, aliases and description after a
light stemming ("birthdays" -> birthday, "crosses" -> cross, "actors" -> actor) and inflection ("played" ->
play, "higher" -> high, `grounding.words`); a shared word prefix of five letters counts as a weaker match
("birthday" meets "birth"). Beside the labels, the mined lexicon (`grounding.lexicon`) says which properties
the train questions that use a word asked for ("born" -> place / date of birth, "wife" -> spouse): the
share of those questions is the word's evidence for a property where its label says less, and a word said by
`lexicon.STRONG` train questions none of which asked for a property is evidence against it, whatever its label says
("located" never meant "located in time zone"); the question's frame
("where is _ from": its function words) is one more piece, by the share of the train questions with that frame
that asked for the property (`Lexicon.frame_prior`). A question word is one piece of evidence: it scores by its
best form or its lexicon share, not once per form; a yes/no question's words may also meet the entity's values
("a democrat"). The score orders the properties; the
range's fit to the expected answer type only breaks ties, so it never puts an irrelevant property first.
Identifier, media and Commons properties go last unless the question names them. No model, no network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from saga_dspy.grounding.lexicon import Lexicon
from saga_dspy.grounding.words import STOPWORDS, base_forms, question_frame, stem
from saga_dspy.grounding.words import WORD as _WORD
from saga_dspy.kg.flavours.datatypes import NICHE_DATATYPES
from saga_dspy.kg.flavours.wikidata_ids import TYPE
from saga_dspy.schema.index import id_order  # one Wikidata id order (numeric, other ids after)

# grammar: the words of Wikidata's identifier, media and Commons property labels (a label vocabulary)
NICHE_WORDS = frozenset(
    {
        "commons",
        "id",
        "identifier",
        "image",
        "logo",
        "icon",
        "video",
        "audio",
        "url",
        "website",
        "signature",
        "category",
        "username",
        "handle",
        "hashtag",
        "map",
        "locator",
    }
)
PREFIX = 5
LABEL, ALIAS, DESCRIPTION = 1.0, 0.9, 0.25
OWN_BESIDE_FORM = 0.5
VALUE = (
    0.6  # a question word naming one of the entity's values for the property ("a democrat": member of political party)
)
PARTIAL = 0.6
LEXICON = 1.0  # a lexicon share of 1 weighs as much as the word meeting the label


def word_groups(text: str, drop: Iterable[str] = ()) -> list[tuple[str, ...]]:
    """One group a content word of the text (stopwords and `drop` words removed): its stem, then its base forms
    by inflection that the text does not say itself. A word is one piece of evidence, scored by its best form,
    never once per form; and a concept the question names twice ("birthplace … born") is counted once."""
    dropped = {stem(w) for w in drop}
    # "egyptians", "canadian", "japanese" name the entity Egypt, Canada, Japan: a shared 5-letter word start
    entity_starts = {d[:PREFIX] for d in dropped if len(d) >= PREFIX}
    words: list[tuple[str, str]] = []
    own: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or len(word) < 2:
            continue
        s = stem(word)
        if s in dropped or word in dropped or s[:PREFIX] in entity_starts or s in own:
            continue
        words.append((word, s))
        own.add(s)
    return [
        tuple(dict.fromkeys((s, *(f for f in (*base_forms(word), *base_forms(s)) if f not in own))))
        for word, s in words
    ]


def content_stems(text: str, drop: Iterable[str] = ()) -> list[str]:
    """The stems of the text's content words (stopwords and `drop` words removed), with their base forms."""
    return list(dict.fromkeys(form for group in word_groups(text, drop) for form in group))


@lru_cache(maxsize=20000)
def _field_stems(text: str) -> frozenset[str]:
    """The field's content stems, and each pair of adjacent content words joined ("time zone" also meets the
    question's "timezone", "birth place" its "birthplace")."""
    words = _WORD.findall(text.lower())
    joined = (a + b for a, b in zip(words, words[1:]) if a not in STOPWORDS and b not in STOPWORDS)
    return frozenset([*(stem(w) for w in words if w not in STOPWORDS), *(stem(j) for j in joined)])


def label_match(word: str, text: str) -> float:
    """How well a word (a stem) meets a label or alias: 1 itself, PARTIAL a shared five-letter start, else 0."""
    return _matched(word, _field_stems(text))[0]


def _matched(word: str, stems: frozenset[str]) -> tuple[float, str | None]:
    """(1.0, the stem) for the word itself, (PARTIAL, the stem) for a shared start of PREFIX letters, else (0, None)."""
    if word in stems:
        return 1.0, word
    if len(word) >= PREFIX:
        for s in sorted(stems):
            if len(s) >= PREFIX and (s.startswith(word[:PREFIX]) and word.startswith(s[:PREFIX])):
                return PARTIAL, s
    return 0.0, None


@dataclass(frozen=True)
class PropertyScore:
    pid: str
    relevance: float  # lexical match of the question against label, aliases and description
    fits: bool  # the range fits the expected answer type (secondary)
    niche: bool  # identifier / media / Commons property not asked for


def relevance(
    words: Iterable[str | tuple[str, ...]],
    label: str,
    aliases: Iterable[str] = (),
    description: str = "",
    values: Iterable[str] = (),
    prior: Sequence[float | None] = (),
) -> float:
    """Sum over the question's words (a stem, or a `word_groups` group scored by its best form) of the best
    field match (label 1.0, aliases 0.9, a value's label 0.6, description 0.25), or of the word's lexicon share
    for the property (`prior`, one a word, LEXICON weight) where that is more; nothing for a word whose prior is
    None (`word_priors`: its train questions never asked for the property)."""
    fields = [(LABEL, _field_stems(label or ""))]
    fields += [(ALIAS, _field_stems(a)) for a in aliases]
    fields += [(VALUE, _field_stems(v)) for v in values if v]
    if description:
        fields.append((DESCRIPTION, _field_stems(description)))

    def best(form: str, besides: str | None = None) -> tuple[float, str | None]:
        """The best field match of a form (weighted), and the field word it met; `besides`: not that word."""
        found = [
            (weight * m, token)
            for weight, stems in fields
            for m, token in [_matched(form, stems)]
            if m and token != besides
        ]
        return max(found, default=(0.0, None))

    total = 0.0
    for i, word in enumerate(words):
        group = (word,) if isinstance(word, str) else word
        own, _ = best(group[0])
        form, token = max((best(f) for f in group[1:]), default=(0.0, None))
        # a form that matches is the evidence; the word itself meeting another field word ("birthdays": "date
        # of birth" and "birthdate") adds half; meeting the form's own word ("located", "location") adds nothing
        lexical = form + OWN_BESIDE_FORM * best(group[0], besides=token)[0] if form > own else own
        if i < len(prior):
            share = prior[i]
            total += 0.0 if share is None else max(lexical, LEXICON * share)
        else:
            total += lexical
    return total


def word_priors(
    words: Sequence[tuple[str, ...]], pid: str, lexicon: Lexicon | None, direction: str | None = None
) -> list[float | None]:
    """Each word group's lexicon share for `pid` (its best form's), [] without a lexicon; None where the lexicon
    speaks against the property for the word (`Lexicon.speaks_against`: "located" of 73 questions, never "located
    in time zone")."""
    if not lexicon:
        return []
    out: list[float | None] = []
    for group in words:
        share = max(lexicon.property_prior(f, pid, direction) for f in group)
        out.append(None if share == 0.0 and any(lexicon.speaks_against(f, pid, direction) for f in group) else share)
    return out


def is_niche(label: str, datatype: str | None) -> bool:
    if datatype in NICHE_DATATYPES:
        return True
    return bool(set(_WORD.findall((label or "").lower())) & NICHE_WORDS)


def rank_properties(
    question: str,
    pids: Iterable[str],
    schema,
    *,
    entity_label: str = "",
    fits: Mapping[str, bool] | None = None,
    label_of=None,
    header: Iterable[str] = (TYPE,),
    values: Mapping[str, Iterable[str]] | None = None,
    lexicon: Lexicon | None = None,
    direction: str | None = None,
) -> list[PropertyScore]:
    """The properties ordered by relevance to the question, then answer-type fit, niche last, then id.
    `header` properties (the types, already in the lookup's header) come after the others of equal relevance;
    `values`: the labels of the entity's values for each property (a yes/no question names its object);
    `lexicon`: the mined word -> property shares (`direction`: `out` for the entity's own statements, `in` for
    those naming it as their value; None: either)."""
    header = frozenset(header)
    words = word_groups(question, drop=_WORD.findall((entity_label or "").lower()))
    asked = {form for group in words for form in group}
    frame_shares = lexicon.frame_priors(question_frame(question), direction) if lexicon else {}
    out = []
    for pid in pids:
        ps = schema.get(pid) if schema is not None else None
        label = (ps.label if ps and ps.label else "") or (label_of(pid) if label_of else pid)
        aliases = ps.aliases if ps is not None else ()
        desc = ps.description if ps is not None else ""
        prior = word_priors(words, pid, lexicon, direction)
        score = relevance(words, label, aliases, desc, (values or {}).get(pid, ()), prior)
        score += LEXICON * frame_shares.get(pid, 0.0)
        niche = is_niche(label, ps.datatype if ps else None) and not (asked & _field_stems(label))
        out.append(PropertyScore(pid, round(score, 3), bool((fits or {}).get(pid)), niche))
    out.sort(key=lambda s: (s.niche, -s.relevance, not s.fits, s.pid in header, id_order(s.pid)))
    return out


__all__ = [
    "PropertyScore",
    "content_stems",
    "word_groups",
    "id_order",
    "rank_properties",
    "relevance",
    "stem",
    "word_priors",
    "is_niche",
    "label_match",
]
