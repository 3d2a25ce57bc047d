"""Search over entity and property labels: a local SQLite FTS5 index built with
the bundled store, and Wikidata's own `wbsearchentities` API for the live graph.

Ranking of the local index, from the graph's own evidence (no name lists): candidates
are the entities whose label or alias is the query, those whose whole label is a phrase
of it, and full-text matches; each is scored by how well its best name covers the query
(word for word, else the share of the query's rare words it holds and of its own words
the query holds; an alias that is no short form of the label counts less), plus its
priors: how many statements have it as their value (for a property, use it) and how
many statements are about it. Text relevance (BM25) breaks ties."""

from __future__ import annotations

import math
import re
import sqlite3
import threading
import unicodedata
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from .errors import EndpointUnavailable
from .results import load_json
from .store import ensure_store


@dataclass(frozen=True)
class SearchHit:
    id: str
    label: str
    description: str = ""
    kind: str = "item"  # item | property
    datatype: str | None = None
    score: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


class Search(Protocol):
    def search(self, text: str, limit: int = 10, kind: str | None = None) -> list[SearchHit]: ...


# --- the local index -----------------------------------------------------------------


_WORD = re.compile(r"\w+", re.UNICODE)
# Words that name no entity a question means, however many entities carry them as a label.
_STOPWORDS = frozenset(
    "the and for from with who whom whose what which when where how many much was were are has have had did does "
    "not all any that this there their its than into onto also name list give tell".split()
)


# Cost caps: a search text is a name, not a document. Sub-phrases are at most
# MAX_PHRASE_WORDS long, so their number stays linear in the words (and far below
# SQLite's limit on bound variables) whatever a tool argument holds.
MAX_SEARCH_CHARS = 300
MAX_SEARCH_WORDS = 40
MAX_PHRASE_WORDS = 10


# The ranking: how well a name of the entity (label or alias) covers the query, plus the priors the graph
# gives (how often the entity is a statement's value, how many statements it has), on a log scale. The weights
# were chosen on the dev splits' entity linking (benchmarks/bench_linking.py).
PARTIAL_MATCH = 3.0  # any name that is not the query itself, word for word
QUERY_COVER_WEIGHT = 10.0  # × log(share of the query's content words the name holds)
NAME_COVER_WEIGHT = 3.0  # × log(share of the name's words the query holds)
MIN_COVER = 0.05
ALIAS_PENALTY = 0.5  # a match through an alias, not the label
FOREIGN_ALIAS_PENALTY = 1.0  # × share of the alias's words not in the label ("Yankees" for "Americans")
NO_NAME = -12.0  # no name shares a word with the query: a match of the description only
STATEMENTS_WEIGHT = 0.25  # × log(1 + statements about it); links to it weigh 1
NAMED_PER_PHRASE = 3  # homonyms kept per phrase of the query that is some entity's whole label
TEXT_CANDIDATES = 100  # per full-text query


@lru_cache(maxsize=1 << 16)
def _words(text: str) -> tuple[str, ...]:
    """Lower-case words without diacritics or punctuation ("George W. Bush" and "george w bush" are alike)."""
    folded = unicodedata.normalize("NFKD", text.lower())
    return tuple(_WORD.findall("".join(c for c in folded if not unicodedata.combining(c))))


