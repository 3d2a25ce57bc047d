"""Search over entity and property labels: a local SQLite FTS5 index built with
the bundled store, and Wikidata's own `wbsearchentities` API for the live graph.

Ranking of the local index: exact label match, then exact alias match, then
for each phrase of the query the best-known entity with that whole label (longer
phrases first, then popularity), then text relevance (BM25 over label, aliases,
description), then popularity (the number of statements about the entity)."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from .errors import EndpointUnavailable
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
        lc = text.lower()
        kind_sql, kind_args = ("AND e.kind=?", [kind]) if kind else ("", [])
        candidates: dict[str, tuple] = {}
        exact = self._exact(lc, kind_sql, kind_args)
        for row in exact:
            candidates[row[0]] = row
        named = self._named(words, kind_sql, kind_args)
        for qid, (row, _) in named.items():
            candidates.setdefault(qid, row)
        for match in (" ".join(f'"{w}"' for w in words), " OR ".join(f'"{w}"' for w in words)):
            fts = (
                self._db()
                .execute(
                    f"SELECT e.id,e.label,e.description,e.kind,e.datatype,e.popularity,"
                    f" bm25(entity_fts, 10.0, 5.0, 1.0) FROM entity_fts JOIN entity e ON e.rowid=entity_fts.rowid "
                    f"WHERE entity_fts MATCH ? {kind_sql} ORDER BY bm25(entity_fts, 10.0, 5.0, 1.0) LIMIT ?",
                    [match, *kind_args, max(50, limit * 5)],
                )
                .fetchall()
            )
            for row in fts:
                candidates.setdefault(row[0], row)
            if len(candidates) >= limit:
                break

        def rank(row):
            label_exact = row[1].lower() == lc
            alias_exact = not label_exact and lc in self._aliases(row[0])
            if row[0] in named:  # among entities the query names: the longer name, then the better known
                return (not label_exact, not alias_exact, False, -named[row[0]][1], -row[5])
            return (not label_exact, not alias_exact, True, row[6], -row[5])

        ordered = sorted(candidates.values(), key=rank)[:limit]
        return [self._hit(row, -row[6] if row[6] else 0.0) for row in ordered]

    def _named(self, words: list[str], kind_sql: str, kind_args: list) -> dict[str, tuple[tuple, int]]:
        """Entities whose whole label is a phrase of the query: {id: (row, content words in the label)}.

        Text relevance alone ranks "Worshipful Company of Founders" above "Tencent" for the
        query "Tencent company founders" (Tencent came 14th); an entity the query names
        outright is the better link, as Wikidata's own search would return it first."""
        phrases: dict[str, int] = {}
        for n in range(min(len(words) - 1, MAX_PHRASE_WORDS), 0, -1):
            for i in range(len(words) - n + 1):
                phrase = " ".join(words[i : i + n])
                content = sum(1 for w in words[i : i + n] if len(w) > 2 and w not in _STOPWORDS)
                if content:  # "the mayor" names no more than "mayor"; "the" alone names nothing
                    phrases.setdefault(phrase, content)
        if not phrases:
            return {}
        marks = ",".join("?" * len(phrases))
        rows = (
            self._db()
            .execute(
                f"SELECT e.id,e.label,e.description,e.kind,e.datatype,e.popularity, 0.0 FROM entity e "
                f"WHERE e.label_lc IN ({marks}) {kind_sql} ORDER BY e.popularity DESC LIMIT 200",
                [*phrases, *kind_args],
            )
            .fetchall()
        )
        named: dict[str, tuple[tuple, int]] = {}
        for row in rows:  # the best-known entity of each phrase only: homonyms must not crowd out
            phrase = row[1].lower()  # the hits that match the whole query ("Star Wars Episode IV")
            if phrase in phrases:  # popped: later (less known) homonyms are skipped
                named[row[0]] = (row, phrases.pop(phrase))
        return named

    def _exact(self, lc: str, kind_sql: str, kind_args: list) -> list[tuple]:
        """Entities whose label or one of whose aliases is the query, the best known first (both through an index)."""
        columns = "e.id,e.label,e.description,e.kind,e.datatype,e.popularity, 0.0, e.rowid"
        if self._has_alias_table():
            return (
                self._db()
                .execute(
                    f"SELECT {columns} FROM entity e WHERE e.label_lc=? {kind_sql} UNION "
                    f"SELECT {columns} FROM alias a JOIN entity e ON e.rowid=a.entity WHERE a.alias_lc=? {kind_sql} "
                    f"ORDER BY 6 DESC, 8 LIMIT 200",
                    [lc, *kind_args, lc, *kind_args],
                )
                .fetchall()
            )
        return (
            self._db()
            .execute(  # an index built before the alias table: a scan of every row
                f"SELECT {columns} FROM entity e WHERE (e.label_lc=? OR instr(e.aliases_lc, ?) > 0) {kind_sql} "
                f"ORDER BY e.popularity DESC, e.rowid LIMIT 200",
                [lc, f"\n{lc}\n", *kind_args],
            )
            .fetchall()
        )

    def _has_alias_table(self) -> bool:
        known = getattr(self, "_alias_table", None)
        if known is None:
            row = self._db().execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alias'").fetchone()
            known = self._alias_table = row is not None
        return known

    def _aliases(self, qid: str) -> set[str]:
        row = self._db().execute("SELECT aliases_lc FROM entity WHERE id=?", (qid,)).fetchone()
        return {a for a in (row[0].split("\n") if row else []) if a}

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
                return json.loads(response.read().decode("utf-8")).get("search", [])
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
