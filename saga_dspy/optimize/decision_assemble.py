"""`python -m saga_dspy.optimize assemble DIR...`: the decisions compiled one by one put into one program.

Each DIR is a `decisions` compile's output (`decision.json`: the compiled decision, whether it beat the default on
its valset). The kept ones (every one with `--all`) go into one program.json (`agent.decisions.CompiledDecisions`:
which decisions are compiled, their instructions and demos) on top of the base program (`--program`, else the
default), which `eval --program` / `ask --program` load as compiled. A later DIR of the same decision replaces an
earlier one. config.json beside it records the sources and each one's figures.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saga_dspy.agent.decisions import FORMAT, CompiledDecision, CompiledDecisions
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.eval.running.records import write_json
from saga_dspy.eval.running.rundir import locked_run_dir
from saga_dspy.optimize.candidates import save_program
from saga_dspy.optimize.compile_run import PROGRAM
from saga_dspy.optimize.decision_compile import DECISION_FILE
from saga_dspy.optimize.sets import OptimizeError


@dataclass
class Assembled:
    """The assembled program's path, the decisions it holds, and the compiles left out (not better than default)."""

    program_path: Path
    decisions: CompiledDecisions
    left_out: list[str] = field(default_factory=list)


def read_decision(path: Path) -> tuple[CompiledDecision, bool, dict[str, Any]]:
    """(the compiled decision of a compile directory, whether it was kept, its figures); an OptimizeError in one line
    for a directory that holds none."""
    file = path / DECISION_FILE if path.is_dir() else path
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
        parsed = CompiledDecisions.from_state({"format": FORMAT, "decisions": {record["decision"]: record["state"]}})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OptimizeError(f"{file} is no compiled decision ({type(exc).__name__}: {exc})") from None
    if parsed is None or not parsed.decisions:
        raise OptimizeError(f"{file} holds no compiled decision")
    return parsed.decisions[0], bool(record.get("kept")), dict(record.get("metrics") or {})


def assemble(
    settings: Settings, sources: Sequence[str | Path], out: str | Path, *, include_all: bool = False, stream=None
) -> Assembled:
    """One program from the compiled decisions in `sources` (see the module docstring)."""
    stream = stream or sys.stdout
    out_dir = Path(out)
    decisions, left_out, figures = CompiledDecisions(), [], []
    for source in map(Path, sources):
        decision, kept, metrics = read_decision(source)
        summary = {k: metrics.get(k) for k in ("optimizer", "default_accuracy", "compiled_accuracy", "n_valset")}
        figures.append({"source": str(source), "decision": decision.name, "kept": kept, **summary})
        if not kept and not include_all:
            left_out.append(f"{decision.name} ({source}: not better than the default on its valset)")
            continue
        decisions = decisions.with_decision(decision)
    with locked_run_dir(out_dir):
        program = SagaProgram(settings)  # its services open on first use: none is used here
        base = program.compiled_decisions or CompiledDecisions()
        for decision in decisions.decisions:
            base = base.with_decision(decision)
        program.use_decisions(base)
        path = save_program(program, out_dir / PROGRAM)
        write_json(
            out_dir / "config.json",
            {
                "kind": "optimize",
                "compiled": "assembled decisions",
                "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "variant": settings.variant,
                "dataset": settings.dataset,
                "base_program": str(settings.program) if settings.program else None,
                "decisions": base.names(),
                "sources": figures,
                "left_out": left_out,
                "program": str(path),
            },
        )
    print(f"program: {path} (compiled decisions: {', '.join(base.names()) or 'none'})", file=stream)
    for line in left_out:
        print(f"left out: {line}; --all takes it anyway", file=stream)
    return Assembled(path, base, left_out)


__all__ = ["Assembled", "assemble", "read_decision"]