def link_score(query: tuple[str, ...], row: tuple, weights: dict[str, float] | None = None) -> float:
    """How likely the row's entity is the one the query names: the best of its names' match, plus its priors.

    `row` holds popularity at 5, aliases ("\\n"-joined, lower case) at 7 and incoming links at 8. `weights`: how
    specific each query word is (its inverse document frequency in the index; 1 each when not given), so that a
    name holding the query's rare words ("Tencent") covers more of it than one holding its common ones ("company")."""
    query_set = set(query)
    content = {w for w in query_set if w not in _STOPWORDS} or query_set
    weight = weights or {}
    content_weight = sum(weight.get(w, 1.0) for w in content)
    best: float | None = None
    label = _words(row[1] or "")
    for n, name in enumerate((row[1] or "", *(a for a in (row[7] or "").split("\n") if a))):
        name_words = _words(name)
        if n == 0:
            penalty = 0.0
        else:  # an alias made of the label's own words is a short form of it; others name something else too
            foreign = sum(1 for w in name_words if w not in label) / max(1, len(name_words))
            penalty = ALIAS_PENALTY + FOREIGN_ALIAS_PENALTY * foreign
        if name_words == query:
            score = 0.0
        else:
            name_set = set(name_words)
            common = name_set & query_set
            if not common:
                continue
            query_cover = sum(weight.get(w, 1.0) for w in content & name_set) / content_weight
            score = (
                -PARTIAL_MATCH
                + QUERY_COVER_WEIGHT * math.log(max(query_cover, MIN_COVER))
                + NAME_COVER_WEIGHT * math.log(len(common) / len(name_set))
            )
        score -= penalty
        best = score if best is None else max(best, score)
    prior = math.log1p(row[8] or 0) + STATEMENTS_WEIGHT * math.log1p(row[5] or 0)
    return (NO_NAME if best is None else best) + prior


def _reorder(row: tuple) -> tuple:
    """(id, label, description, kind, datatype, popularity, aliases_lc, incoming, bm25, …) from SQL as the ranking's
    (id, label, description, kind, datatype, popularity, bm25, aliases_lc, incoming)."""
    return (*row[:6], row[8], row[6], row[7])


