"""The label index's exact alias match goes through the alias table's index; old indexes still open and are rebuilt."""

from __future__ import annotations

import sqlite3

import pyoxigraph
import pytest
from conftest import make_settings

from saga_dspy.kg import store as store_module
from saga_dspy.kg.label_index import LABEL_INDEX_VERSION, build_label_index, label_index_version
from saga_dspy.kg.search import LocalSearch

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
DESC = "http://schema.org/description"


def _tiny_store(store) -> None:
    def add(s, p, o):
        store.add(
            pyoxigraph.Quad(pyoxigraph.NamedNode(WD + s), pyoxigraph.NamedNode(p), pyoxigraph.Literal(o, language="en"))
        )

    add("Q42", LABEL, "Douglas Adams")
    add("Q42", ALT, "Douglas Noel Adams")
    add("Q42", ALT, "DNA")
    add("Q42", DESC, "English writer")
    add("Q1", LABEL, "universe")
    add("Q1", ALT, "cosmos")
    add("Q2", LABEL, "Cosmos")  # a label equal to another entity's alias: both are exact hits
    add("Q3", LABEL, "cosmology")
    add("Q3", DESC, "study of the cosmos")
    links = [("Q3", "P31", "Q1"), ("Q2", "P279", "Q3")] + [(f"Q{n}", "P361", "Q1") for n in range(10, 20)]
    for subject, prop, obj in links:  # Q10…Q19 have no label: not entries of the index, but links to Q1
        store.add(
            pyoxigraph.Quad(
                pyoxigraph.NamedNode(WD + subject), pyoxigraph.NamedNode(WDT + prop), pyoxigraph.NamedNode(WD + obj)
            )
        )


def _index(tmp_path, name="search.sqlite"):
    store = pyoxigraph.Store()
    _tiny_store(store)
    path = tmp_path / name
    build_label_index(store, path)
    return path


def test_exact_alias_match_uses_the_alias_table_index(tmp_path):
    path = _index(tmp_path)
    assert label_index_version(path) == LABEL_INDEX_VERSION == 3
    db = sqlite3.connect(path)
    assert db.execute(
        "SELECT alias_lc FROM alias JOIN entity e ON e.rowid=alias.entity WHERE e.id='Q42' ORDER BY alias_lc"
    ).fetchall() == [("dna",), ("douglas noel adams",)]
    plan = " ".join(
        str(r) for r in db.execute("EXPLAIN QUERY PLAN SELECT entity FROM alias WHERE alias_lc=?", ("dna",))
    )
    assert "alias_alias_lc" in plan  # an index search, not a scan
    db.close()
    search = LocalSearch(path)
    assert search.search("DNA", limit=3)[0].id == "Q42"
    assert {h.id for h in search.search("cosmos", limit=5)[:2]} == {"Q1", "Q2"}  # the alias and the label


def test_an_index_without_the_alias_table_still_answers_the_same(tmp_path):
    new = LocalSearch(_index(tmp_path))
    old_path = _index(tmp_path, "old.sqlite")
    db = sqlite3.connect(old_path)
    db.executescript("DROP TABLE alias; PRAGMA user_version = 0;")
    db.close()
    old = LocalSearch(old_path)
    assert label_index_version(old_path) == 0
    for text in ("DNA", "cosmos", "Douglas Noel Adams", "universe", "cosmology"):
        assert [h.id for h in old.search(text, limit=5)] == [h.id for h in new.search(text, limit=5)], text


def test_the_index_counts_statements_about_and_links_to_each_entity(tmp_path):
    db = sqlite3.connect(_index(tmp_path))
    counts = {r[0]: r[1:] for r in db.execute("SELECT id, popularity, incoming FROM entity")}
    db.close()
    assert counts["Q1"] == (2, 11)  # its label and alias; eleven statements have it as their value
    assert counts["Q2"] == (2, 0) and counts["Q3"] == (3, 1)  # label, description, a statement


def test_a_well_linked_entity_outranks_an_unlinked_one_of_the_same_name(tmp_path):
    """The text "cosmos" is Q1's alias and Q2's label: Q1, which many statements have as their value, comes first."""
    assert [h.id for h in LocalSearch(_index(tmp_path)).search("cosmos", limit=5)][:2] == ["Q1", "Q2"]


def test_the_index_build_is_deterministic(tmp_path):
    assert _index(tmp_path, "a.sqlite").read_bytes() == _index(tmp_path, "b.sqlite").read_bytes()


def test_a_ready_store_with_an_old_index_is_reindexed(tmp_path, monkeypatch):
    settings = make_settings(cache_dir=tmp_path / "cache")
    root = tmp_path / "cache" / "stores" / "wikidata-sample-test"
    monkeypatch.setattr(store_module, "store_path", lambda s: root)
    root.parent.mkdir(parents=True)
    store = pyoxigraph.Store(str(root))
    _tiny_store(store)
    store.flush()
    del store
    (root / store_module.READY).write_text("built\n")
    sqlite3.connect(root / "search.sqlite").close()  # an old index: no version, no alias table
    monkeypatch.setattr(store_module, "_build", lambda *a, **k: pytest.fail("the store itself must not be rebuilt"))
    assert store_module.ensure_store(settings) == root
    assert label_index_version(root / "search.sqlite") == LABEL_INDEX_VERSION
    assert LocalSearch(root / "search.sqlite").search("DNA", limit=1)[0].id == "Q42"
    assert store_module.ensure_store(settings) == root  # current now: nothing rebuilt
