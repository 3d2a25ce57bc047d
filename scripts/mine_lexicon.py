#!/usr/bin/env python
"""Mine the grounding lexicon (`saga_dspy.grounding.lexicon`) from the train questions' gold SPARQL.

    python scripts/mine_lexicon.py                    # data/lexicon/wikidata.json.gz
    python scripts/mine_lexicon.py --out /tmp/lex.json.gz

For every train question of the Wikidata benchmarks with a train split (QALD-10, QALD-9-plus, QALD-7,
WikiWebQuestions; each train split is already train minus dev, `eval.loading.splits`) that collides with no test or
dev question of any Wikidata benchmark (`eval.loading.splits.held_out_firewall`, the demo pools' firewall), once per
distinct question text:

1. the gold query's constants: entities, class constants (`?x wdt:P31|P106|P279 wd:C`), properties with their
   direction (`out` / `in` / `var`) and position (`answer` / `inner`);
2. the question's n-grams that name a constant through its English label or an alias (the bundled sample's
   terms, the schema index's property labels): entity mentions are set aside, class mentions count for the
   class; where no n-gram names the query's one class, the question's head noun does;
3. every other content word counts for the properties whose label or alias it meets, else, shared, for the
   query's properties no word names;
4. the classes the graph gives humans as occupation or position (P106, P39), counted over the sample;
5. the question's frame (its function words, each run of other words as `_`: "where is _ from") counts the
   gold query's properties, shared like an unnamed word's;
6. the question's wh-phrase openings and head noun count the gold query form and what the gold answers are
   (boolean / quantity / date / string, or the most common P31 type of the answer entities: the frozen gold
   on the sample, else the benchmark's own answers).

Writes the tables with their provenance (sources, firewall, counts, date, commit) into the output file.
Needs the embedded store (built on first use) and the bundled benchmarks; nothing else.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from saga_dspy.agent.query_form import form_of  # noqa: E402
from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.eval.loading.datasets import bundled_gold_path, load_records, read_gold  # noqa: E402
from saga_dspy.eval.loading.firewall import normalise_text  # noqa: E402
from saga_dspy.eval.loading.splits import held_out_firewall  # noqa: E402
from saga_dspy.eval.stats.components import gold_kind  # noqa: E402
from saga_dspy.eval.stats.entity_linking import entity_names  # noqa: E402
from saga_dspy.grounding.lexicon import Lexicon, bundled_lexicon_path, head_key  # noqa: E402
from saga_dspy.grounding.patterns import parse_query  # noqa: E402
from saga_dspy.grounding.ranking import PREFIX, label_match  # noqa: E402
from saga_dspy.grounding.words import (  # noqa: E402
    STOPWORDS,
    WORD,
    base_forms,
    head_phrases,
    phrase_key,
    question_frame,
    question_patterns,
    stem,
    superlatives,
)
from saga_dspy.kg.endpoint import open_endpoint  # noqa: E402
from saga_dspy.kg.flavours import WIKIDATA  # noqa: E402
from saga_dspy.schema import entity_types_many, load_schema_index  # noqa: E402

_ORDER = re.compile(r"\bORDER\s+BY\b", re.I)
TRAIN = ("qald10", "qald9plus", "qald7", "wwq")  # the Wikidata benchmarks with a train split
CLASS_PIDS = ("P31", "P106", "P279")
PEOPLE_PIDS = ("P106", "P39")  # occupation, position held: what a human is, named by a class
HUMAN = "Q5"  # a constant object of these is a class the query restricts to
MAX_NGRAM = 6
ANSWER_ENTITIES = 20
# a property's Wikibase datatype -> the kind of its values (an item's class is not known from it)
DATATYPE_KINDS = {
    "Time": "date",
    "Quantity": "quantity",
    "String": "string",
    "Monolingualtext": "string",
}  # answer entities whose types vote for a question's answer class


class Question:
    """One train question read against its gold query."""

    def __init__(self, rec: dict, gold: dict | None):
        self.rec, self.gold = rec, gold
        self.text = rec.get("question") or ""
        self.parsed = parse_query(rec.get("sparql") or "", WIKIDATA)
        self.form = form_of(rec.get("sparql") or "")
        self.entities: list[str] = []
        self.classes: list[str] = []
        self.props: list[tuple[str, str, str]] = []  # (pid, direction, position)
        if self.parsed is not None:
            self._read()

    def _read(self) -> None:
        projected = set(self.parsed.projected)
        for p in self.parsed.patterns:
            ids = [WIKIDATA.entity_id(t.value) if t.kind == "iri" else None for t in (p.subject, p.obj)]
            for eid in ids:
                if eid and WIKIDATA.entity_re.match(eid) and eid not in self.entities:
                    self.entities.append(eid)
            steps = [s for s in (p.subject_steps or ()) + (p.object_steps or ())]
            pids = list(dict.fromkeys(ref.pid for s in steps if (ref := WIKIDATA.prop_ref(s.iri)) is not None))
            if p.type_kind or (pids and set(pids) <= set(CLASS_PIDS)):
                if p.subject.is_var and ids[1] and WIKIDATA.entity_re.match(ids[1]):
                    self.classes.append(ids[1])
                    continue
            direction = "out" if ids[0] and not ids[1] else "in" if ids[1] and not ids[0] else "var"
            if ids[0] and ids[1]:
                direction = "out"
            touches = {t.value for t in (p.subject, p.obj) if t.is_var}
            position = "answer" if touches & projected else "inner"
            for pid in pids:
                if (pid, direction, position) not in self.props:
                    self.props.append((pid, direction, position))

    def _answer_datatype(self, schema) -> str | None:
        """Without answers (not on the sample, none in the source): the kind the datatype of the properties
        leading from a constant to the projected variable gives, when they agree; None for items (no class)."""
        kinds = {
            DATATYPE_KINDS.get(ps.datatype or "")
            for pid, d, pos in self.props
            if d == "out" and pos == "answer"
            if (ps := schema.get(pid)) is not None
        }
        return next(iter(kinds)) if len(kinds) == 1 and None not in kinds else None

    def answer_label(self, types: dict, schema) -> str | None:
        """boolean / quantity / date / string, or the most common type of the answer entities (None: unknown)."""
        if self.form == "ASK":
            return "boolean"
        if self.form == "COUNT":
            return "quantity"
        result = _answer_result(self)
        if not result:
            return self._answer_datatype(schema)
        kind, _ = gold_kind(json.dumps(result), self.rec.get("sparql") or "")
        if kind != "entity":
            return kind
        votes: Counter = Counter()
        for eid in answer_entities(result):
            for t in types.get(eid, ()):
                votes[t] += 1
        return max(sorted(votes), key=lambda t: votes[t]) if votes else None


def _json(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def answer_entities(result: dict) -> list[str]:
    out: list[str] = []
    variables = [v for v in result.get("head", {}).get("vars", []) if not v.lower().endswith("label")]
    for row in result.get("results", {}).get("bindings", []):
        b = row.get(variables[0]) if variables else None
        if b and b.get("type") == "uri":
            eid = WIKIDATA.entity_id(b["value"])
            if eid and WIKIDATA.entity_re.match(eid) and eid not in out:
                out.append(eid)
        if len(out) >= ANSWER_ENTITIES:
            break
    return out


def train_questions(settings: Settings, log) -> tuple[list[Question], dict]:
    """The train questions that collide with no held-out question, one per distinct text."""
    firewall = held_out_firewall(settings, "wikidata", ("test", "dev"))
    seen: set[str] = set()
    out: list[Question] = []
    counts: dict = {}
    for name in TRAIN:
        records = load_records(name, "train", settings)
        path = bundled_gold_path(name, "train", settings)
        gold = read_gold(path) if path else {}
        row = Counter(train=len(records))
        for rec in records:
            hits = firewall.collisions(rec.get("question"), rec.get("sparql"))
            if hits:
                row["collide_with_held_out"] += 1
                continue
            key = normalise_text(rec.get("question"))
            if not key or key in seen:
                row["duplicate"] += 1
                continue
            seen.add(key)
            q = Question({**rec, "benchmark": name}, gold.get(str(rec.get("id"))))
            if q.parsed is None:
                row["unparsable_gold"] += 1
                continue
            out.append(q)
            row["mined"] += 1
        counts[name] = dict(row)
        log(f"{name}/train: {dict(row)}")
    return out, {"held_out_questions": len(firewall), "per_benchmark": counts}


def _spans(tokens: list[str], names: list[str]) -> set[int]:
    """Positions of the question tokens that a name spells out (a run of its words), or, for a word of five
    letters or more, shares its first five letters with a name word ("jamaican" / Jamaica)."""
    marked: set[int] = set()
    for name in names:
        words = WORD.findall(name.lower())
        if not words:
            continue
        n = len(words)
        for i in range(len(tokens) - n + 1):
            if tokens[i : i + n] == words:
                marked.update(range(i, i + n))
        starts = {stem(w)[:PREFIX] for w in words if len(w) >= PREFIX and w not in STOPWORDS}
        marked.update(i for i, t in enumerate(tokens) if len(t) >= PREFIX and stem(t)[:PREFIX] in starts)
    return marked


def _class_spans(tokens: list[str], names: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each question n-gram (1-3 words) that is a name in the singular, stemmed or joined
    ("movies" / movie, "cities" / city, "boardgames" / board game)."""
    keys = {k for n in names if n for k in _variants(n.lower().split())}
    out = []
    for n in (3, 2, 1):
        for i in range(len(tokens) - n + 1):
            if _variants(tokens[i : i + n]) & keys:
                out.append((i, i + n))
    return out


