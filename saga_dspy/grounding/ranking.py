"""Question-aware property ranking for the lookup.

The question's content words are matched against each property's label, aliases and
description after a light stemming ("birthdays" → birthday, "crosses" → cross, "actors" →
actor) and a few verb → noun forms ("born" → birth, "married" → spouse); a shared word prefix of
five letters counts as a weaker match ("birthday" meets "birth"). A question word is one piece of evidence:
it scores by its best form, not once per form; inflections (played, higher, grandchildren) reach the forms; a
yes/no question's words may also meet the entity's values ("a democrat"). The score orders the
properties; the range's fit to the expected answer type only breaks ties, so it never puts an
irrelevant property first. Identifier, media and Commons properties go last unless the question
names them. Lexical only: no model, no network.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from saga_dspy.schema.index import id_order  # one Wikidata id order (numeric, other ids after)

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """
a an the of in on at to for from by with about as into onto over under than then and or nor but not no
is are was were be been being am do does did done has have had having will would shall should can could may might must
what which who whom whose when where why how that this these those there here it its it's he she they them his her their
i me my we our you your give list show tell name all any some each every many much one ones also
please find me get whats whos wheres
""".split()
)
# verb and adjective forms whose property label is a noun (linguistic, not tuned per question)
WORD_FORMS: Mapping[str, tuple[str, ...]] = {
    "born": ("birth",),
    "bear": ("birth",),
    "die": ("death",),
    "died": ("death",),
    "dead": ("death",),
    "kill": ("killed", "death"),
    "marry": ("spouse",),
    "married": ("spouse",),
    "wife": ("spouse",),
    "husband": ("spouse",),
    "wrote": ("author",),
    "write": ("author",),
    "written": ("author",),
    "writer": ("author",),
    "directed": ("director",),
    "direct": ("director",),
    "star": ("cast",),
    "starred": ("cast",),
    "actor": ("cast",),
    "actress": ("cast",),
    "play": ("cast", "performer"),
    "found": ("founded", "inception", "founder"),
    "founded": ("inception", "founder"),
    "live": ("residence",),
    "lived": ("residence",),
    "speak": ("language",),
    "spoken": ("language",),
    "bury": ("burial",),
    "buried": ("burial",),
    "located": ("location",),
    "flow": ("mouth", "watercourse"),
    "pass": ("crosses",),
    "tall": ("height",),
    "high": ("height", "elevation"),
    "old": ("age", "birth", "inception"),
    "big": ("area",),
    "large": ("area",),
    "long": ("length",),
    "deep": ("depth",),
    "won": ("award",),
    "win": ("award",),
    "child": ("child",),
    "kid": ("child",),
    "son": ("child",),
    "daughter": ("child",),
    "father": ("father",),
    "mother": ("mother",),
    "parent": ("father", "mother"),
    "capital": ("capital",),
    "population": ("population",),
    "inhabitants": ("population",),
    "people": ("population",),
    "currency": ("currency",),
    "money": ("currency",),
    "creator": ("creator", "author"),
    "created": ("creator",),
    "invent": ("inventor",),
    "invented": ("inventor",),
    "discover": ("discoverer",),
    "discovered": ("discoverer",),
    "designed": ("architect", "designer"),
    "built": ("architect", "inception"),
    "study": ("educated",),
    "studied": ("educated",),
    "attend": ("educated",),
    "graduate": ("educated",),
    "team": ("team",),
    "birthplace": ("birth",),
    "birthday": ("birth",),
    "hometown": ("birth", "residence"),
    "job": ("occupation",),
    "profession": ("occupation",),
    "career": ("occupation",),
    "famous": ("occupation", "notable"),
    "known": ("occupation", "notable"),
    "senator": ("position",),
    "secretary": ("position",),
    "elected": ("position",),
    "office": ("position",),
    "beside": ("border",),
    "near": ("border",),
    "neighbor": ("border",),
    "neighbour": ("border",),
    "neighboring": ("border",),
    "neighbouring": ("border",),
    "adjacent": ("border",),
    "around": ("border",),
    "political": ("government",),
    "regime": ("government",),
}
IRREGULAR_PLURALS: Mapping[str, str] = {"children": "child", "men": "man", "women": "woman", "wives": "wife"}
KINSHIP_PREFIXES = ("great", "grand")  # grandchildren, greatgrandson; "great-grandfather" splits: grandfather
NICHE_DATATYPES = frozenset(
    {"ExternalId", "CommonsMedia", "Url", "GeoShape", "TabularData", "Math", "MusicalNotation", "type.key", "type.id"}
)
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


def stem(word: str) -> str:
    """A light English stemmer: plural and common verb endings (enough to meet property labels)."""
    w = word.lower()
    if w in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[w]
    if len(w) <= 3:
        return w
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x"), ("oes", "o")):
        if w.endswith(suffix) and len(w) > len(suffix) + 1:
            return w[: -len(suffix)] + repl
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def word_groups(text: str, drop: Iterable[str] = ()) -> list[tuple[str, ...]]:
    """One group a content word of the text (stopwords and `drop` words removed): its stem, then its word forms
    that the text does not say itself. A word is one piece of evidence, scored by its best-matching form, never
    once per form; and a concept the question names ("what language … speak") is counted once."""
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
        tuple(dict.fromkeys((s, *(f for f in (*word_forms(word), *word_forms(s)) if f not in own))))
        for word, s in words
    ]


def word_forms(word: str) -> tuple[str, ...]:
    """The noun forms of a word (WORD_FORMS), also through its inflections: past tense ("played" → play,
    "starred" → star, "married" → marry), comparative and superlative ("higher", "biggest"), and the kinship
    prefixes grand-/great- ("grandchildren" → child)."""
    if word in WORD_FORMS:
        return WORD_FORMS[word]
    for prefix in KINSHIP_PREFIXES:
        if word.startswith(prefix) and len(word) > len(prefix) + 2:
            return (word[len(prefix) :], *word_forms(word[len(prefix) :]), *word_forms(stem(word[len(prefix) :])))
    for suffix, repl in (("ied", "y"), ("ed", ""), ("ed", "e"), ("iest", "y"), ("ier", "y"), ("est", ""), ("er", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            base = word[: -len(suffix)] + repl
            for candidate in (base, base[:-1] if len(base) > 2 and base[-1] == base[-2] else None):
                if candidate and candidate in WORD_FORMS:
                    return WORD_FORMS[candidate]
    return ()


def content_stems(text: str, drop: Iterable[str] = ()) -> list[str]:
    """The stems of the text's content words (stopwords and `drop` words removed), with word forms added."""
    return list(dict.fromkeys(form for group in word_groups(text, drop) for form in group))


