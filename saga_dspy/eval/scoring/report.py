"""The tables printed at the end of a run (variants side by side), as text and markdown: the scores with each
variant's paired bootstrap CI of F1 against the first variant, then F1 by answer kind and who chose the final
query. Every text table fits in `MAX_WIDTH` characters; headers are words."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from saga_dspy.eval.scoring.significance import PairedComparison, paired_by_id

MAX_WIDTH = 120

# (header, metrics key, format); "pct": a rate in percent, "k": thousands
SCORE_COLUMNS = (
    ("questions", "n", "int"),
    ("F1", "f1", "pct"),
    ("EM", "em", "pct"),
    ("empty", "empty_rate", "pct"),
    ("failed", "n_failed", "int"),
    ("seconds", "mean_seconds", "{:.1f}"),
)
# what a question cost, means per question ("kt": thousands of prompt + completion tokens; evaluated / reused:
# prompt tokens a local model computed / took from its prefix cache)
COST_COLUMNS = (
    ("steps", "mean_steps", "{:.1f}"),
    ("LM steps", "mean_lm_steps", "{:.1f}"),
    ("LM calls", "mean_lm_calls", "{:.1f}"),
    ("type calls", "mean_answer_type_calls", "{:.1f}"),
    ("prunes", "mean_prunes", "{:.1f}"),
    ("extracts", "mean_extracts", "{:.1f}"),
    ("auto-runs", "mean_auto_runs", "{:.1f}"),
    ("ktokens", "mean_tokens", "k"),
    ("kt eval", "mean_prompt_tokens_evaluated", "k"),  # short: the variant names are up to 20 characters
    ("kt reused", "mean_prompt_tokens_reused", "k"),
)
CI_HEADER = "F1 change [95% CI]"
WLT_HEADER = "wins/losses/ties"
# F1 per answer kind (its questions in brackets), the trivial ASK baseline, who chose the final query
KIND_COLUMNS = (
    ("boolean", "boolean", "kind"),
    ("ASK true", "boolean_true_rate", "pct"),
    ("count", "count", "kind"),
    ("entity list", "entity", "kind"),
    ("literal", "literal", "kind"),
    ("model", "author_model_rate", "pct"),
    ("picked", "author_model_candidate_rate", "pct"),
    ("extract", "author_extract_rate", "pct"),
    ("program", "author_program_rate", "pct"),
)
KINDS_NOTE = (
    "F1 by the gold's answer kind (questions); ASK true: share of ASK golds that are true (what always "
    "answering yes scores); who wrote the final query (agent.authorship), in percent of questions: the model, "
    "the model picking a shown candidate (as it was or edited), its extract call, or the program (a fallback)"
)

COST_NOTE = (
    "means per question: steps, steps the LM chose, LM calls, answer-type calls, prune calls, extract calls, "
    "queries the program ran for the model, thousands of tokens (all; prompt tokens evaluated; reused from a "
    "prefix cache)"
)


def f1_by_id(lines: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {str(line["id"]): float(line.get("f1") or 0.0) for line in lines}


def against_first(lines: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, PairedComparison]:
    """Each variant after the first against the first: the paired bootstrap of F1 over the questions both ran."""
    names = list(lines)
    if len(names) < 2:
        return {}
    base = f1_by_id(lines[names[0]])
    return {name: paired_by_id(base, f1_by_id(lines[name])) for name in names[1:]}


def comparison_metrics(comparison: PairedComparison) -> dict[str, float]:
    """A comparison as flat metrics (what the tracked runs and comparison.json carry)."""
    return {
        "f1_delta": comparison.delta,
        "f1_delta_low": comparison.low,
        "f1_delta_high": comparison.high,
        "f1_wins": comparison.wins,
        "f1_losses": comparison.losses,
        "f1_ties": comparison.ties,
        "f1_paired_n": comparison.n,
    }


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "pct":
        return f"{100.0 * value:.1f}"
    if fmt == "k":  # thousands of tokens
        return f"{value / 1000:.1f}"
    if fmt == "int":
        return str(int(value))
    return fmt.format(value)


def rescore_summary(metrics: Mapping[str, Any]) -> str:
    """A run's scores in one line, in percent as every table here: questions, F1, EM, empty, and F1 per kind."""
    parts = [f"{_cell(metrics.get('n'), 'int')} questions"]
    parts += [f"{name} {_cell(metrics.get(key), 'pct')}" for name, key in (("F1", "f1"), ("EM", "em"))]
    parts.append(f"empty {_cell(metrics.get('empty_rate'), 'pct')}")
    for kind in ("boolean", "factoid"):
        if metrics.get(f"{kind}_n"):
            parts.append(f"{kind} F1 {_cell(metrics.get(f'{kind}_f1'), 'pct')} ({metrics[f'{kind}_n']})")
    return ", ".join(parts)


