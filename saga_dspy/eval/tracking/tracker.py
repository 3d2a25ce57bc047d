"""MLflow tracking for eval and optimize runs.

Every eval variant and every optimize run is an MLflow run named for what it is
(`full · qald10/test · local`) with the key params (dataset, split, variant, filter mode, LM,
endpoint, coverage, program), the metrics of `metrics.summarize` (f1, em, empty_rate,
boolean/factoid F1, steps, LM calls, tokens, s/q; rounded for display, metrics.json keeps every
digit), the evaluation set as an MLflow dataset input (`mlflow.data.from_huggingface`, context
"evaluation"), the per-question results as a table (`per_question.json`: the UI's "Evaluation" tab
compares runs question by question) and the run's files as artifacts. The variants of one
invocation are flat runs (one row each in the runs table, no parent to unfold) tagged
`saga.invocation` with the invocation's name; each carries the comparison (chart,
comparison.json/md) and, after the first, its paired comparison with the first (`f1_delta`, CI,
wins / losses / ties).

Each question's trace carries its scores as assessments: feedback `f1` and `em`, expectations
`expected_answers` and `expected_sparql` (the gold), so MLflow's trace list and trace comparison show
per-question wins and losses; and the tags variant, f1, em, question_id and dataset, the columns of the Traces
tab's shared view. Scores and shares are shown in percent, as the CLI prints them (`mlflow_values`); the CLI
ends with the UI's addresses (`ui_hint`).

DSPy traces come through `mlflow.dspy.autolog()` with `trace_policy.BoundedCallback` (small
span inputs, no adapter spans, a budget per question, `--trace sample` every 10th question;
`--trace none`: no traces), plus a span per tool call (`agent.tool_spans`). Each finished trace is
written to the store by a child process (`trace_writer`, `--trace-writer process`, the default: the
store's writes would otherwise hold the interpreter lock the evaluation's threads share), or by mlflow's
own export in this process (`--trace-writer inline`: asynchronous per `MLFLOW_ENABLE_ASYNC_TRACE_LOGGING`,
default true here). Either is flushed at the end of every variant and at close, so a finished run's
traces are all in the store, also after Ctrl-C.

Store: `settings.mlflow_uri`, else `MLFLOW_TRACKING_URI`, else a local sqlite database
`sqlite:///<cache_dir>/mlflow/mlflow.db` with artifacts beside it (`<dir>/artifacts`). Browse:

    mlflow ui --backend-store-uri sqlite:///$HOME/.cache/saga-dspy/mlflow/mlflow.db

Runs of one invocation share an experiment (default: `saga-<kind>-<dataset>-<split>`), tagged
`mlflow.experimentKind=custom_model_development` so the UI opens on the runs table, with a note
saying where to click. `Tracker(enabled=False)` (`--no-mlflow`) does nothing at all and never
imports mlflow: mlflow (and `trace_policy`, which subclasses mlflow's callback) is imported only
when tracking is on, so a run without it pays neither the import time nor mlflow's side effects.

MLflow never touches the network here: telemetry is off (`MLFLOW_DISABLE_TELEMETRY`,
`DO_NOT_TRACK`, among `config.OFFLINE_ENV`), and only a local store is used unless the user names another one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy
import pandas as pd

from saga_dspy.agent.authorship import author_of_line
from saga_dspy.config import Settings, apply_offline_env
from saga_dspy.eval.tracking import trace_writer  # stdlib only: mlflow is imported by its install()
from saga_dspy.eval.tracking.chart import comparison_chart
from saga_dspy.eval.tracking.mlflow_values import (
    FINAL_CHARS,
    SHARED_VIEW,
    TRACES_VIEW_STATE,
    TRACES_VIEW_TAG,
    answer_text,
    display_value,
    question_tags,
    shown_metric,
    ui_hint,
)
from saga_dspy.eval.tracking.store import check_tracking_uri, sqlite_path
from saga_dspy.eval.tracking.trace_export import drain_trace_queue, terminate_trace_export

log = logging.getLogger(__name__)

MLFLOW_OFFLINE_ENV = {
    "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "true",  # spans leave the eval threads; flushed at each run's end
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    "GIT_PYTHON_REFRESH": "quiet",
}

# Params each run carries (missing ones are logged as "None").
PARAM_KEYS = ("dataset", "split", "variant", "filter_mode", "lm", "endpoint", "schema_coverage", "program")

# The metrics that compare variants: the runs table's first columns.
KEY_METRICS = (
    "f1",
    "em",
    "empty_rate",
    "mean_seconds",
    "f1_delta",
    "f1_delta_low",
    "f1_delta_high",
    "boolean_f1",
    "factoid_f1",
    "mean_steps",
    "mean_lm_calls",
    "mean_tokens",
)
INVOCATION_TAG = "saga.invocation"  # the variants of one invocation: flat runs with the same value
TABLE_FILE = "per_question.json"
EXPERIMENT_KIND = "custom_model_development"  # the UI opens such an experiment on its runs table
VIEW_COLUMNS = (
    "params.`variant`",
    *(f"metrics.`{key}`" for key in KEY_METRICS),
    "params.`dataset`",
    "params.`split`",
    "params.`lm`",
    "params.`filter_mode`",
    "params.`endpoint`",
    "params.`schema_coverage`",
    "params.`program`",
)
EXPERIMENT_NOTE = """Runs of saga-dspy: one row per variant (the variants of one invocation share the tag
`saga.invocation`; f1_delta and its CI compare a variant with the invocation's first).

* Runs table: f1 / em / empty_rate / mean_seconds ... are metrics, variant / dataset / lm ... params ("Columns").
  Scores and shares (f1, em, *_rate, f1_delta and its CI) are in percent, as the CLI prints them.
* Chart view (the chart icon above the table): one bar chart per metric, a bar per variant (type f1 in its search).
* Per question: a run's "Evaluation" tab or its `per_question.json` artifact (question, gold, prediction, F1,
  status, steps, variant).