def _variants(words: list[str]) -> set[str]:
    """A phrase stemmed, with each word's plural s dropped, and both joined into one word."""
    forms = {" ".join(stem(w) for w in words), " ".join(w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words)}
    return forms | {f.replace(" ", "") for f in forms}


def head_keys(question: str) -> list[str]:
    """The head phrases the lexicon counts: every phrase a lookup may try (`words.head_phrases`)."""
    return list(dict.fromkeys(k for p in head_phrases(question, counted=True) if (k := phrase_key(p))))


def mine(settings: Settings, log=print) -> Lexicon:
    """The lexicon of the bundled train splits, with its provenance."""
    questions, provenance = train_questions(settings, log)
    endpoint = open_endpoint(settings)
    try:
        lexicon = mine_questions(questions, endpoint, load_schema_index(settings), log)
    finally:
        endpoint.close()
    meta = {
        "script": "scripts/mine_lexicon.py",
        "date": _dt.date.today().isoformat(),
        "commit": _commit(),
        "sources": {name: f"data/benchmarks/{name}/train.jsonl.gz" for name in TRAIN},
        "labels": "the bundled sample's English labels and aliases (data/wikidata-sample), the schema index's "
        "property labels and aliases",
        "firewall": "eval.loading.splits.held_out_firewall(kg='wikidata', roles=('test', 'dev'))",
        **provenance,
        **lexicon.meta,
        "mined_ids": {name: [q.rec["id"] for q in questions if q.rec.get("benchmark") == name] for name in TRAIN},
    }
    return Lexicon(**{**lexicon.__dict__, "meta": meta})