def _kind_cell(metrics: Mapping[str, Any], kind: str) -> str:
    n = metrics.get(f"{kind}_n")
    if not n:
        return "-"
    return f"{_cell(metrics.get(f'{kind}_f1'), 'pct')} ({int(n)})"


def _ci_cells(comparison: PairedComparison | None) -> list[str]:
    if comparison is None:
        return ["-", "-"]
    c = comparison
    return [
        f"{100 * c.delta:+.1f} [{100 * c.low:+.1f}, {100 * c.high:+.1f}]",
        f"{c.wins}/{c.losses}/{c.ties}",
    ]


def _cells(metrics: Mapping[str, Any], columns: Sequence[tuple[str, str, str]]) -> list[str]:
    """One row's cells under these columns (header, metrics key, format; "kind": F1 of that answer kind)."""
    return [_kind_cell(metrics, key) if fmt == "kind" else _cell(metrics.get(key), fmt) for _, key, fmt in columns]


def _variant_rows(
    results: Mapping[str, Mapping[str, Any]], columns: Sequence[tuple[str, str, str]]
) -> tuple[list[str], list[list[str]]]:
    """A table of one row per variant under these columns."""
    header = ["variant", *[c[0] for c in columns]]
    return header, [[name, *_cells(m, columns)] for name, m in results.items()]


def score_rows(
    results: Mapping[str, Mapping[str, Any]], against: Mapping[str, PairedComparison] | None = None
) -> tuple[list[str], list[list[str]]]:
    """The score table's header and rows (the CI columns only when there is a comparison)."""
    header, rows = _variant_rows(results, SCORE_COLUMNS)
    if against:
        header[3:3] = [CI_HEADER, WLT_HEADER]  # right after F1
        for row in rows:
            row[3:3] = _ci_cells(against.get(row[0]))
    return header, rows


