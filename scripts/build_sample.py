#!/usr/bin/env python3
"""Build the bundled Wikidata sample (`data/wikidata-sample/`) from `../shared/data/wikidata`.

The output uses Wikidata's own RDF vocabulary (wd:, wdt:, p:/ps:/pq: statement
nodes, rdfs:label / schema:description / skos:altLabel @en, property entities
with wikibase:propertyType and wikibase:directClaim, P2302 type constraints as
real statements with P2308 / P2309 / P2316 qualifiers), so queries written for
query.wikidata.org run unchanged. Deterministic: same sources, same bytes.

    python scripts/build_sample.py --sources ../shared/data
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import quote

csv.field_size_limit(sys.maxsize)

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
P = "http://www.wikidata.org/prop/"
PS = "http://www.wikidata.org/prop/statement/"
PQ = "http://www.wikidata.org/prop/qualifier/"
WDS = "http://www.wikidata.org/entity/statement/"
WIKIBASE = "http://wikiba.se/ontology#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SCHEMA_DESCRIPTION = "http://schema.org/description"
SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
GEO_WKT = "http://www.opengis.net/ont/geosparql#wktLiteral"

# Wikidata items used in constraint statements.
SUBJECT_TYPE = "Q21503250"
VALUE_TYPE = "Q21510865"
RELATION_QID = {
    "instance_of": "Q21503252",
    "subclass_of": "Q21514624",
    "instance_or_subclass_of": "Q30208840",
}
STATUS_QID = {"mandatory": "Q21502408", "suggestion": "Q62026391"}

DATATYPES = {
    "wikibase-item": "WikibaseItem",
    "wikibase-property": "WikibaseProperty",
    "wikibase-lexeme": "WikibaseLexeme",
    "wikibase-form": "WikibaseForm",
    "wikibase-sense": "WikibaseSense",
    "external-id": "ExternalId",
    "string": "String",
    "quantity": "Quantity",
    "time": "Time",
    "url": "Url",
    "commonsMedia": "CommonsMedia",
    "monolingualtext": "Monolingualtext",
    "globe-coordinate": "GlobeCoordinate",
    "math": "Math",
    "geo-shape": "GeoShape",
    "tabular-data": "TabularData",
    "musical-notation": "MusicalNotation",
}
# Statements about property entities that the sample keeps (the rest is
# formatter URLs, proposal links and the like).
PROPERTY_CLAIMS = {"P31", "P279", "P1647", "P1855", "P1629", "P1659", "P2302", "P1696"}

ENTITY_ID = re.compile(r"^[QP][1-9][0-9]*$")
LANG_TAG = re.compile(r"^[a-z]{2,3}(-[a-z0-9-]+)?$")
SUFFIX = re.compile(r"^(?P<text>.*) \((?P<tag>xsd:[A-Za-z]+|[a-z]{2,3}(?:-[a-z0-9-]+)?)\)$", re.S)
QUOTED_LANG = re.compile(r'^"(?P<text>.*)"@(?P<lang>[a-z]{2,3}(?:-[a-z0-9-]+)?)$', re.S)
KGTK_STRING = re.compile(r"^'(?P<text>.*)'@(?P<lang>[a-z-]+)$", re.S)
POINT = re.compile(r"^POINT\((?P<lon>-?[0-9.]+) (?P<lat>-?[0-9.]+)\)$")
DATE = re.compile(r"^[+-]?\d{1,12}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z?$")
NUMBER = re.compile(r"^[+-]?\d+(\.\d+)?$")


# --- N-Triples terms ------------------------------------------------------------


def iri(value: str) -> str:
    safe = quote(value, safe=":/?#[]@!$&'()*+,;=%-._~")
    return f"<{safe}>"


def lit(text: str, datatype: str | None = None, lang: str | None = None) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    if lang:
        return f'"{escaped}"@{lang}'
    if datatype:
        return f'"{escaped}"^^<{datatype}>'
    return f'"{escaped}"'


def entity(qid: str) -> str:
    return f"<{WD}{qid}>"


def normalise_date(text: str) -> str | None:
    text = text.strip()
    if not DATE.match(text):
        return None
    return text if text.endswith("Z") else text + "Z"


def object_term(value: str, kind: str) -> str | None:
    """The RDF term Wikidata's truthy triple would carry for a source value."""
    value = value.strip()
    if kind in ("item", "prop"):
        return entity(value) if ENTITY_ID.match(value) else None
    if kind == "date":
        date = normalise_date(value)
        return lit(date, XSD + "dateTime") if date else lit(value)
    if kind == "number":
        return lit(value, XSD + "decimal") if NUMBER.match(value) else lit(value)
    if kind == "url":
        return iri(value)
    return literal_term(value)


