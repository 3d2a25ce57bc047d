"""`python -m saga_dspy.schema build | show PID… | check QID PID… | counts`: the schema layer by hand.

build   build the schema index of an endpoint through SPARQL (embedded sample or a URL)
show    print the index entries of properties
check   decide the domain check of an entity against properties (closure, bare and calibrated)
counts  the formal / empirical / unknown counts of an index
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from saga_dspy.cli import ArgumentParser, options_from, run_main

from ..config import add_settings_args, apply_offline_env, settings_from_args
from ..kg.endpoint import open_endpoint
from ..kg.flavours import flavour_for
from ..kg.flavours.wikidata_ids import SUBCLASS
from .build import BuildOptions, build_schema_index
from .carried import carried_properties
from .compat import check_domain, entity_types
from .hierarchy import load_hierarchy
from .index import cached_index_path, index_path, load_schema_index, normalize_pid

COMMON = ["cache_dir", "data_dir", "schema_index"]
BUILD_ROW_CAP = 20000  # pages of the build; a --row-cap given explicitly wins


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m saga_dspy.schema", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    build = sub.add_parser("build", help="build a schema index through SPARQL")
    build.add_argument("--out", type=Path, help="output file (default: the cache path load_schema_index reads)")
    build.add_argument(
        "--sample-pairs", type=int, default=50, help="triples sampled per property for empirical evidence"
    )
    build.add_argument("--min-share", type=float, default=0.2, help="share of the sample a type must cover")
    build.add_argument("--max-types", type=int, default=5, help="empirical classes kept per role")
    build.add_argument("--max-empirical", type=int, help="sample at most this many properties")
    build.add_argument("--no-empirical", action="store_true", help="formal constraints only")
    build.add_argument(
        "--hierarchy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"include the {SUBCLASS} edges (default: for the embedded sample)",
    )
    build.add_argument(
        "--usage",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="include the usage evidence: instances per class with ≥ --usage-min-instances of them "
        "and how many carry each property (exact counts; default: with the hierarchy)",
    )
    build.add_argument(
        "--usage-min-instances",
        type=int,
        default=BuildOptions.usage_min_instances,
        help="classes with fewer instances are not recorded",
    )
    build.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_settings_args(build, ["cache_dir", "data_dir", "endpoint", "kg", "query_timeout", "row_cap", "result_cache"])

    show = sub.add_parser("show", help="print index entries")
    show.add_argument("pids", nargs="+")
    add_settings_args(show, COMMON + ["endpoint", "kg", "schema_coverage", "coverage_seed"])

    check = sub.add_parser("check", help="domain check of an entity against properties")
    check.add_argument("qid")
    check.add_argument("pids", nargs="+")
    add_settings_args(check, COMMON + ["endpoint", "kg", "schema_coverage", "coverage_seed", "query_timeout"])

    counts = sub.add_parser("counts", help="formal / empirical / unknown counts")
    add_settings_args(counts, COMMON + ["endpoint", "kg", "schema_coverage", "coverage_seed"])
    return parser


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    args = _parser().parse_args(argv)
    if args.command == "build":
        return _build(args)
    settings = settings_from_args(args)
    index = load_schema_index(settings)
    if args.command == "counts":
        print(json.dumps({"file": str(index_path(settings)), **index.counts}, indent=2))
        return 0
    if args.command == "show":
        for pid in args.pids:
            schema = index.get(pid)
            if schema is None:
                print(f"{pid}: not in the index")
                continue
            print(f"{schema.label} ({schema.pid}) [{schema.datatype}]: {schema.description}")
            for role in ("domain", "range"):
                ev = getattr(schema, role)
                if ev is None:
                    print(f"  {role}: unknown")
                else:
                    names = ", ".join(f"{index.class_label(c)} ({c})" for c in ev.classes)
                    extra = " ".join(x for x in (ev.relation, ev.status) if x)
                    print(f"  {role} [{ev.source}{' ' + extra if extra else ''}]: {names}")
        return 0
    if args.command == "check":
        flavour = flavour_for(settings.kg)
        qid = flavour.normalise_entity(args.qid)
        pids = [flavour.normalise_property(p) for p in args.pids]
        if qid is None or None in pids:
            bad = args.qid if qid is None else args.pids[pids.index(None)]
            what = "an entity" if qid is None else "a property"
            print(f"error: {bad!r} is not {what} id of {flavour.kg_label} (--kg {settings.kg})", file=sys.stderr)
            return 2
        args.qid, args.pids = qid, pids
        with open_endpoint(settings) as endpoint:
            hierarchy = load_hierarchy(settings, endpoint, index)
            types = entity_types(endpoint, args.qid)
            print(
                f"{args.qid}: types {', '.join(f'{index.class_label(t)} ({t})' for t in types.types) or 'none'}"
                f" [{types.source}{', class' if types.is_class else ''}]"
            )
            carried = carried_properties(endpoint, flavour_for(settings.kg), [args.qid])[args.qid]
            for pid in args.pids:
                schema = index.get(pid)
                ev = schema.domain if schema else None
                for mode in ("closure", "bare", "calibrated"):
                    d = check_domain(
                        types,
                        ev,
                        hierarchy,
                        mode,
                        pid=pid,
                        carried=normalize_pid(pid) in carried,
                    )
                    print(f"  {pid} {mode:10s} {d.outcome.value:10s} {d.reason}")
        return 0
    return 2


def _build(args: argparse.Namespace) -> int:
    extra = {} if "row_cap" in vars(args) else {"row_cap": BUILD_ROW_CAP}
    settings = settings_from_args(args, **extra)
    options = options_from(BuildOptions, args, empirical=not args.no_empirical)
    out = args.out or cached_index_path(settings)
    started = time.monotonic()
    log = lambda msg: print(f"[{time.monotonic() - started:6.1f}s] {msg}", file=sys.stderr)  # noqa: E731
    with open_endpoint(settings) as endpoint:
        index = build_schema_index(endpoint, kg=settings.kg, options=options, log=log)
    index.save(out)
    counts = index.counts
    if args.json:
        print(json.dumps({"out": str(out), "bytes": out.stat().st_size, **counts}))
    else:
        print(
            f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {counts['properties']} properties, "
            f"formal {counts['formal']}, empirical {counts['empirical']}, unknown {counts['unknown']}"
        )
    return 0


def console_main() -> None:
    """The `saga-schema` console script: `python -m saga_dspy.schema`, errors as one line."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
