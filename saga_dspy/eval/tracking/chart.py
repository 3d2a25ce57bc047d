"""The comparison chart of an eval invocation: F1 / EM / empty-result rate per variant, as PNG."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saga_dspy.eval.files import write_file

CHART_METRICS = (("f1", "F1"), ("em", "EM"), ("empty_rate", "empty rate"))


def comparison_chart(results: Mapping[str, Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """A grouped bar chart (percent) of F1 / EM / empty-result rate per variant, as PNG."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import pyparsing

    # Importing pyplot imports mathtext, which switches on pyparsing's packrat memoisation for the whole
    # process; rdflib's SPARQL grammar (every query's guard) then parses ~3x slower for the rest of the
    # run. These charts carry no math text: switch it off again.
    pyparsing.ParserElement.disable_memoization()
    path = Path(path)
    names = list(results)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 2.5), 3.6), dpi=110)
    width = 0.8 / len(CHART_METRICS)
    for k, (key, label) in enumerate(CHART_METRICS):
        values = [100.0 * (results[n].get(key) or 0.0) for n in names]
        xs = [i + (k - (len(CHART_METRICS) - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(xs, values, width, label=label)
        for bar, value in zip(bars, values):
            ax.annotate(
                f"{value:.1f}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=15 if len(names) > 3 else 0, fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, ncols=len(CHART_METRICS), loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    return write_file(path, png.getvalue())


__all__ = ["CHART_METRICS", "comparison_chart"]