def literal_term(value: str) -> str:
    if value.startswith("wd:") and ENTITY_ID.match(value[3:]):
        return entity(value[3:])
    point = POINT.match(value)
    if point:
        return lit(f"Point({point['lon']} {point['lat']})", GEO_WKT)
    quoted = QUOTED_LANG.match(value)
    if quoted:
        return lit(quoted["text"], lang=quoted["lang"])
    suffix = SUFFIX.match(value)
    if suffix:
        text, tag = suffix["text"], suffix["tag"]
        if tag == "xsd:dateTime":
            date = normalise_date(text)
            return lit(date, XSD + "dateTime") if date else lit(text)
        if tag.startswith("xsd:"):
            return lit(text, XSD + tag[4:])
        if LANG_TAG.match(tag):
            return lit(text, lang=tag)
    if value.startswith(("http://", "https://")) and " " not in value:
        return iri(value)
    return lit(value)


# --- readers -------------------------------------------------------------------------


def read_tsv(path: Path, header: bool = False):
    with (
        gzip.open(path, "rt", encoding="utf-8", newline="")
        if path.suffix == ".gz"
        else open(path, encoding="utf-8", newline="") as handle
    ):
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if header:
            next(reader, None)
        yield from reader


def kgtk_text(value: str) -> str:
    value = value.strip()
    if value.startswith('"') and value.endswith('"'):
        value = value[1:-1].replace('""', '"').replace('\\"', '"')
    match = KGTK_STRING.match(value)
    return match["text"].replace("\\'", "'") if match else value


def statement_id(*parts: str) -> str:
    digest = hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]
    return f"<{WDS}{parts[0]}-{digest}>"


class Sample:
    """N-Triples lines per output file, deduplicated, in source order (a statement's
    lines stay together, which keeps the compressed files small)."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, None]] = {}
        self.counts: Counter[str] = Counter()

    def add(self, file: str, s: str, p: str, o: str) -> None:
        self.files.setdefault(file, {})[f"{s} <{p}> {o} .\n"] = None

    def statement(
        self, file: str, subject: str, pid: str, value: str, qualifiers: list[tuple[str, str]], key: str
    ) -> None:
        """A truthy triple plus its full statement node, as Wikidata's RDF dump has them."""
        s = entity(subject)
        self.add(file, s, WDT + pid, value)
        node = statement_id(subject, pid, key)
        self.add(file, s, P + pid, node)
        self.add(file, node, PS + pid, value)
        self.add(file, node, WIKIBASE + "rank", f"<{WIKIBASE}NormalRank>")
        for qpid, qvalue in qualifiers:
            self.add(file, node, PQ + qpid, qvalue)
        self.counts["statements"] += 1
        self.counts["qualifiers"] += len(qualifiers)

    def write(self, out: Path) -> dict[str, int]:
        sizes = {}
        for name, lines in sorted(self.files.items()):
            path = out / f"{name}.nt.gz"
            with (
                open(path, "wb") as raw,
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
            ):
                gz.write("".join(lines).encode("utf-8"))
            sizes[name] = len(lines)
        return sizes