def mine_questions(questions: list[Question], endpoint, schema, log=print) -> Lexicon:
    """Steps 1-5 of the module docstring over these questions (meta: the counts only)."""
    ids = list(dict.fromkeys(e for q in questions for e in q.entities + q.classes))
    names = entity_names(endpoint, ids)
    for cls in {c for q in questions for c in q.classes}:
        label = schema.class_label(cls)
        if label and label != cls and label not in names.setdefault(cls, []):
            names[cls].append(label)
    answers_ids = {e for q in questions for e in answer_entities(_answer_result(q))}
    types = {eid: et.types for eid, et in entity_types_many(endpoint, sorted(answers_ids)).items()}
    people = people_classes(endpoint)
    log(f"{len(questions)} questions, {len(ids)} constants, {len(answers_ids)} answer entities")

    words: Counter = Counter()
    properties: dict = defaultdict(lambda: defaultdict(Counter))
    classes: dict = defaultdict(Counter)
    answers: dict = defaultdict(Counter)
    patterns: dict = defaultdict(lambda: defaultdict(Counter))
    frames: dict = defaultdict(lambda: defaultdict(Counter))
    frame_questions: Counter = Counter()
    orders: dict = defaultdict(Counter)
    aligned = Counter()
    for q in questions:
        tokens = WORD.findall(q.text.lower())
        consumed: set[int] = set()
        for eid in q.entities:
            if eid not in q.classes:
                consumed |= _spans(tokens, names.get(eid, []))
        named_class = False
        for cls in dict.fromkeys(q.classes):
            for start, end in _class_spans(tokens, names.get(cls, [])):
                if not set(range(start, end)) & consumed:
                    classes[phrase_key(" ".join(tokens[start:end]))][cls] += 1
                    consumed |= set(range(start, end))
                    named_class = True
        heads = head_keys(q.text)
        if not named_class and len(set(q.classes)) == 1:
            for key in heads:
                classes[key][q.classes[0]] += 1
        _count_words(q, tokens, consumed, schema, words, properties, aligned)
        if (frame := question_frame(q.text)) and q.props:
            frame_questions[frame] += 1
            for pid, key, weight in _spread(q.props):
                frames[frame][pid][key] += weight
        for word in superlatives(q.text):
            orders[word][gold_order(q.rec.get("sparql") or "")] += 1
        label = q.answer_label(types, schema)
        kind = None if label is None else label if label in ("boolean", "quantity", "date", "string") else "entity"
        if label is not None:
            for key in heads:
                answers[key][label] += 1
        for key in question_patterns(q.text) + [head_key(h) for h in heads]:
            if q.form in ("ASK", "COUNT", "SELECT"):
                patterns[key]["form"][q.form] += 1
            if kind is not None:
                patterns[key]["kind"][kind] += 1
    meta = {"questions": len(questions), "word_alignments": dict(aligned), "counts": {}}
    lexicon = Lexicon(
        words=dict(words),
        properties={
            w: {p: {k: round(v, 3) for k, v in sorted(rows.items())} for p, rows in sorted(ps.items())}
            for w, ps in properties.items()
        },
        classes={k: dict(v.most_common()) for k, v in classes.items()},
        answers={k: dict(v.most_common()) for k, v in answers.items()},
        patterns={k: {t: dict(c.most_common()) for t, c in sorted(v.items())} for k, v in patterns.items()},
        people=people,
        frames={
            f: {
                "n": frame_questions[f],
                **{p: {k: round(v, 3) for k, v in sorted(c.items())} for p, c in sorted(rows.items())},
            }
            for f, rows in frames.items()
        },
        meta=meta,
        orders={k: dict(v.most_common()) for k, v in orders.items()},
    )
    meta["counts"] = {
        "words": len(lexicon.words),
        "word_property_entries": sum(len(v) for v in lexicon.properties.values()),
        "classes": len(lexicon.classes),
        "answers": len(lexicon.answers),
        "patterns": len(lexicon.patterns),
        "people_classes": len(lexicon.people),
        "frames": len(lexicon.frames),
        "orders": len(lexicon.orders),
    }
    return lexicon


