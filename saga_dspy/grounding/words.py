"""The English grammar the grounding reads a question with: stemming, inflection, function words, the
question's wh-phrase openings and its head noun. Every list here is closed-class grammar (function words,
question words, inflectional endings), not a map from a word to a class, property or query form: those are
data, mined from train questions (`grounding.lexicon`). The miner and every lookup read questions through
these functions, so a mined key and a looked-up key are the same string."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

WORD = re.compile(r"[a-z0-9]+")
# grammar: English function words (articles, auxiliaries, pronouns, prepositions, request verbs)
STOPWORDS = frozenset(
    """
a an the of in on at to for from by with about as into onto over under than then and or nor but not no
is are was were be been being am do does did done has have had having will would shall should can could may might must
what which who whom whose when where why how that this these those there here it its it's he she they them his her their
i me my we our you your give list show tell name all any some each every many much one ones also
please find me get whats whos wheres
""".split()
)
# grammar: English irregular plurals (inflection)
IRREGULAR_PLURALS = {"children": "child", "men": "man", "women": "woman", "wives": "wife", "people": "person"}
KINSHIP_PREFIXES = ("great", "grand")  # grammar: kinship prefixes (grandchildren, greatgrandson)
# grammar: English past-tense / comparative / superlative endings and their base forms
_INFLECTIONS = (("ied", "y"), ("ed", ""), ("ed", "e"), ("iest", "y"), ("ier", "y"), ("est", ""), ("er", ""))
# grammar: the English question words that open the phrases `question_patterns` reads
QUESTION_WORDS = frozenset({"how", "what", "when", "where", "which", "who", "whom", "whose", "why"})
PATTERN_WORDS = 3  # a pattern is a question word and up to two more
# grammar: the degree words of a superlative and the ordinals that rank ("the most", "the first")
ORDER_WORDS = frozenset({"most", "least", "first", "last"})
ORDINALS = frozenset({"first", "last"})  # grammar: the ordinals of ORDER_WORDS, which rank the noun they modify
# grammar: the degree words of an amount ("the most official languages", "the least inhabitants"), which way each ranks
AMOUNT_WORDS = {"most": "DESC", "least": "ASC", "fewest": "ASC"}
# grammar: the comparatives that bound an amount by a number ("more than two official languages"), as operators
COMPARATIVES = {"more than": ">", "over": ">", "less than": "<", "fewer than": "<", "at least": ">=", "at most": "<="}
# grammar: English cardinal number words
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "fifty": 50, "hundred": 100,
}  # fmt: skip
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}  # grammar: number scale words
_COMPARED = re.compile(
    rf"\b({'|'.join(COMPARATIVES)})\s+(\d[\d,]*(?:\.\d+)?|{'|'.join(NUMBER_WORDS)})(?:\s+({'|'.join(_SCALES)}))?"
    r"((?:\s+[a-z][a-z-]*){1,3})"
)
SUPERLATIVE_LEN = 6  # an -est adjective's shortest form ("oldest"; not "best", "west")


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


def base_forms(word: str) -> tuple[str, ...]:
    """The word's base forms by inflection, nearest first: past tense ("played" -> play, "starred" -> star),
    comparative and superlative ("higher" -> high), kinship prefixes ("grandchildren" -> children, child)."""
    out: list[str] = []
    for prefix in KINSHIP_PREFIXES:
        if word.startswith(prefix) and len(word) > len(prefix) + 2:
            rest = word[len(prefix) :]
            out += [rest, stem(rest), *base_forms(rest)]
    for suffix, repl in _INFLECTIONS:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + repl
            out.append(base)
            if len(base) > 2 and base[-1] == base[-2]:
                out.append(base[:-1])
    return tuple(f for f in dict.fromkeys(out) if f != word)


def phrase_key(phrase: str) -> str:
    """A phrase as the lexicon keys it: its words stemmed ("danish movies" -> "danish movie", "u.s. states" ->
    "u.s. state")."""
    return " ".join(stem(w) for w in (phrase or "").lower().split())


def question_patterns(question: str) -> list[str]:
    """The question's wh-phrase openings, longest first: "How often did Jane Fonda marry?" -> "how often did",
    "how often", "how"."""
    words = WORD.findall((question or "").lower())
    out: list[str] = []
    for i, word in enumerate(words):
        if word in QUESTION_WORDS:
            out.extend(" ".join(words[i : i + n]) for n in range(min(PATTERN_WORDS, len(words) - i), 0, -1))
    return sorted(dict.fromkeys(out), key=lambda p: -p.count(" "))


def superlatives(question: str) -> list[str]:
    """The question's words that may order its answers: an -est adjective ("highest", "youngest"), a degree word
    of a superlative ("most", "least"), an ordinal that ranks the answers' noun ("the first album" of "What was
    the first album of …", not the season of "episodes of the first season", nor an adverb: "play for first").
    Which of them order, and which way, is data (`Lexicon.order`): "Mount Everest" ends in -est too."""
    words = WORD.findall((question or "").lower())
    heads = {stem(w) for phrase in head_phrases(question) for w in phrase.split()}
    out: list[str] = []
    for i, w in enumerate(words):
        if w in ORDINALS:
            after = words[i + 1] if i + 1 < len(words) else ""
            # an ordinal modifies the next word: a content word, the head noun where the question has one
            if not after or after in STOPWORDS or (heads and stem(after) not in heads):
                continue
        if w in ORDER_WORDS or (w.endswith("est") and len(w) >= SUPERLATIVE_LEN):
            out.append(w)
    return list(dict.fromkeys(out))


def amount_phrase(question: str) -> tuple[str, str] | None:
    """(what is counted or measured, `ASC` | `DESC`) of the question's first degree word of an amount followed by
    content words ending in a plural noun: "Which country has the most official languages?" -> ("official
    languages", "DESC"). An amount counts a plural; "the most frequent cause" is an adjective's superlative."""
    words = WORD.findall((question or "").lower())
    for i, word in enumerate(words):
        if word in AMOUNT_WORDS and (phrase := _plural_phrase(words[i + 1 : i + 4])):
            return phrase, AMOUNT_WORDS[word]
    return None


def compared_amount(question: str) -> tuple[str, str, float] | None:
    """(what is counted or measured, operator, number) of a comparative bounding an amount: "Which countries have
    more than two official languages?" -> ("official languages", ">", 2). As with `amount_phrase`, what is
    compared is content words ending in a plural noun."""
    m = _COMPARED.search((question or "").lower())
    if m is None:
        return None
    raw = m.group(2).replace(",", "")
    number = float(NUMBER_WORDS[raw]) if raw in NUMBER_WORDS else float(raw)
    number *= _SCALES.get(m.group(3) or "", 1)
    phrase = _plural_phrase(m.group(4).split())
    return (phrase, COMPARATIVES[m.group(1)], number) if phrase else None


def content_run(words: Iterable[str], stop: Collection[str] = ()) -> list[str]:
    """The words up to the first function word (or `stop` word): the content words a phrase opens with."""
    run: list[str] = []
    for w in words:
        if w in STOPWORDS or w in stop:
            break
        run.append(w)
    return run


def _plural_phrase(words: Iterable[str]) -> str:
    """The content words the words open with, where they end in a plural noun (what an amount counts); else ""."""
    phrase = content_run(words)
    return " ".join(phrase) if phrase and _plural(phrase[-1]) else ""


def _plural(word: str) -> bool:
    return word in IRREGULAR_PLURALS or (word.endswith("s") and not word.endswith("ss") and stem(word) != word)


def question_frame(question: str) -> str:
    """The question's function words with every run of other words as `_`: what it asks about whatever it names
    ("Where is Eric Cantor from?" -> "where is _ from", "What does Jennifer Lopez do?" -> "what does _ do");
    "" for a question of content words alone."""
    out: list[str] = []
    for word in WORD.findall((question or "").lower()):
        if word in STOPWORDS:
            out.append(word)
        elif not out or out[-1] != "_":
            out.append("_")
    return " ".join(out) if "_" in out and len(out) > 1 else ""


# --- the head noun --------------------------------------------------------------------------------------------

_HEAD_WORD = r"(?:[a-z](?:\.[a-z])+\.?|[a-z][a-z-]*)"  # a word, or a dotted abbreviation ("U.S.")
# grammar: the request and wh-determiner phrases a head noun follows ("which", "give me all", "a list of")
_HEAD = re.compile(
    r"\b(?:which|what|(?:give\s+me\s+|show\s+me\s+)?(?:a\s+)?list\s+of(?:\s+all)?|list(?:\s+all)?|"
    r"give\s+me(?:\s+all)?|show\s+me(?:\s+all)?|name(?:\s+all)?|all)\s+"
    rf"(?:(?:the|of the|are the|is the|was the|were the)\s+)?({_HEAD_WORD}(?:\s+of\s+{_HEAD_WORD}|\s+{_HEAD_WORD})?)",
    re.I,
)
_HOW_MANY = re.compile(rf"\bhow\s+many\s+({_HEAD_WORD}(?:\s+{_HEAD_WORD})?)", re.I)
# grammar: light nouns whose "of" phrase names the class ("what form of government")
_OF_WORDS = frozenset({"form", "forms", "kind", "kinds", "type", "types", "sort", "sorts", "name", "names"})
# grammar: function words and light nouns that are never the head noun itself
_NOT_HEAD = STOPWORDS | {"kind", "type", "sort"}


def head_phrases(question: str, counted: bool = False) -> list[str]:
    """The phrases of the question's head noun that may name its answers' class, best first ("Give me all Danish
    movies" -> "danish movies", "danish", "movies"; "what form of government" -> itself, "government"; "capital
    of france" -> itself, "capital"); `counted`: the counted noun of a "how many" question first. [] for none."""
    q = " ".join((question or "").split())
    count = _HOW_MANY.search(q) if counted else None
    for m in [count] if count else _HEAD.finditer(q):
        head = m.group(1).lower().split()
        words = [w for w in head if w not in _NOT_HEAD]
        if not words:
            continue
        phrases: tuple[str, ...] = (" ".join(words), words[0], words[-1])
        if len(head) == 3 and head[1] == "of":
            phrases = (" ".join(head), head[2]) if head[0] in _OF_WORDS else (" ".join(head), head[0])
        return list(dict.fromkeys(phrases))
    return []


__all__ = [
    "IRREGULAR_PLURALS",
    "QUESTION_WORDS",
    "STOPWORDS",
    "WORD",
    "base_forms",
    "head_phrases",
    "phrase_key",
    "question_frame",
    "question_patterns",
    "stem",
    "superlatives",
]