* Traces (the "Traces" tab): one per question, with a span per tool call, the answers and final SPARQL, its
  assessments: f1 and em (feedback), the gold answers and SPARQL (expectations), and the tags variant, f1, em,
  question_id, dataset (the view "saga", `?traceViewShareKey=saga`, shows them as columns). Tick two to compare.
"""


def apply_mlflow_env() -> None:
    apply_offline_env()
    for key, value in MLFLOW_OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def default_tracking_uri(settings: Settings) -> str:
    """`settings.mlflow_uri`, else `MLFLOW_TRACKING_URI`, else sqlite under the cache dir."""
    if settings.mlflow_uri:
        return settings.mlflow_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    path = Path(settings.cache_dir).expanduser().resolve() / "mlflow" / "mlflow.db"
    return f"sqlite:///{path}"


def artifact_root(uri: str) -> str | None:
    """Where new experiments keep artifacts: beside a sqlite database (else the store decides)."""
    db = sqlite_path(uri)
    if db is None:
        return None
    return (db.parent / "artifacts").resolve().as_uri()


def run_name(what: str, dataset: str, split: str, lm: str) -> str:
    """A run name that says what the run is: `full · qald10/test · local`."""
    return f"{what} · {dataset}/{split} · {lm}"


def with_tokens(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """`metrics` plus `mean_tokens` (prompt + completion tokens a question) when both are known."""
    out = dict(metrics)
    prompt, completion = metrics.get("mean_prompt_tokens"), metrics.get("mean_completion_tokens")
    if isinstance(prompt, (int, float)) and isinstance(completion, (int, float)):
        out["mean_tokens"] = float(prompt) + float(completion)
    return out


def question_rows(lines: Sequence[Mapping[str, Any]], variant: str) -> list[dict[str, Any]]:
    """One row per question for the runs' per-question table."""
    rows = []
    for line in lines:
        counters = line.get("counters") or {}
        rows.append(
            {
                "id": str(line.get("id")),
                "variant": variant,
                "question": str(line.get("question") or ""),
                "gold": answer_text(line.get("gold")),
                "prediction": answer_text(line.get("answers")),
                "f1": shown_metric("f1", float(line.get("f1") or 0.0)),
                "em": bool(line.get("em")),
                "status": str(line.get("final_status")),
                "steps": counters.get("steps"),
                "sparql": str(line.get("sparql") or ""),
                "error": str(line.get("error") or ""),
            }
        )
    return rows


def clean_params(params: Mapping[str, Any]) -> dict[str, str]:
    """MLflow params are strings of at most 6000 characters; None becomes 'None'."""
    out = {}
    for key, value in params.items():
        if isinstance(value, Path):
            value = str(value)
        text = str(value)
        out[str(key)] = text if len(text) <= 6000 else text[:5997] + "..."
    return out