def kind_rows(results: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    return _variant_rows(results, KIND_COLUMNS)


def cost_rows(results: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    return _variant_rows(results, COST_COLUMNS)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns padded to their widest cell: the first `left` (names) flush left, the rest (numbers) right."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(widths[i]) if i < left else str(c).rjust(widths[i]) for i, c in enumerate(cells))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *[line(r) for r in rows]])


class Markdown(str):
    """A table cell that is markdown already (a code span): `md_table` keeps it as it is."""


_MD_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def md_text(text: Any) -> str:
    """Text (a question, a run's name) as one markdown table cell: on one line, its `|` and backslashes escaped,
    HTML shown as text."""
    return " ".join(str(text).split()).translate(_MD_ESCAPES)


def md_code(text: Any) -> Markdown:
    """Text as one code-span cell on one line (`|` escaped: the table's own syntax, even inside the span)."""
    flat = " ".join(str(text).split()).replace("|", "\\|")
    if not flat:
        return Markdown("-")
    ticks = "`" * (1 + max((len(run) for run in re.findall("`+", flat)), default=0))  # longer than any inside
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return Markdown(f"{ticks}{pad}{flat}{pad}{ticks}")


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; every cell escaped by `md_text` but a `Markdown` one."""

    def cell(value: Any) -> str:
        return value if isinstance(value, Markdown) else md_text(value)

    out = ["| " + " | ".join(cell(c) for c in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _against_note(results: Mapping[str, Any], against: Mapping[str, PairedComparison] | None) -> str:
    if not against:
        return ""
    first = next(iter(results))
    n = {c.n for c in against.values()}
    return (
        f"F1 change: each variant minus {first} on the same questions, in points, with its paired bootstrap 95% "
        f"interval ({next(iter(against.values())).resamples} resamples; n={'/'.join(map(str, sorted(n)))}); "
        f"wins/losses/ties: questions where it scored higher / lower / the same"
    )


def summary_table(
    results: Mapping[str, Mapping[str, Any]], title: str = "", against: Mapping[str, PairedComparison] | None = None
) -> str:
    """Variants side by side (rows): scores, CI against the first variant, then F1 by answer kind and sources."""
    parts = [title] if title else []
    parts.append(text_table(*score_rows(results, against)))
    note = _against_note(results, against)
    if note:
        parts.append(_wrap(note))
    parts += ["", text_table(*kind_rows(results)), _wrap(KINDS_NOTE)]
    parts += ["", text_table(*cost_rows(results)), _wrap(COST_NOTE)]
    return "\n".join(parts)


def markdown_table(
    results: Mapping[str, Mapping[str, Any]], against: Mapping[str, PairedComparison] | None = None
) -> str:
    """comparison.md: the same two tables in markdown."""
    parts = [md_table(*score_rows(results, against))]
    note = _against_note(results, against)
    if note:
        parts += ["", note + "."]
    parts += ["", md_table(*kind_rows(results)), "", KINDS_NOTE + "."]
    parts += ["", md_table(*cost_rows(results)), "", COST_NOTE + "."]
    return "\n".join(parts)


def _wrap(text: str, width: int = MAX_WIDTH) -> str:
    words, lines, current = text.split(), [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return "\n".join(lines)


def results_table(entries: Sequence[tuple[str, str, Mapping[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """Results across benchmarks: one row per label (a variant, or variant · LM), one column per benchmark with
    F1 and its questions, and for a row that has every one the mean over benchmarks (unweighted: each benchmark
    counts once) and the pooled F1 (over all their questions: a benchmark weighs by its questions). `entries`:
    (label, benchmark, metrics) per run; a later run of the same label and benchmark replaces an earlier one."""
    labels = list(dict.fromkeys(label for label, _, _ in entries))
    benchmarks = list(dict.fromkeys(bench for _, bench, _ in entries))
    cells = {(label, bench): m for label, bench, m in entries}
    header = ["variant", *benchmarks]
    if len(benchmarks) > 1:
        header += [MEAN_F1, POOLED_F1]
    rows = []
    for label in labels:
        found = [cells.get((label, b)) for b in benchmarks]
        row = [label, *[_cell_f1(m) for m in found]]
        if len(benchmarks) > 1:
            complete = [m for m in found if m is not None and m.get("f1") is not None]
            if len(complete) == len(found):
                n = sum(int(m.get("n") or 0) for m in complete)
                pooled = sum(float(m["f1"]) * int(m.get("n") or 0) for m in complete) / n if n else None
                row += [_cell(sum(float(m["f1"]) for m in complete) / len(found), "pct"), _cell(pooled, "pct")]
            else:
                row += ["-", "-"]
        rows.append(row)
    return header, rows


MEAN_F1 = "mean F1"
POOLED_F1 = "pooled F1"
ACROSS_NOTE = (
    f"{MEAN_F1}: unweighted mean over the benchmarks (each counts once); "
    f"{POOLED_F1}: over all their questions (a benchmark weighs by its questions)"
)


def _cell_f1(metrics: Mapping[str, Any] | None) -> str:
    if metrics is None:
        return "-"
    return f"{_cell(metrics.get('f1'), 'pct')} ({_cell(metrics.get('n'), 'int')})"


RUN_NAME_COLUMNS = 3  # benchmark, variant, LM


def runs_rows(entries: Sequence[tuple[str, str, str, Mapping[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """One row per run: benchmark, variant, LM, questions, scores, seconds. `entries`: (benchmark, label, LM,
    metrics)."""
    header = ["benchmark", "variant", "LM", *[c[0] for c in SCORE_COLUMNS]]
    return header, [[bench, label, lm, *_cells(m, SCORE_COLUMNS)] for bench, label, lm, m in entries]