class LocalSearch:
    """The FTS5 label index of the bundled store (read-only, one connection per thread)."""

    def __init__(self, path: Path):
        if not Path(path).exists():
            raise FileNotFoundError(f"no label index at {path}; run `python -m saga_dspy.kg build`")
        self.path = Path(path)
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.db = db
        return db

    def search(self, text: str, limit: int = 10, kind: str | None = None) -> list[SearchHit]:
        text = text.strip()[:MAX_SEARCH_CHARS]
        words = _WORD.findall(text.lower())[:MAX_SEARCH_WORDS]
        if not words:
            return []
        # A bare identifier ("Q42", "P19") is looked up directly.
        if re.fullmatch(r"[QqPp][1-9]\d*", text):
            row = (
                self._db()
                .execute("SELECT id,label,description,kind,datatype,popularity FROM entity WHERE id=?", (text.upper(),))
                .fetchone()
            )
            return [self._hit(row, 1e9)] if row else []
        rows = self._candidates(text.lower(), words, kind)
        query = _words(text)
        weights = self._idf(query)
        scored = sorted(
            ((link_score(query, row, weights), row) for row in rows), key=lambda sr: (-sr[0], sr[1][6], sr[1][0])
        )
        return [self._hit(row, score) for score, row in scored[:limit]]

    def _candidates(self, lc: str, words: list[str], kind: str | None) -> list[tuple]:
        """Rows (id, label, description, kind, datatype, popularity, bm25, aliases_lc, incoming) that may be
        meant: the exact label or alias, the entities whose whole label is a phrase of the query, and text matches
        (label and aliases first, then any column)."""
        kind_sql, kind_args = ("AND e.kind=?", [kind]) if kind else ("", [])
        candidates: dict[str, tuple] = {}
        for row in self._exact(lc, kind_sql, kind_args):
            candidates[row[0]] = row
        for row in self._named(words, kind_sql, kind_args):
            candidates.setdefault(row[0], row)
        terms = [f'"{w}"' for w in words]
        for match in (
            "{label aliases} : (" + " ".join(terms) + ")",
            "{label aliases} : (" + " OR ".join(terms) + ")",
            " ".join(terms),
        ):
            fts = (
                self._db()
                .execute(
                    f"SELECT {self._columns()}, bm25(entity_fts, 10.0, 5.0, 1.0) FROM entity_fts "
                    f"JOIN entity e ON e.rowid=entity_fts.rowid WHERE entity_fts MATCH ? {kind_sql} "
                    f"ORDER BY bm25(entity_fts, 10.0, 5.0, 1.0) LIMIT ?",
                    [match, *kind_args, TEXT_CANDIDATES],
                )
                .fetchall()
            )
            for row in fts:
                candidates.setdefault(row[0], _reorder(row))
        return list(candidates.values())

    def _idf(self, words: tuple[str, ...]) -> dict[str, float]:
        """log(entities / entities whose text holds the word) for each word, from the full-text index's vocabulary."""
        db = self._db()
        if not getattr(self._local, "vocab", False):  # a temporary table: the index itself stays read-only
            db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.entity_vocab USING fts5vocab(main, entity_fts, 'row')")
            self._local.vocab = True
        total = getattr(self, "_entity_count", None)
        if total is None:
            total = self._entity_count = db.execute("SELECT count(*) FROM entity").fetchone()[0]
        unique = sorted(set(words))
        if not unique:
            return {}
        marks = ",".join("?" * len(unique))
        docs = dict(db.execute(f"SELECT term, doc FROM temp.entity_vocab WHERE term IN ({marks})", unique).fetchall())
        return {word: math.log((total + 1) / (docs.get(word, 0) + 1)) for word in unique}

    def _columns(self) -> str:
        """The row's columns but its text relevance (an index before the incoming column reads 0 for it)."""
        incoming = "e.incoming" if self._has_column("incoming") else "0"
        return f"e.id,e.label,e.description,e.kind,e.datatype,e.popularity,e.aliases_lc,{incoming}"

    def _named(self, words: list[str], kind_sql: str, kind_args: list) -> list[tuple]:
        """Entities whose whole label is a phrase of the query, the best-known few of each phrase.

        Text relevance alone ranks "Worshipful Company of Founders" above "Tencent" for the
        query "Tencent company founders" (Tencent came 14th); an entity the query names
        outright is the better link, as Wikidata's own search would return it first."""
        phrases: set[str] = set()
        for n in range(min(len(words) - 1, MAX_PHRASE_WORDS), 0, -1):
            for i in range(len(words) - n + 1):
                # "the mayor" names no more than "mayor"; "the" alone names nothing
                if any(len(w) > 2 and w not in _STOPWORDS for w in words[i : i + n]):
                    phrases.add(" ".join(words[i : i + n]))
        if not phrases:
            return []
        marks = ",".join("?" * len(phrases))
        rows = (
            self._db()
            .execute(
                f"SELECT {self._columns()}, 0.0 FROM entity e WHERE e.label_lc IN ({marks}) {kind_sql} "
                f"ORDER BY {self._prior_sql()} DESC, e.rowid LIMIT 400",
                [*sorted(phrases), *kind_args],
            )
            .fetchall()
        )
        named: list[tuple] = []
        per_phrase: dict[str, int] = {}
        for row in rows:  # homonyms of one phrase must not crowd out the others: the best-known few of each
            phrase = row[1].lower()
            per_phrase[phrase] = per_phrase.get(phrase, 0) + 1
            if per_phrase[phrase] <= NAMED_PER_PHRASE:
                named.append(_reorder(row))
        return named

    def _prior_sql(self) -> str:
        return "e.popularity + e.incoming" if self._has_column("incoming") else "e.popularity"

    def _exact(self, lc: str, kind_sql: str, kind_args: list) -> list[tuple]:
        """Entities whose label or one of whose aliases is the query, the best known first (both through an index)."""
        columns = f"{self._columns()}, 0.0, e.rowid, {self._prior_sql()}"
        if self._has_alias_table():
            rows = (
                self._db()
                .execute(
                    f"SELECT {columns} FROM entity e WHERE e.label_lc=? {kind_sql} UNION "
                    f"SELECT {columns} FROM alias a JOIN entity e ON e.rowid=a.entity WHERE a.alias_lc=? {kind_sql} "
                    f"ORDER BY 11 DESC, 10 LIMIT 200",
                    [lc, *kind_args, lc, *kind_args],
                )
                .fetchall()
            )
        else:
            rows = (
                self._db()
                .execute(  # an index built before the alias table: a scan of every row
                    f"SELECT {columns} FROM entity e WHERE (e.label_lc=? OR instr(e.aliases_lc, ?) > 0) {kind_sql} "
                    f"ORDER BY 11 DESC, e.rowid LIMIT 200",
                    [lc, f"\n{lc}\n", *kind_args],
                )
                .fetchall()
            )
        return [_reorder(row) for row in rows]

    def _has_column(self, name: str) -> bool:
        columns = getattr(self, "_entity_columns", None)
        if columns is None:
            columns = self._entity_columns = {r[1] for r in self._db().execute("PRAGMA table_info(entity)")}
        return name in columns

    def _has_alias_table(self) -> bool:
        known = getattr(self, "_alias_table", None)
        if known is None:
            row = self._db().execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alias'").fetchone()
            known = self._alias_table = row is not None
        return known

    @staticmethod
    def _hit(row, score: float) -> SearchHit:
        return SearchHit(row[0], row[1] or row[0], row[2] or "", row[3], row[4], float(score))