def numeric_metrics(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of a (flat) metrics dict as MLflow shows them (`mlflow_values.shown_metric`: scores and
    shares in percent, as the CLI prints them; rounded); booleans become 0/1, None is left out."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, (int, float)) and math.isfinite(float(value)):
            name = re.sub(r"[^A-Za-z0-9_\-./ ]", "_", f"{prefix}{key}")
            out[name] = shown_metric(str(key), float(value))
    return out


class Tracker:
    """One invocation's MLflow tracking; every method is a no-op when disabled."""

    def __init__(
        self,
        settings: Settings,
        experiment: str,
        *,
        enabled: bool | None = None,
        autolog: bool = True,
        note: str = EXPERIMENT_NOTE,
        columns: Sequence[str] = VIEW_COLUMNS,
    ):
        self.settings = settings
        self.note, self.columns = note, tuple(columns)  # the experiment's note and the shared view's columns
        self.enabled = settings.mlflow if enabled is None else enabled
        self.experiment = experiment
        self.uri: str | None = None
        self.experiment_id: str | None = None
        self._mlflow: Any = None
        self._autologging = False
        self.trace = settings.trace
        self._writer: Any = None
        if not self.enabled:
            return
        apply_mlflow_env()  # before mlflow reads its environment
        # imported only when tracking is on: `--no-mlflow` never imports mlflow (its import time, its env reads)
        import mlflow
        from mlflow.tracing.provider import reset as reset_tracing

        self._mlflow = mlflow
        self.uri = default_tracking_uri(settings)
        check_tracking_uri(self.uri)  # once, briefly: mlflow itself retries a store it cannot open for minutes
        db = sqlite_path(self.uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        mlflow.set_tracking_uri(self.uri)
        reset_tracing()  # the next trace builds its exporter from the current MLFLOW_ENABLE_ASYNC_TRACE_LOGGING
        found = mlflow.get_experiment_by_name(experiment)
        if found is None:
            try:
                self.experiment_id = mlflow.create_experiment(experiment, artifact_location=artifact_root(self.uri))
            except Exception:  # created meanwhile by a parallel invocation
                found = mlflow.get_experiment_by_name(experiment)
                if found is None:
                    raise
        if found is not None:
            self.experiment_id = found.experiment_id
        mlflow.set_experiment(experiment_id=self.experiment_id)
        self._tag_experiment()
        if settings.trace_writer == "process" and settings.trace != "none":
            self._writer = trace_writer.install(self.uri)
        if autolog:
            self._autolog()

    def _tag_experiment(self) -> None:
        """Open on the runs table, with a note on where to click (a user's own choices are kept)."""
        try:
            tags = self._mlflow.MlflowClient().get_experiment(self.experiment_id).tags
            for key, value in (("mlflow.experimentKind", EXPERIMENT_KIND), ("mlflow.note.content", self.note)):
                if key not in tags:
                    self._mlflow.MlflowClient().set_experiment_tag(self.experiment_id, key, value)
            view = json.dumps(
                {"selectedColumns": list(self.columns), "columnOrder": list(self.columns), "runsHiddenMode": "SHOW_ALL"}
            )
            self._mlflow.MlflowClient().set_experiment_tag(
                self.experiment_id, f"mlflow.sharedViewState.{SHARED_VIEW}", view
            )
            now = _now_ms()
            traces_view = {"name": SHARED_VIEW, "createdAt": now, "updatedAt": now}
            traces_view["state"] = json.dumps(TRACES_VIEW_STATE)
            self._mlflow.MlflowClient().set_experiment_tag(self.experiment_id, TRACES_VIEW_TAG, json.dumps(traces_view))
        except Exception as exc:  # a convenience for the UI
            log.debug("could not tag the experiment: %s", exc)

    def _autolog(self) -> None:
        # imported here, not at the top: trace_policy imports mlflow, which `--no-mlflow` must never import
        from saga_dspy.eval.tracking.trace_policy import BoundedCallback, every_for

        every = every_for(self.trace)
        try:
            import mlflow.dspy
            from mlflow.dspy.callback import MlflowCallback

            if every is not None:
                # installed before autolog, which then keeps it instead of adding its own callback
                kept = [c for c in dspy.settings.callbacks or [] if not isinstance(c, MlflowCallback)]
                dspy.settings.configure(callbacks=[*kept, BoundedCallback(every)])
            mlflow.dspy.autolog(
                log_traces=every is not None,
                log_traces_from_compile=every is not None,
                log_traces_from_eval=every is not None,
                log_compiles=True,
                log_evals=True,
                silent=True,
            )
            self._autologging = True
        except Exception as exc:  # tracing is a convenience; the run's own records are not
            log.warning("mlflow.dspy.autolog() failed, continuing without DSPy traces: %s", exc)

    def ui_hint(self) -> str:
        """Where to see this invocation in the MLflow UI: the runs table with its metrics (the shared view) and
        the traces with their tags; for a local store, the `mlflow ui` command that serves it first. "" when
        tracking is off."""
        if not self.enabled or self.uri is None or self.experiment_id is None:
            return ""
        return ui_hint(self.uri, self.experiment_id)

    # -- runs ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        *,
        nested: bool = False,
    ) -> Iterator[str | None]:
        """A run (nested under the active one when `nested`); yields its id (None when disabled)."""
        if not self.enabled:
            yield None
            return
        mlflow = self._mlflow
        with mlflow.start_run(
            run_name=name, experiment_id=self.experiment_id, nested=nested, tags=dict(tags or {})
        ) as run:
            if params:
                mlflow.log_params(clean_params(params))
            yield run.info.run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        if self.enabled:
            self._mlflow.log_params(clean_params(params))

    def log_metrics(self, metrics: Mapping[str, Any], prefix: str = "", step: int | None = None) -> None:
        if self.enabled:
            values = numeric_metrics(metrics, prefix)
            if values:
                self._mlflow.log_metrics(values, step=step)

    def log_artifact(self, path: str | Path | None, artifact_path: str | None = None) -> None:
        if self.enabled and path is not None and Path(path).exists():
            self._mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def log_artifacts(self, paths: Sequence[str | Path | None], artifact_path: str | None = None) -> None:
        for path in paths:
            self.log_artifact(path, artifact_path)

    def log_artifact_to(self, run_id: str | None, path: str | Path | None, artifact_path: str | None = None) -> None:
        """Attach a file to a run that is no longer active."""
        if self.enabled and run_id and path is not None and Path(path).exists():
            self._mlflow.MlflowClient().log_artifact(run_id, str(path), artifact_path=artifact_path)

    def log_metrics_to(self, run_id: str | None, metrics: Mapping[str, Any]) -> None:
        """Metrics onto a run that is no longer active."""
        values = numeric_metrics(metrics)
        if self.enabled and run_id and values:
            metrics_list = [self._mlflow.entities.Metric(k, v, _now_ms(), 0) for k, v in values.items()]
            self._mlflow.MlflowClient().log_batch(run_id, metrics=metrics_list)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self.enabled:
            self._mlflow.set_tags({k: str(v) for k, v in tags.items()})

    def log_eval_set(self, rows: Sequence[Mapping[str, Any]], name: str) -> None:
        """The evaluation set as the active run's dataset input (a Hugging Face dataset, context "evaluation")."""
        if not self.enabled or not rows:
            return
        try:
            import datasets

            data = datasets.Dataset.from_list([dict(row) for row in rows])
            dataset = self._mlflow.data.from_huggingface(data, path=name, targets="gold_sparql", name=name)
            self._mlflow.log_input(dataset, context="evaluation")
        except Exception as exc:  # the run's own records do not depend on it
            log.warning("could not log the evaluation set %s: %s", name, exc)

    def log_table(self, rows: Sequence[Mapping[str, Any]], artifact_file: str = TABLE_FILE) -> None:
        """Rows (dicts with the same keys) as an MLflow table of the active run."""
        if self.enabled and rows:
            self._mlflow.log_table(pd.DataFrame(list(rows)), artifact_file=artifact_file)

    def log_eval_result(
        self,
        metrics: Mapping[str, Any],
        lines: Sequence[Mapping[str, Any]],
        variant: str,
        eval_set: Sequence[Mapping[str, Any]] = (),
        eval_set_name: str = "",
    ) -> None:
        """One variant's metrics, evaluation set and per-question table on the active run."""
        if not self.enabled:
            return
        self.log_metrics(with_tokens(metrics))
        self.log_eval_set(eval_set, eval_set_name)
        self.log_table(question_rows(lines, variant))

    def log_assessments(
        self,
        run_id: str | None,
        lines: Sequence[Mapping[str, Any]],
        rows: Sequence[Mapping[str, Any]] = (),
        *,
        variant: str = "",
        dataset: str = "",
    ) -> int:
        """Each question's scores on its trace (the run's traces, matched by their question): feedback `f1` (in
        percent) and `em`, expectations `expected_answers` and `expected_sparql` (from `rows`, the evaluation set,
        by id), the tags `mlflow_values.QUESTION_TAGS` (variant, f1, em, question id, dataset), the Traces tab's
        columns, and `final_author` (`agent.authorship`; `final_author_candidate`: the shown candidate's rank).
        Returns the number of traces assessed."""
        if not self.enabled or not run_id or self.trace == "none" or not lines:
            return 0
        try:
            return self._log_assessments(run_id, lines, rows, variant, dataset)
        except Exception as exc:  # the run's own records do not depend on it
            log.warning("could not log the per-question assessments: %s", exc)
            return 0

    def _log_assessments(
        self,
        run_id: str,
        lines: Sequence[Mapping[str, Any]],
        rows: Sequence[Mapping[str, Any]],
        variant: str,
        dataset: str,
    ) -> int:
        from mlflow.entities import AssessmentSource, AssessmentSourceType

        mlflow = self._mlflow
        client = mlflow.MlflowClient()
        by_question: dict[str, Mapping[str, Any]] = {}
        for each in lines:
            by_question.setdefault(str(each.get("question") or ""), each)
        gold_sparql = {str(row.get("id")): str(row.get("gold_sparql") or "") for row in rows}
        traces = mlflow.search_traces(
            locations=[self.experiment_id],
            run_id=run_id,
            return_type="list",
            include_spans=False,
            max_results=max(100, 2 * len(lines)),
        )
        source = AssessmentSource(source_type=AssessmentSourceType.CODE, source_id="saga_dspy.eval.scoring.metrics")
        done = 0
        for trace in traces:
            line = by_question.get(trace_question(trace.info))
            if line is None:
                continue
            trace_id = trace.info.trace_id
            f1 = shown_metric("f1", float(line.get("f1") or 0.0))
            status = str(line.get("final_status"))
            mlflow.log_feedback(trace_id=trace_id, name="f1", value=f1, source=source, rationale=status)
            mlflow.log_feedback(trace_id=trace_id, name="em", value=bool(line.get("em")), source=source)
            author = author_of_line(line)
            mlflow.set_trace_tag(trace_id, "final_author", author.kind)
            if author.rank is not None:
                edited = " edited" if author.edited else ""
                mlflow.set_trace_tag(trace_id, "final_author_candidate", f"{author.rank}{edited}")
            gold = answer_text(line.get("gold"), FINAL_CHARS)
            mlflow.log_expectation(trace_id=trace_id, name="expected_answers", value=gold, source=source)
            sparql = str(line.get("gold_sparql") or gold_sparql.get(str(line.get("id")), ""))
            if sparql:
                mlflow.log_expectation(
                    trace_id=trace_id, name="expected_sparql", value=sparql[:FINAL_CHARS], source=source
                )
            for key, value in question_tags(line, variant, dataset).items():
                client.set_trace_tag(trace_id, key, value)
            done += 1
        return done

    def flush(self) -> None:
        """Wait until every finished trace is in the store.

        Inline export: the export threads keep running: waiting for their queue to empty returns as soon as the
        last trace is written, where `mlflow.flush_trace_async_logging` stops and restarts them
        (its consumer polls the queue once a second, so each flush cost up to a second)."""
        if self._writer is not None:
            self._writer.flush()
        elif self.enabled:
            with contextlib.suppress(Exception):
                if drain_trace_queue() is None:
                    self._mlflow.flush_trace_async_logging()

    def close(self) -> None:
        """End any run left open and flush traces, so the process exits at once."""
        if not self.enabled:
            return
        mlflow = self._mlflow
        with contextlib.suppress(Exception):
            while mlflow.active_run() is not None:
                mlflow.end_run()
        if self._writer is not None:
            self._writer.flush()  # the process keeps the writer (and its child) for later runs
            trace_writer.uninstall()
            self._writer = None
        else:
            with contextlib.suppress(Exception):
                export_queue = drain_trace_queue()
                if export_queue is None or not terminate_trace_export(export_queue):
                    mlflow.flush_trace_async_logging(terminate=True)
        if self._autologging:
            with contextlib.suppress(Exception):
                import mlflow.dspy

                mlflow.dspy.autolog(disable=True, silent=True)  # no traces into this store after the run
            self._autologging = False


def trace_question(info: Any) -> str:
    """The question a trace's root call was asked (its recorded inputs), or "" when they say none."""
    meta = getattr(info, "trace_metadata", None) or {}
    text = meta.get("mlflow.traceInputs") or getattr(info, "request_preview", None) or ""
    try:
        inputs = json.loads(text)
    except (TypeError, ValueError):
        return ""
    return str(inputs.get("question") or "") if isinstance(inputs, dict) else ""


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "FINAL_CHARS",
    "INVOCATION_TAG",
    "SHARED_VIEW",
    "KEY_METRICS",
    "PARAM_KEYS",
    "TABLE_FILE",
    "Tracker",
    "apply_mlflow_env",
    "answer_text",
    "artifact_root",
    "clean_params",
    "comparison_chart",
    "default_tracking_uri",
    "display_value",
    "numeric_metrics",
    "question_rows",
    "run_name",
    "sqlite_path",
    "trace_question",
    "ui_hint",
    "with_tokens",
]
