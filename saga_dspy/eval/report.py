"""The summary table printed at the end of a run (variants side by side), as text and markdown."""

from __future__ import annotations

from typing import Any

TABLE_COLUMNS = (
    ("n", "n", "{:d}"),
    ("F1", "f1", "pct"),
    ("EM", "em", "pct"),
    ("empty", "empty_rate", "pct"),
    ("bool F1", "boolean_f1", "pct"),
    ("fact F1", "factoid_f1", "pct"),
    ("steps", "mean_steps", "{:.1f}"),
    ("lookups", "mean_lookups", "{:.1f}"),
    ("LM calls", "mean_lm_calls", "{:.1f}"),
    ("tokens", "mean_tokens", "{:.0f}"),
    ("LM steps", "mean_lm_steps", "{:.1f}"),
    ("AT", "mean_answer_type_calls", "{:.1f}"),
    ("prunes", "mean_prunes", "{:.1f}"),
    ("extracts", "mean_extracts", "{:.1f}"),
    ("auto-runs", "mean_auto_runs", "{:.1f}"),
    ("ktok eval", "mean_prompt_tokens_evaluated", "k"),
    ("ktok reused", "mean_prompt_tokens_reused", "k"),
    ("s/q", "mean_seconds", "{:.1f}"),
    ("blocked", "blocked_rate", "pct"),
    ("failed", "n_failed", "{:d}"),
)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "pct":
        return f"{100.0 * value:.1f}"
    if fmt == "k":  # thousands of tokens
        return f"{value / 1000:.1f}"
    if fmt == "{:d}":
        return str(int(value))
    return fmt.format(value)


def summary_table(results: dict[str, dict[str, Any]], title: str = "") -> str:
    """Variants side by side (rows), metrics in columns; percentages for rates."""
    header = ["variant", *[c[0] for c in TABLE_COLUMNS]]
    rows = [[name, *[_cell(m.get(key), fmt) for _, key, fmt in TABLE_COLUMNS]] for name, m in results.items()]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(header)))
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(r)))
    return "\n".join(lines)


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    header = ["variant", *[c[0] for c in TABLE_COLUMNS]]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, m in results.items():
        out.append("| " + " | ".join([name, *[_cell(m.get(key), fmt) for _, key, fmt in TABLE_COLUMNS]]) + " |")
    return "\n".join(out)
