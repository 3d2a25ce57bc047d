"""Code-shape figures of `saga_dspy/`: files, largest module, longest function, `if` density in agent/,
`Any` / `getattr` counts, upward imports, KG-name comparisons, lab-notebook mentions, long lines and the
`duplicates` pairs. Rerun it to compare two trees:

    python benchmarks/code_metrics.py [--repo DIR] [--json]

It reads files only (nothing is imported or run); the rules behind the counts live in
tests/helpers/codebase.py, which tests/test_codebase.py holds the package to."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import codebase  # noqa: E402

AGENT_HOT = ("agent/react.py", "agent/episode.py", "agent/program.py")
MAX_LINE = 120
MAX_MODULE = 600


def _duplicates(repo: Path) -> str:
    try:
        out = subprocess.run(
            ["duplicates", "--repo", str(repo / "saga_dspy"), "--most", "1", "--seconds", "120"],
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"n/a ({type(exc).__name__})"
    first = out.strip().splitlines()[0] if out.strip() else ""
    match = re.search(r"(\d+) pairs?", first)
    return match.group(1) if match else ("0" if first.startswith("no duplicates") else first)


def measure(repo: Path, with_duplicates: bool = True) -> dict:
    mods = codebase.modules(repo / "saga_dspy")
    lines = sum(m.lines for m in mods)
    largest = max(mods, key=lambda m: m.lines)
    fn_name, fn_lines, fn_mod = max(((n, k, m.rel) for m in mods for n, k in codebase.functions(m)), key=lambda t: t[1])
    agent = [m for m in mods if m.rel.startswith("agent/")]
    agent_lines = sum(m.lines for m in agent)
    any_count = sum(codebase.names(m, "Any") for m in mods)
    getattr_count = sum(codebase.names(m, "getattr") for m in mods)
    hot = {m.rel: round(100 * codebase.if_keywords(m) / max(m.lines, 1), 1) for m in agent if m.rel in AGENT_HOT}
    return {
        "files": len(mods),
        "lines": lines,
        "largest module": f"{largest.rel} ({largest.lines})",
        "modules over 600 lines": [f"{m.rel} ({m.lines})" for m in mods if m.lines > MAX_MODULE],
        "longest function": f"{fn_mod}:{fn_name} ({fn_lines})",
        "functions over 80 lines": codebase.long_functions(mods, 80),
        "if per 100 lines, agent/": round(100 * sum(codebase.if_keywords(m) for m in agent) / max(agent_lines, 1), 1),
        "if per 100 lines, react/episode/program": hot,
        "Any": f"{any_count} ({1000 * any_count / lines:.1f} per 1k lines)",
        "getattr": f"{getattr_count} ({1000 * getattr_count / lines:.1f} per 1k lines)",
        "upward imports": codebase.upward_imports(mods),
        "upward imports inside eval/": _inner_upward_imports(mods),
        "import circles": codebase.import_cycles(mods),
        "KG-name comparisons outside the flavours/config": len(codebase.kg_name_comparisons(mods)),
        "lab-notebook mentions": len(codebase.notebook_mentions(mods)),
        "lines over 120 characters": sum(1 for m in mods for line in m.text.splitlines() if len(line) > MAX_LINE),
        "duplicates pairs (saga_dspy/)": _duplicates(repo) if with_duplicates else "not measured",
    }


def _inner_upward_imports(mods: list[codebase.Module]) -> list[str] | str:
    try:
        return codebase.inner_upward_imports(mods)
    except KeyError:  # a checkout from before eval/ was cut into parts
        return "eval/ not cut into parts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=codebase.REPO, help="the checkout to measure")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--no-duplicates", action="store_true", help="skip the (slow) duplicates count")
    args = parser.parse_args(argv)
    figures = measure(args.repo.resolve(), with_duplicates=not args.no_duplicates)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for key, value in figures.items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            for item in value:
                print(f"    {item}")
        elif isinstance(value, dict):
            print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