def build(sources: Path, out: Path) -> dict:
    wd = sources / "wikidata"
    sample = Sample()
    used_properties: set[str] = set()

    # 1. Entity statements with qualifiers.
    for row in read_tsv(wd / "kg" / "triples.tsv.gz"):
        if len(row) < 4:
            continue
        subject, pid, value, kind = row[0], row[1], row[2], row[3]
        qualifier_json = row[5] if len(row) > 5 else ""
        if not ENTITY_ID.match(subject) or not ENTITY_ID.match(pid):
            sample.counts["skipped_rows"] += 1
            continue
        term = object_term(value, kind)
        if term is None:
            sample.counts["skipped_rows"] += 1
            continue
        qualifiers: list[tuple[str, str]] = []
        if qualifier_json:
            for group in json.loads(qualifier_json):
                for qpid, values in sorted(group.items()):
                    for qvalue, qkind in values:
                        qterm = object_term(str(qvalue), qkind)
                        if qterm is not None and ENTITY_ID.match(qpid):
                            qualifiers.append((qpid, qterm))
                            used_properties.add(qpid)
        sample.statement("statements", subject, pid, term, sorted(set(qualifiers)), value)
        used_properties.add(pid)

    # 2. The class hierarchy (direct P279 edges, truthy triples only).
    for row in read_tsv(wd / "hierarchy" / "p279_edges_union.tsv.gz", header=True):
        if len(row) >= 2 and row[0].startswith("Q") and ENTITY_ID.match(row[0]) and ENTITY_ID.match(row[1]):
            sample.add("hierarchy", entity(row[0]), WDT + "P279", entity(row[1]))
            sample.counts["p279_edges"] += 1

    # 3. Property entities.
    datatypes: dict[str, str] = {}
    for row in read_tsv(wd / "properties" / "metadata.property.datatypes.tsv.gz", header=True):
        if len(row) >= 4 and ENTITY_ID.match(row[1]) and row[3] in DATATYPES:
            datatypes[row[1]] = row[3]
    properties = sorted(set(datatypes) | used_properties, key=lambda x: int(x[1:]))
    for pid in properties:
        s = entity(pid)
        sample.add("properties", s, RDF_TYPE, f"<{WIKIBASE}Property>")
        sample.add("properties", s, WIKIBASE + "directClaim", f"<{WDT}{pid}>")
        sample.add("properties", s, WIKIBASE + "claim", f"<{P}{pid}>")
        sample.add("properties", s, WIKIBASE + "statementProperty", f"<{PS}{pid}>")
        sample.add("properties", s, WIKIBASE + "qualifier", f"<{PQ}{pid}>")
        if pid in datatypes:
            sample.add("properties", s, WIKIBASE + "propertyType", f"<{WIKIBASE}{DATATYPES[datatypes[pid]]}>")
    for row in read_tsv(wd / "properties" / "claims.properties.tsv.gz", header=True):
        if len(row) < 4:
            continue
        _, subject, pid, value = row[:4]
        if pid not in PROPERTY_CLAIMS or not ENTITY_ID.match(subject) or not ENTITY_ID.match(value):
            continue
        if pid == "P2302" and value in (SUBJECT_TYPE, VALUE_TYPE):
            continue  # written with their class qualifiers below
        sample.statement("properties", subject, pid, entity(value), [], value)

    # 4. Type constraints (P2302) with their classes, relation and status.
    constraints = json.loads((wd / "constraints" / "type_constraints_union.json").read_text())
    constraint_counts: Counter[str] = Counter()
    for pid in sorted(constraints, key=lambda x: int(x[1:]) if ENTITY_ID.match(x) else 0):
        if not ENTITY_ID.match(pid):
            continue
        for side, kind_qid in (("subject", SUBJECT_TYPE), ("value", VALUE_TYPE)):
            entries = constraints[pid].get(side) or []
            if not entries:
                continue
            classes = sorted({c for e in entries for c in e.get("classes", []) if ENTITY_ID.match(c)})
            if not classes:
                continue
            formal = next((e for e in entries if e.get("relation")), None)
            qualifiers = [("P2308", entity(c)) for c in classes]
            if formal:
                qualifiers.append(("P2309", entity(RELATION_QID[formal["relation"]])))
                if formal.get("status") in STATUS_QID:
                    qualifiers.append(("P2316", entity(STATUS_QID[formal["status"]])))
            sample.statement("properties", pid, "P2302", entity(kind_qid), sorted(qualifiers), kind_qid)
            constraint_counts[side] += 1

    # 5. Terms: labels, descriptions, aliases (English).
    labels: dict[str, str] = {}
    for row in read_tsv(wd / "hierarchy" / "labels_en_union.tsv.gz", header=True):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            labels.setdefault(row[0], row[1])
    for row in read_tsv(wd / "properties" / "labels.property.en.tsv.gz", header=True):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            labels[row[0]] = kgtk_text(row[1])
    for row in read_tsv(wd / "kg" / "labels.tsv.gz"):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            labels[row[0]] = row[1]
    descriptions: dict[str, str] = {}
    for row in read_tsv(wd / "kg" / "descriptions.tsv.gz"):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            descriptions[row[0]] = row[1]
    for row in read_tsv(wd / "properties" / "descriptions.property.en.tsv.gz", header=True):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            descriptions[row[0]] = kgtk_text(row[1])
    aliases: set[tuple[str, str]] = set()
    for row in read_tsv(wd / "kg" / "aliases.tsv.gz"):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            aliases.add((row[0], row[1]))
    for row in read_tsv(wd / "properties" / "aliases.property.en.tsv.gz", header=True):
        if len(row) >= 2 and ENTITY_ID.match(row[0]):
            aliases.add((row[0], kgtk_text(row[1])))
    for qid, text in labels.items():
        if text.strip():
            sample.add("terms", entity(qid), RDFS_LABEL, lit(text.strip(), lang="en"))
    for qid, text in descriptions.items():
        if text.strip():
            sample.add("terms", entity(qid), SCHEMA_DESCRIPTION, lit(text.strip(), lang="en"))
    for qid, text in sorted(aliases):
        if text.strip() and text.strip() != labels.get(qid):
            sample.add("terms", entity(qid), SKOS_ALT, lit(text.strip(), lang="en"))

    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.nt.gz"):
        old.unlink()
    triples = sample.write(out)
    licences = out / "licenses"
    licences.mkdir(exist_ok=True)
    shutil.copyfile(wd / "properties" / "LICENSE", licences / "LICENSE-wikidata-property-finder-MIT")
    return {
        "triples_per_file": triples,
        "triples": sum(triples.values()),
        "statements": sample.counts["statements"],
        "qualifier_values": sample.counts["qualifiers"],
        "skipped_source_rows": sample.counts["skipped_rows"],
        "p279_edges": sample.counts["p279_edges"],
        "properties": len(properties),
        "type_constraints": dict(constraint_counts),
        "labels": len(labels),
        "descriptions": len(descriptions),
        "aliases": len(aliases),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=Path, default=Path("../shared/data"), help="the shared data folder")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "wikidata-sample")
    args = parser.parse_args(argv)
    counts = build(args.sources, args.out)
    (args.out / "counts.json").write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
    print(json.dumps(counts, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
