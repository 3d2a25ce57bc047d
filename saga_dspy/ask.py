"""`python -m saga_dspy.ask "QUESTION"`: one question through the SAGA agent, traced as it runs.

Prints each step (thought, tool, arguments, a short observation) as it happens, then the
final SPARQL, the answers with their labels and the counters. `--json` prints one JSON
object instead. Default: the embedded Wikidata sample and the bundled local model.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any, TextIO, cast

from saga_dspy.agent.authorship import Author
from saga_dspy.agent.demos import describe_pool
from saga_dspy.agent.pools import check_pool_choice
from saga_dspy.agent.program import SagaProgram
from saga_dspy.cli import ArgumentParser, append_help, run_main
from saga_dspy.config import add_settings_args, apply_offline_env, run_flags, settings_from_args
from saga_dspy.eval.loading.datasets import catalogue_text
from saga_dspy.eval.preflight import preflight
from saga_dspy.eval.running.run_inputs import check_file_inputs
from saga_dspy.kg.flavours import Flavour, flavour_for
from saga_dspy.kg.results import AskResult, SelectResult
from saga_dspy.lm import cli_lm
from saga_dspy.services import KgServices
from saga_dspy.terminal_text import EscapingWriter, escape_json_controls

# every run flag but those of a run over a benchmark's questions (its split, size, outputs and tracking)
SETTINGS_FLAGS = run_flags(
    own=(
        "freeze_on_first_use",
        "split",
        "limit",
        "num_threads",
        "metric_mode",
        "out",
        "mlflow",
        "mlflow_uri",
        "trace",
        "trace_writer",
        "max_infra_failures",
    )
)
OBSERVATION_LINES = 8
OBSERVATION_CHARS = 600


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m saga_dspy.ask",
        description="Answer one question with the SAGA agent and show its trace.",
    )
    parser.add_argument("question", help="the natural-language question")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the trace")
    parser.add_argument("--full-observations", action="store_true", help="do not shorten observations in the trace")
    add_settings_args(parser, SETTINGS_FLAGS)
    append_help(parser, "dataset", catalogue_text())
    return parser


# --- printing -------------------------------------------------------------------------------


def _short(text: str, full: bool) -> str:
    text = str(text).rstrip()
    if full:
        return text
    lines = text.splitlines()
    out = "\n".join(lines[:OBSERVATION_LINES])
    if len(out) > OBSERVATION_CHARS:
        out = out[: OBSERVATION_CHARS - 1] + "…"
    if len(lines) > OBSERVATION_LINES:
        out += f"\n… ({len(lines) - OBSERVATION_LINES} more lines)"
    return out


def _indent(text: str, prefix: str = "      ") -> str:
    return textwrap.indent(text, prefix)


class TracePrinter:
    """Prints the program's events as they come (`on_event` of SagaProgram.forward)."""

    def __init__(self, out: TextIO | None = None, full: bool = False):
        self.out = out or sys.stdout  # the stream of the call, not of the import
        self.full = full

    def __call__(self, kind: str, **payload: Any) -> None:
        handler = getattr(self, f"on_{kind}", None)
        if handler is not None:
            handler(**payload)
            self.out.flush()

    def on_start(self, question, answer_type, form, demos) -> None:
        print(f"Question: {question}", file=self.out)
        at = answer_type.render() if answer_type is not None else "(not predicted in this variant)"
        print(f"Expected answer type: {at}   query form: {form}   demos: {demos}", file=self.out)
        print(file=self.out)

    def on_step(self, index, step) -> None:
        note = f"  [{step.note}]" if step.note else ""
        print(f"[{index}] Thought: {step.thought}", file=self.out)
        args = json.dumps(step.tool_args, ensure_ascii=False) if step.tool_args else "{}"
        print(f"    Action: {step.tool_name} {args}{note}", file=self.out)
        print("    Observation:", file=self.out)
        print(_indent(_short(step.observation, self.full) or "(nothing)"), file=self.out)
        print(file=self.out)


def format_answers(result: Any, labels: dict[str, str], flavour: Flavour, limit: int = 30) -> list[str]:
    if result is None:
        return ["(no answer)"]
    if isinstance(result, AskResult):
        return [str(result.value).lower()]
    if isinstance(result, SelectResult):
        if not result.rows:
            return ["(empty result)"]
        lines = []
        for row in result.rows[:limit]:
            cells = []
            for var in result.variables:
                if var not in row:
                    continue
                b = row[var]
                text = b.value
                eid = flavour.entity_id(b.value) if b.type == "uri" else None
                if eid:
                    text = f"{eid} ({labels[b.value]})" if b.value in labels else eid
                elif b.datatype:
                    text = f"{b.value} [{b.datatype.rsplit('#', 1)[-1]}]"
                cells.append(f"?{var} = {text}")
            lines.append(", ".join(cells))
        if len(result.rows) > limit:
            lines.append(f"… {len(result.rows) - limit} more rows")
        return lines
    return [str(result)]


