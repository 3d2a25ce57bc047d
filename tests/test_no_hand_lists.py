"""No hand-written list maps a question word to a Wikidata class, property or query form: those are data, mined
from train questions into the lexicon (`grounding.lexicon`, `scripts/mine_lexicon.py`). What stays in the code
that reads questions is general grammar, each list registered here with the one line that says why it is not
data. A new word list in those modules, or a word -> Q/P id map anywhere in the package, fails this test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "saga_dspy"
# the modules that read a question's words
READERS = ("agent", "grounding", "proposer", "tools", "kg/search.py", "signatures.py")
MIN_WORDS = 4  # a literal with this many English words is a word list
_ENGLISH = re.compile(r"^[a-z][a-z' -]*$")
_ALTERNATION = re.compile(r"(?:\b[a-z]+\|){3,}[a-z]+\b")  # a regex alternation of four words or more
_ID = re.compile(r"^[QP][1-9]\d*$")

# (module, name) -> why it is not data
GRAMMAR = {
    ("agent/answer_cues.py", "_WHO"): "the question word who/whom and the auxiliaries after it",
    ("agent/answer_cues.py", "_WHERE"): "the question word where and the auxiliaries after it",
    ("agent/query_form.py", "_YES_NO"): "an auxiliary verb opening a question makes it a yes/no question",
    ("agent/answer_type.py", "SCALAR_TYPES"): "the answer kinds our answer-type step writes, not question words",
    ("kg/flavours/wikidata.py", "WELL_KNOWN_CLASSES"): "normalises the answer-type LM's own label to a class id "
    "(its output vocabulary, not the question's words)",
    ("agent/demos.py", "STOPWORDS"): "English function words (BM25 over demo questions)",
    ("agent/prediction.py", "COUNTER_NAMES"): "counter names",
    ("agent/final_query.py", "NO_RESULT"): "the notes of steps that did nothing (our own step vocabulary)",
    ("agent/authorship.py", "AUTHORS"): "who wrote a final query (our own vocabulary)",
    ("grounding/context.py", "COUNTER_KEYS"): "counter names",
    ("grounding/patterns.py", "?"): "pattern contexts",
    ("grounding/lexicon.py", "KINDS"): "the answer kinds the lexicon counts",
    ("grounding/lexicon.py", "TABLE_DEPTHS"): "the lexicon file's table names (its format, checked on load)",
    ("grounding/ranking.py", "NICHE_WORDS"): "the words of identifier / media property labels (label vocabulary)",
    ("grounding/words.py", "STOPWORDS"): "English function words",
    ("grounding/words.py", "IRREGULAR_PLURALS"): "English irregular plurals (inflection)",
    ("grounding/words.py", "_INFLECTIONS"): "English inflectional endings",
    ("grounding/words.py", "QUESTION_WORDS"): "English question words",
    ("grounding/words.py", "ORDER_WORDS"): "the degree words of a superlative and the ranking ordinals (which way "
    "each orders is mined)",
    ("grounding/words.py", "COMPARATIVES"): "English comparatives of an amount and their SPARQL operators",
    ("grounding/words.py", "NUMBER_WORDS"): "English cardinal number words",
    ("grounding/words.py", "_OF_WORDS"): "light nouns whose of-phrase names the class (kind of, form of)",
    ("kg/search.py", "_STOPWORDS"): "English function words that name no entity",
    ("grounding/answer_fit.py", "SCALAR_ANSWERS"): "our answer kinds' names -> datatypes (the answer-type vocabulary)",
    ("grounding/answer_fit.py", "_LITERALS"): "XSD datatype names of the literals of each answer kind (SPARQL's "
    "result vocabulary)",
}


def _words(node: ast.AST) -> list[str]:
    """The English words a literal holds (strings of a set / list / tuple / dict, a "...".split())."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("frozenset", "set", "tuple", "list"):
        return _words(node.args[0]) if node.args else []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split":
        value = node.func.value
        return value.value.split() if isinstance(value, ast.Constant) and isinstance(value.value, str) else []
    out: list[str] = []
    items = node.elts if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else []
    if isinstance(node, ast.Dict):
        items = [k for k in node.keys if k is not None] + list(node.values)
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            out.append(item.value)
        else:
            out.extend(_words(item))
    return [w for w in out if _ENGLISH.match(w)]


def _assignments(path: Path):
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield ",".join(getattr(t, "id", "?") for t in targets), node.value


def _is_reader(rel: str) -> bool:
    return any(rel == r or rel.startswith(r + "/") for r in READERS)


def word_lists() -> dict[tuple[str, str], str]:
    """(module, name) -> what makes it a word list, over the question-reading modules (and word -> id maps
    over the whole package)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, value in _assignments(path):
            if isinstance(value, ast.Dict) and any(
                isinstance(k, ast.Constant)
                and isinstance(v, ast.Constant)
                and isinstance(k.value, str)
                and _ENGLISH.match(k.value)
                and isinstance(v.value, str)
                and _ID.match(v.value)
                for k, v in zip(value.keys, value.values)
            ):
                found[(rel, name)] = "maps words to Wikidata ids"
            if not _is_reader(rel):
                continue
            if len(_words(value)) >= MIN_WORDS:
                found.setdefault((rel, name), f"{len(_words(value))} words")
            strings = [n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            if any(_ALTERNATION.search(s) for s in strings):
                found.setdefault((rel, name), "a regex alternation of words")
    return found


def test_no_word_list_outside_the_lexicon_but_registered_grammar():
    unregistered = {key: why for key, why in word_lists().items() if key not in GRAMMAR}
    assert not unregistered, (
        "word lists in the code that reads questions (mine them into the lexicon, scripts/mine_lexicon.py, or, "
        f"for general grammar, register them in GRAMMAR with why they are not data): {unregistered}"
    )


def test_the_hand_lists_the_lexicon_replaced_are_gone():
    found = word_lists()
    for key in (
        ("grounding/ranking.py", "WORD_FORMS"),
        ("agent/answer_cues.py", "_CLASS_WORDS"),
        ("agent/answer_cues.py", "_PERSON_NOUNS"),
        ("agent/answer_cues.py", "_PLACE_NOUNS"),
        ("agent/answer_cues.py", "_QUANTITY"),
        ("agent/answer_cues.py", "_DATE"),
    ):
        assert key not in found and key not in GRAMMAR


def test_the_scan_finds_a_new_hand_list(tmp_path, monkeypatch):
    module = tmp_path / "agent" / "cues.py"
    module.parent.mkdir()
    module.write_text(
        'SYNONYMS = {"movie": "film", "flick": "film", "show": "series", "firm": "business"}\n'
        'CLASS = {"boardgame": "Q131436"}\n'
        'import re\nRULE = re.compile(r"how often (did|was|were|has)")\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert set(word_lists()) == {("agent/cues.py", "SYNONYMS"), ("agent/cues.py", "CLASS"), ("agent/cues.py", "RULE")}