def people_classes(endpoint) -> dict[str, int]:
    """The classes the graph gives humans as occupation or position, with how many humans (3 or more)."""
    result = endpoint.query(
        f"SELECT ?c (COUNT(DISTINCT ?x) AS ?n) WHERE {{ VALUES ?p {{ {' '.join(f'wdt:{p}' for p in PEOPLE_PIDS)} }} "
        f"?x ?p ?c . ?x wdt:P31 wd:{HUMAN} }} GROUP BY ?c HAVING (COUNT(DISTINCT ?x) >= 3)"
    )
    out = {}
    for row in result.rows:
        cls = WIKIDATA.entity_id(row["c"].value)
        if cls and WIKIDATA.entity_re.match(cls):
            out[cls] = int(float(row["n"].value))
    return dict(sorted(out.items()))


def _answer_result(q: Question) -> dict:
    result = (q.gold or {}).get("result") if (q.gold or {}).get("answerable") else None
    return result or _json(q.rec.get("source_answers")) or {}


def _count_words(q: Question, tokens, consumed, schema, words, properties, aligned) -> None:
    """Step 3: each content word once a question, for the properties its label meets, else shared."""
    props = q.props
    names = {}
    for pid, _, _ in props:
        ps = schema.get(pid)
        names[pid] = [t for t in ((ps.label,) + tuple(ps.aliases) if ps else ()) if t]
    content: list[str] = []
    for i, tok in enumerate(tokens):
        if i in consumed or tok in STOPWORDS or len(tok) < 2 or tok.isdigit():
            continue
        key = stem(tok)
        if key not in content:
            content.append(key)
    meets = {}
    for key in content:
        forms = (key, *base_forms(key))
        meets[key] = {pid for pid in names if any(label_match(f, t) for f in forms for t in names[pid])}
    named = set().union(*meets.values()) if meets else set()
    unnamed = [p for p in props if p[0] not in named] or props
    for key in content:
        words[key] += 1
        if meets[key]:
            aligned["label"] += 1
            rows = [p for p in props if p[0] in meets[key]]
        else:
            aligned["shared"] += 1
            rows = unnamed
        for pid, slot, weight in _spread(rows):
            properties[key][pid][slot] += weight


def gold_order(sparql: str) -> str:
    """How a gold query orders its answers: `DESC` / `ASC` by one value with a LIMIT, `count` by an aggregate,
    `none`."""
    m = _ORDER.search(sparql)
    if m is None or not re.search(r"\bLIMIT\b", sparql[m.end() :], re.I):
        return "none"
    if re.match(r"\s*(?:DESC|ASC)?\s*\(\s*(?:COUNT|SUM|AVG|MAX|MIN)\b", sparql[m.end() :], re.I):
        return "count"
    return "DESC" if re.match(r"\s*DESC\b", sparql[m.end() :], re.I) else "ASC"


def _spread(rows):
    """One question's evidence spread over its (property, direction, position) rows: an equal share a property,
    split over that property's rows; yields (pid, "direction/position", weight)."""
    pids = {r[0] for r in rows}
    for pid, direction, position in rows:
        per = sum(1 for r in rows if r[0] == pid)
        yield pid, f"{direction}/{position}", 1.0 / len(pids) / per


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="output file (default: data/lexicon/wikidata.json.gz)")
    args = parser.parse_args(argv)
    settings = Settings()
    lexicon = mine(settings, log=lambda msg: print(msg, file=sys.stderr))
    out = lexicon.save(args.out or bundled_lexicon_path(settings.data_dir, "wikidata"))
    print(json.dumps(lexicon.meta["counts"]), f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