def print_summary(pred, labels: dict[str, str], flavour: Flavour, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    source = f" (from {pred.final_source})" if pred.final_source else ""
    print(f"Final SPARQL{source}:", file=out)
    print(_indent(pred.sparql or "(none)", "    "), file=out)
    if pred.rewritten_from:
        print("  (head rewritten from:)", file=out)
        print(_indent(pred.rewritten_from, "    "), file=out)
    author = Author.from_dict(pred.get("final_author") or {})
    if author.kind != "none":
        chosen = f" (shown candidate {author.rank}{', edited' if author.edited else ''})" if author.rank else ""
        print(f"Written by: {author.kind}{chosen}", file=out)
    print(f"Answers [{pred.final_status}]:", file=out)
    if pred.final_error:
        print(f"    the final query failed: {pred.final_error}", file=out)
    for line in format_answers(pred.answers, labels, flavour):
        print(f"    {line}", file=out)
    c = pred.counters
    print("Counters: " + "  ".join(f"{k}={v}" for k, v in c.items()), file=out)
    if pred.notes:
        print("Notes: " + "; ".join(pred.notes), file=out)
    if pred.error:
        print(f"Error: {pred.error}", file=out)


def prediction_json(pred, labels: dict[str, str]) -> dict[str, Any]:
    answers = pred.answers.to_json() if pred.answers is not None else None
    return {
        "question": pred.question,
        "sparql": pred.sparql,
        "answers": answers,
        "labels": labels,
        "answer_type": pred.answer_type,
        "answer_type_label": pred.answer_type_label,
        "answer_type_qid": pred.answer_type_qid,
        "query_form": pred.query_form,
        "final_status": pred.final_status,
        "final_error": pred.final_error,
        "final_source": pred.final_source,
        "final_author": pred.get("final_author"),
        "rewritten_from": pred.rewritten_from,
        "variant": pred.variant,
        "trajectory": pred.trajectory,
        "counters": pred.counters,
        "notes": pred.notes,
        "error": pred.error,
    }


# --- labels for printing ----------------------------------------------------------------------------


def answer_labels(flavour: Flavour, pred: Any) -> dict[str, str]:
    """The prediction's entity labels keyed by IRI, as printed and in --json (the program looked them up)."""
    labels = getattr(pred, "answer_labels", None) or {}  # none on a question that failed before its answer
    result = pred.answers
    if not isinstance(result, SelectResult) or not labels:
        return {}
    out: dict[str, str] = {}
    for binding in result.values():
        eid = flavour.entity_id(binding.value) if binding.type == "uri" else None
        if eid in labels:
            out.setdefault(binding.value, labels[eid])
    return out


# --- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    apply_offline_env()
    args = build_parser().parse_args(argv)
    settings = settings_from_args(args)
    if settings.demo_pool == "auto" and "dataset" not in settings.model_fields_set:
        settings = settings.model_copy(update={"demo_pool": "shared"})  # a question typed in is no benchmark's
    check_pool_choice(settings)
    check_file_inputs(settings)  # eval's checks, before the LM: the program and the lexicon, one line each

    lm = cli_lm(settings)
    if lm is None:
        return 2
    with KgServices(settings) as services:
        if settings.preflight:  # eval's: the endpoint, the search and schema index, the LM; one line, exit 2
            preflight(settings, services, lm)
        program = SagaProgram(settings, services.endpoint, services.search, lm=lm)
        out = cast(TextIO, EscapingWriter(sys.stdout))  # labels, observations, thoughts: no raw control sequences
        printer = None if args.json else TracePrinter(out, full=args.full_observations)
        pool = program.demo_pool()
        pool_record = pool.describe() if pool is not None else None
        if printer is not None:
            print(describe_pool(pool_record), file=out)
        pred = program(question=args.question, on_event=printer)
        flavour = flavour_for(settings.kg)
        labels = answer_labels(flavour, pred)
        if args.json:
            data = {**prediction_json(pred, labels), "demo_pool": pool_record}
            print(escape_json_controls(json.dumps(data, ensure_ascii=False, indent=2, default=str)))
        else:
            print_summary(pred, labels, flavour, out)
        return 0 if not pred.error else 1


def console_main() -> None:
    """The `saga-ask` console script: `python -m saga_dspy.ask`, errors as one line."""
    sys.exit(run_main(main))


if __name__ == "__main__":
    console_main()
