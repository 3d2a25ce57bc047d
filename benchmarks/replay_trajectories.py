"""Replay a recorded run's trajectories through this checkout's program and print each question's final query.

The controller's actions come from the recorded trajectory by position (tests/helpers/scripted_lm.py's plan), the
answer type from the recorded one; the tools run on the embedded store. Run it in two checkouts and compare the
JSON: the same actions must give the same final queries, sources, steps and counters.

    python benchmarks/replay_trajectories.py results/local-dev30-s11/full/predictions.jsonl [--variant full]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy  # noqa: E402

from saga_dspy.agent.program import SagaProgram  # noqa: E402
from saga_dspy.config import Settings  # noqa: E402
from tests.helpers.scripted_lm import ScriptedLM  # noqa: E402


def replay(path: Path, variant: str, dataset: str, split: str, max_steps: int) -> list[dict]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    plans, types = {}, {}
    for line in lines:
        steps = line.get("trajectory") or []
        plans[line["question"]] = [(s["tool_name"], s.get("tool_args") or {}) for s in steps] or [("stop", {})]
        m = re.match(r"^(.*?)(?: \((\S+)\))?$", line.get("answer_type") or "")
        types[line["question"]] = (m.group(1), m.group(2) or "") if m else ("thing", "")
    settings = Settings(
        dataset=dataset, split=split, variant=variant, max_steps=max_steps, lm_cache=False, mlflow=False
    )
    program = SagaProgram(settings)
    out = []
    with dspy.context(lm=ScriptedLM(plans, types)):
        for line in lines:
            pred = program(question=line["question"])
            out.append(
                {
                    "id": line["id"],
                    "sparql": pred.sparql,
                    "source": pred.final_source,
                    "rewritten_from": pred.rewritten_from,
                    "status": pred.final_status,
                    "steps": [(s["tool_name"], s.get("note")) for s in pred.trajectory],
                    "notes": pred.notes,
                    "counters": {k: v for k, v in pred.counters.items() if k != "seconds"},
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("predictions", type=Path, help="a run's predictions.jsonl")
    parser.add_argument("--variant", default="full")
    parser.add_argument("--dataset", default="qald10")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args(argv)
    print(json.dumps(replay(args.predictions, args.variant, args.dataset, args.split, args.max_steps), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