# --- live Wikidata -----------------------------------------------------------------------


class WikidataApiSearch:
    """Wikidata's `wbsearchentities` API (items and properties), for the live graph."""

    def __init__(
        self, api_url: str = "https://www.wikidata.org/w/api.php", user_agent: str = "saga-dspy", timeout: float = 10.0
    ):
        self.api_url = api_url
        self.user_agent = user_agent
        self.timeout = timeout

    def _call(self, text: str, limit: int, entity_type: str) -> list[dict]:
        params = urllib.parse.urlencode(
            {
                "action": "wbsearchentities",
                "search": text,
                "language": "en",
                "uselang": "en",
                "type": entity_type,
                "limit": min(limit, 50),
                "format": "json",
            }
        )
        request = urllib.request.Request(f"{self.api_url}?{params}", headers={"User-Agent": self.user_agent})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return load_json(response.read()).get("search", [])
        except (OSError, ValueError) as exc:
            raise EndpointUnavailable(f"Wikidata search API failed: {exc}") from exc

    def search(self, text: str, limit: int = 10, kind: str | None = None) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for entity_type in ["item", "property"] if kind is None else [kind]:
            for rank, obj in enumerate(self._call(text, limit, entity_type)):
                hits.append(
                    SearchHit(
                        obj["id"],
                        obj.get("label", obj["id"]),
                        obj.get("description", ""),
                        entity_type,
                        obj.get("datatype"),
                        float(-rank),
                    )
                )
        if kind is None:  # interleave: items first by rank, properties after equal ranks
            hits.sort(key=lambda h: (-h.score, h.kind != "item"))
        return hits[:limit]


WIKIDATA_HOSTS = {"query.wikidata.org", "www.wikidata.org", "wikidata.org"}


def open_search(settings, endpoint=None) -> Search:
    """The search that fits the endpoint: Wikidata's API for the live graph, the bundled index for the embedded
    sample; `auto` with any other URL is a ValueError (the bundled index would answer for a graph it does not
    know)."""
    choice = settings.search
    if choice == "auto":
        host = urllib.parse.urlparse(settings.endpoint).hostname if not settings.is_embedded else None
        if host is not None and host not in WIKIDATA_HOSTS:
            raise ValueError(
                f"--search auto: {settings.endpoint} is not Wikidata's own endpoint, and the bundled search index "
                f"knows only the embedded sample's labels; choose one: --search wikidata-api (Wikidata's labels, "
                f"for a Wikidata copy such as QLever's), --search local (the bundled index, for a server over the "
                f"sample), or --search URL (a wbsearchentities API)"
            )
        choice = "wikidata-api" if host in WIKIDATA_HOSTS else "local"
    if choice == "wikidata-api":
        return WikidataApiSearch(user_agent=settings.user_agent)
    if choice == "local":
        store = getattr(endpoint, "store_path", None) or ensure_store(settings)
        return LocalSearch(Path(store) / "search.sqlite")
    if choice.startswith(("http://", "https://")):
        return WikidataApiSearch(api_url=choice, user_agent=settings.user_agent)
    raise ValueError(f"search must be auto, local, wikidata-api or an API URL, not {choice!r}")
