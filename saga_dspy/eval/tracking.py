"""MLflow tracking for eval and optimize runs (issue 5 §5).

Every eval variant and every optimize run is an MLflow run with params (dataset, split,
variant, LM, endpoint, coverage, program, ...), the metrics of `metrics.summarize`, and the
run's files as artifacts (predictions.jsonl, config.json, metrics.json, the compiled program,
a PNG chart comparing the variants). DSPy traces come through `mlflow.dspy.autolog()` with
tracing during evaluation and compilation switched on.

Store: `settings.mlflow_uri`, else `MLFLOW_TRACKING_URI`, else a local sqlite database
`sqlite:///<cache_dir>/mlflow/mlflow.db` with artifacts beside it (`<dir>/artifacts`). Browse:

    mlflow ui --backend-store-uri sqlite:///$HOME/.cache/saga-dspy/mlflow/mlflow.db

Runs of one invocation share an experiment (default: `saga-<kind>-<dataset>-<split>`); when an
invocation has several variants they are nested under one parent run that carries the
comparison chart. `Tracker(enabled=False)` (`--no-mlflow`) does nothing at all and never
imports mlflow.

MLflow never touches the network here: telemetry is off (`MLFLOW_DISABLE_TELEMETRY`,
`DO_NOT_TRACK`), trace export is synchronous (`MLFLOW_ENABLE_ASYNC_TRACE_LOGGING=false`), and
only a local store is used unless the user names another one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from saga_dspy.config import Settings, apply_offline_env

log = logging.getLogger(__name__)

MLFLOW_OFFLINE_ENV = {
    "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "GIT_PYTHON_REFRESH": "quiet",
}

# Params each run carries (missing ones are logged as "None").
PARAM_KEYS = ("dataset", "split", "variant", "lm", "endpoint", "schema_coverage", "program")


def apply_mlflow_env() -> None:
    apply_offline_env()
    for key, value in MLFLOW_OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def default_tracking_uri(settings: "Settings") -> str:
    """`settings.mlflow_uri`, else `MLFLOW_TRACKING_URI`, else sqlite under the cache dir."""
    if settings.mlflow_uri:
        return settings.mlflow_uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    path = Path(settings.cache_dir).expanduser().resolve() / "mlflow" / "mlflow.db"
    return f"sqlite:///{path}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///...` URI (None for other stores)."""
    m = re.match(r"^sqlite:///(.+)$", uri)
    return Path(m.group(1)) if m else None


def artifact_root(uri: str) -> str | None:
    """Where new experiments keep artifacts: beside a sqlite database (else the store decides)."""
    db = sqlite_path(uri)
    if db is None:
        return None
    return (db.parent / "artifacts").resolve().as_uri()


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
    """The finite numbers of a (flat) metrics dict; booleans become 0/1, None is left out."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, (int, float)) and math.isfinite(float(value)):
            name = re.sub(r"[^A-Za-z0-9_\-./ ]", "_", f"{prefix}{key}")
            out[name] = float(value)
    return out


class Tracker:
    """One invocation's MLflow tracking; every method is a no-op when disabled."""

    def __init__(
        self,
        settings: "Settings",
        experiment: str,
        *,
        enabled: bool | None = None,
        autolog: bool = True,
    ):
        self.settings = settings
        self.enabled = settings.mlflow if enabled is None else enabled
        self.experiment = experiment
        self.uri: str | None = None
        self.experiment_id: str | None = None
        self._mlflow: Any = None
        self._autologging = False
        if not self.enabled:
            return
        apply_mlflow_env()
        import mlflow

        self._mlflow = mlflow
        self.uri = default_tracking_uri(settings)
        db = sqlite_path(self.uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        mlflow.set_tracking_uri(self.uri)
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
        if autolog:
            self._autolog()

    def _autolog(self) -> None:
        try:
            import mlflow.dspy

            mlflow.dspy.autolog(
                log_traces=True,
                log_traces_from_compile=True,
                log_traces_from_eval=True,
                log_compiles=True,
                log_evals=True,
                silent=True,
            )
            self._autologging = True
        except Exception as exc:  # tracing is a convenience; the run's own records are not
            log.warning("mlflow.dspy.autolog() failed, continuing without DSPy traces: %s", exc)

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
        with mlflow.start_run(run_name=name, experiment_id=self.experiment_id, nested=nested, tags=dict(tags or {})) as run:
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

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self.enabled:
            self._mlflow.set_tags({k: str(v) for k, v in tags.items()})

    def close(self) -> None:
        """End any run left open and flush traces, so the process exits at once."""
        if not self.enabled:
            return
        mlflow = self._mlflow
        with contextlib.suppress(Exception):
            while mlflow.active_run() is not None:
                mlflow.end_run()
        with contextlib.suppress(Exception):
            mlflow.flush_trace_async_logging(terminate=True)
        if self._autologging:
            with contextlib.suppress(Exception):
                import mlflow.dspy

                mlflow.dspy.autolog(disable=True, silent=True)  # no traces into this store after the run
            self._autologging = False


# --------------------------------------------------------------------------- chart

CHART_METRICS = (("f1", "F1"), ("em", "EM"), ("empty_rate", "empty rate"))


def comparison_chart(results: Mapping[str, Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """A grouped bar chart (percent) of F1 / EM / empty-result rate per variant, as PNG."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    path = Path(path)
    names = list(results)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 2.5), 3.6), dpi=110)
    width = 0.8 / len(CHART_METRICS)
    for k, (key, label) in enumerate(CHART_METRICS):
        values = [100.0 * (results[n].get(key) or 0.0) for n in names]
        xs = [i + (k - (len(CHART_METRICS) - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(xs, values, width, label=label)
        for bar, value in zip(bars, values):
            ax.annotate(f"{value:.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=15 if len(names) > 3 else 0, fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, ncols=len(CHART_METRICS), loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = [
    "PARAM_KEYS",
    "Tracker",
    "apply_mlflow_env",
    "artifact_root",
    "clean_params",
    "comparison_chart",
    "default_tracking_uri",
    "numeric_metrics",
    "sqlite_path",
]