@lru_cache(maxsize=20000)
def _field_stems(text: str) -> frozenset[str]:
    """The field's content stems, and each pair of adjacent content words joined ("time zone" also meets the
    question's "timezone", "birth place" its "birthplace")."""
    words = _WORD.findall(text.lower())
    joined = (a + b for a, b in zip(words, words[1:]) if a not in STOPWORDS and b not in STOPWORDS)
    return frozenset([*(stem(w) for w in words if w not in STOPWORDS), *(stem(j) for j in joined)])


def _match(word: str, stems: frozenset[str]) -> float:
    return _matched(word, stems)[0]


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
) -> float:
    """Sum over the question's words (a stem, or a `word_groups` group scored by its best form) of the best
    field match (label 1.0, aliases 0.9, a value's label 0.6, description 0.25)."""
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
    for word in words:
        group = (word,) if isinstance(word, str) else word
        own, _ = best(group[0])
        form, token = max((best(f) for f in group[1:]), default=(0.0, None))
        # a form that matches is the evidence; the word itself meeting another field word ("birthdays": "date
        # of birth" and "birthdate") adds half; meeting the form's own word ("located", "location") adds nothing
        total += form + OWN_BESIDE_FORM * best(group[0], besides=token)[0] if form > own else own
    return total


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
    header: Iterable[str] = ("P31",),
    values: Mapping[str, Iterable[str]] | None = None,
) -> list[PropertyScore]:
    """The properties ordered by relevance to the question, then answer-type fit, niche last, then id.
    `header` properties (the types, already in the lookup's header) come after the others of equal relevance;
    `values`: the labels of the entity's values for each property (a yes/no question names its object)."""
    header = frozenset(header)
    words = word_groups(question, drop=_WORD.findall((entity_label or "").lower()))
    asked = {form for group in words for form in group}
    out = []
    for pid in pids:
        ps = schema.get(pid) if schema is not None else None
        label = (ps.label if ps and ps.label else "") or (label_of(pid) if label_of else pid)
        aliases = ps.aliases if ps is not None else ()
        desc = ps.description if ps is not None else ""
        score = relevance(words, label, aliases, desc, (values or {}).get(pid, ()))
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
    "is_niche",
]
