"""The label index of the bundled store: labels, aliases, descriptions and the graph's own priors (statements
about an entity, links to it) in SQLite FTS5, and an indexed alias table for exact matches; built once with the
store (kg.store) and read by kg.search.LocalSearch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .prefixes import WD, WDT, WIKIBASE

_TERMS_QUERY = """
SELECT ?e ?kind ?text WHERE {
  { ?e <http://www.w3.org/2000/01/rdf-schema#label> ?text . BIND("label" AS ?kind) }
  UNION { ?e <http://www.w3.org/2004/02/skos/core#altLabel> ?text . BIND("alias" AS ?kind) }
  UNION { ?e <http://schema.org/description> ?text . BIND("description" AS ?kind) }
}"""


_DATATYPE_QUERY = "SELECT ?e ?t WHERE { ?e <http://wikiba.se/ontology#propertyType> ?t }"


def _local_id(iri: str) -> str | None:
    return iri[len(WD) :] if iri.startswith(WD) else None


# 2: the alias table (an index for the exact alias match); 3: the incoming column. A store with another is re-indexed.
LABEL_INDEX_VERSION = 3


def label_index_version(path: Path) -> int:
    """The format version of the label index at `path` (its sqlite user_version; 0 before versions, or no file)."""
    if not Path(path).is_file():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def build_label_index(store, path: Path) -> None:
    """Write the FTS5 index for every labelled entity of a pyoxigraph store."""
    entries = _terms(store)
    datatypes = {}
    for row in store.query(_DATATYPE_QUERY):
        qid = _local_id(row["e"].value)
        if qid:
            datatypes[qid] = row["t"].value.removeprefix(WIKIBASE)
    popularity, incoming = _priors(store, entries)
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE entity(rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, label TEXT, label_lc TEXT,
                            aliases TEXT, aliases_lc TEXT, description TEXT, kind TEXT, datatype TEXT,
                            popularity INTEGER, incoming INTEGER);
        CREATE INDEX entity_label_lc ON entity(label_lc);
        CREATE TABLE alias(alias_lc TEXT NOT NULL, entity INTEGER NOT NULL);  -- entity: entity.rowid
        CREATE INDEX alias_alias_lc ON alias(alias_lc);
        CREATE VIRTUAL TABLE entity_fts USING fts5(label, aliases, description, content='entity',
                                                   tokenize='unicode61 remove_diacritics 2');
        """
    )
    rows = []
    alias_rows: list[tuple[str, int]] = []
    for rowid, qid in enumerate(sorted(entries, key=lambda x: (x[0], int(x[1:]) if x[1:].isdigit() else 0)), 1):
        e = entries[qid]
        aliases = sorted(set(e["aliases"]))
        alias_rows.extend((a, rowid) for a in sorted({a.lower() for a in aliases}))
        rows.append(
            (
                rowid,
                qid,
                e["label"],
                e["label"].lower(),
                "\n".join(aliases),
                "\n" + "\n".join(a.lower() for a in aliases) + "\n",
                e["description"],
                "property" if qid.startswith("P") else "item",
                datatypes.get(qid),
                popularity.get(qid, 0),
                incoming.get(qid, 0),
            )
        )
    db.executemany(
        "INSERT INTO entity(rowid,id,label,label_lc,aliases,aliases_lc,description,kind,datatype,popularity,incoming)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    db.executemany("INSERT INTO alias(alias_lc, entity) VALUES (?,?)", alias_rows)
    db.execute(
        "INSERT INTO entity_fts(rowid,label,aliases,description) SELECT rowid,label,aliases,description FROM entity"
    )
    db.execute(f"PRAGMA user_version = {LABEL_INDEX_VERSION}")
    db.commit()
    db.close()


def _terms(store) -> dict[str, dict]:
    """Each entity's label, aliases and description, by id."""
    entries: dict[str, dict] = {}
    for row in store.query(_TERMS_QUERY):
        qid = _local_id(row["e"].value)
        if qid is None:
            continue
        entry = entries.setdefault(qid, {"label": "", "aliases": [], "description": ""})
        kind, text = row["kind"].value, row["text"].value
        if kind == "label":
            entry["label"] = text
        elif kind == "alias":
            entry["aliases"].append(text)
        else:
            entry["description"] = text
    return entries


def _priors(store, entries: dict[str, dict]) -> tuple[dict[str, int], dict[str, int]]:
    """One pass over the graph: the triples about each entity (popularity), and the triples whose value it is
    (incoming; for a property, the direct triples that use it), the priors of the search's ranking."""
    from pyoxigraph import NamedNode  # lazy: the store's engine is loaded only to build

    popularity: dict[str, int] = {}
    incoming: dict[str, int] = {}
    for quad in store.quads_for_pattern(None, None, None):
        subject, obj, predicate = quad.subject, quad.object, quad.predicate.value
        if isinstance(subject, NamedNode) and subject.value.startswith(WD):
            qid = subject.value[len(WD) :]
            if qid in entries:
                popularity[qid] = popularity.get(qid, 0) + 1
        if isinstance(obj, NamedNode) and obj.value.startswith(WD):
            qid = obj.value[len(WD) :]
            if qid in entries:
                incoming[qid] = incoming.get(qid, 0) + 1
        if predicate.startswith(WDT):
            pid = predicate[len(WDT) :]
            if pid in entries:
                incoming[pid] = incoming.get(pid, 0) + 1
    return popularity, incoming
