"""Running an evaluation: the questions of each variant in threads, into resumable run directories,
tracked in MLflow, compared side by side. `evaluate()` is the entry point (the CLI is `__main__`)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import dspy

from saga_dspy.agent.demos import describe_pool
from saga_dspy.agent.pools import check_pool_choice
from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.errors import Interrupted
from saga_dspy.eval.errors import EvalError
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.answerability import describe_subset, subset_record
from saga_dspy.eval.loading.evalset import EvalItem, EvalSet, describe_filter, load_eval_set
from saga_dspy.eval.loading.gold import freeze_missing_gold, freezes_now
from saga_dspy.eval.preflight import preflight
from saga_dspy.eval.running.answering import run_questions
from saga_dspy.eval.running.predictions import PREDICTIONS, PredictionsFile, last_by_id
from saga_dspy.eval.running.records import CONFIG, METRICS, run_config, write_json
from saga_dspy.eval.running.resume import INVOCATION, invocation_record, resume_command
from saga_dspy.eval.running.run_inputs import (
    check_file_inputs,
    check_graph,
    check_out_dir,
    checked_variants,
    local_engine,
    out_dir_for,
    prepare_out_dir,
    program_variant_warning,
    questions_left,
    read_config,
    warm_up,
)
from saga_dspy.eval.running.rundir import locked_run_dir
from saga_dspy.eval.scoring.metrics import compute_metrics
from saga_dspy.eval.scoring.report import against_first, comparison_metrics, markdown_table, summary_table
from saga_dspy.eval.tracking.tracker import INVOCATION_TAG, Tracker, comparison_chart, run_name
from saga_dspy.kg.endpoint import Endpoint
from saga_dspy.kg.search import Search
from saga_dspy.services import KgServices

# --------------------------------------------------------------------------- running


@dataclass
class VariantResult:
    variant: str
    out_dir: Path
    metrics: dict[str, Any]
    lines: list[dict[str, Any]]
    interrupted: bool = False
    ran: int = 0
    run_id: str | None = None
    stopped: str | None = None  # why the run stopped early (infrastructure failures in a row)
    demo_pool: dict[str, Any] | None = None  # the controller's demo pool (`DemoPool.describe`); None: no demos


def _raise_interrupt(signum, frame):  # SIGTERM -> the same path as Ctrl-C
    raise Interrupted(f"signal {signum}")


def run_variant(
    settings: Settings,
    evalset: EvalSet,
    out_dir: Path,
    *,
    program: Any,
    endpoint: Any = None,
    lm: Any = None,
    resume: bool = False,
    retry_failed: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    tracker: Any = None,
    nested: bool = False,
    run_tags: Mapping[str, str] | None = None,
    extra_config: dict | None = None,
    desc: str | None = None,
    warmup_seconds: float | None = None,
) -> VariantResult:
    """Evaluate one variant into `out_dir`; resumable; tracked when `tracker` is given.

    `desc` labels the progress bar (default: the variant); `warmup_seconds` (loading done before
    the first question, so not in any question's seconds) is reported once in metrics.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = prepare_out_dir(out_dir, settings, resume=resume, retry_failed=retry_failed, overwrite=overwrite)
    wanted, done, todo = _split_done(evalset, kept)
    cfg = _write_run_config(out_dir, settings, evalset, program, endpoint, extra_config, resume=resume)
    if resume:
        print(f"[{settings.variant}] resuming {out_dir}: {len(done)} done, {len(todo)} to run", file=sys.stderr)

    run_ctx = _tracked_run(tracker, settings, evalset, out_dir, cfg, nested=nested, run_tags=run_tags)
    with run_ctx as run_id:
        phase_started = time.monotonic()
        new, interrupted, stopped = _answer(
            program, todo, done, out_dir, settings, len(evalset), lm=lm, progress=progress, desc=desc
        )
        latest = last_by_id(PredictionsFile.read(out_dir / PREDICTIONS))
        lines = [latest[qid] for qid in wanted if qid in latest]
        metrics = _variant_metrics(
            lines, evalset, lm, interrupted=interrupted, stopped=stopped, warmup_seconds=warmup_seconds
        )
        # this invocation's question phase (wall clock, all threads): its questions per second are the
        # evaluation's throughput, without the run's fixed costs (tracking set-up, tables, chart)
        metrics["phase"] = {"questions": len(new), "seconds": round(time.monotonic() - phase_started, 3)}
        write_json(out_dir / METRICS, metrics)
        if tracker:
            _log_variant(tracker, run_id, settings, evalset, out_dir, metrics, lines)
    return VariantResult(
        settings.variant,
        out_dir,
        metrics,
        lines,
        interrupted,
        ran=len(new),
        run_id=run_id,
        stopped=stopped,
        demo_pool=cfg["demo_pool"],
    )


def _answer(
    program: Any,
    todo: list[EvalItem],
    done: list[dict[str, Any]],
    out_dir: Path,
    settings: Settings,
    total: int,
    *,
    lm: Any,
    progress: bool,
    desc: str | None,
) -> tuple[list[dict[str, Any]], bool, str | None]:
    """The questions still to answer, each line appended to predictions.jsonl as it finishes: (the new lines,
    interrupted, why the run stopped early)."""
    predictions = PredictionsFile(out_dir / PREDICTIONS)
    try:
        return run_questions(
            program,
            todo,
            predictions,
            mode=settings.metric_mode,
            num_threads=settings.num_threads,
            lm=lm,
            progress=progress,
            desc=desc or settings.variant,
            done_lines=done,
            total=total,
            max_infra_failures=settings.max_infra_failures,
        )
    finally:
        predictions.close()


def _split_done(evalset: EvalSet, kept: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]], list[EvalItem]]:
    """(the question ids in order, the kept lines of those questions, the questions still to answer)."""
    wanted = list(evalset.data["id"])
    done = [line for line in kept if line["id"] in set(wanted)]
    done_ids = {line["id"] for line in done}
    todo = [EvalItem.from_row(row) for row in evalset.data if row["id"] not in done_ids]  # made lazily from rows
    return wanted, done, todo


def _variant_metrics(
    lines: list[dict[str, Any]],
    evalset: EvalSet,
    lm: Any,
    *,
    interrupted: bool,
    stopped: str | None,
    warmup_seconds: float | None,
) -> dict[str, Any]:
    """metrics.json's figures: the scores, what was scored, why the run stopped, the warm-up, the local LM's runtime."""
    metrics = compute_metrics(lines, total=len(evalset))
    metrics["interrupted"] = interrupted
    metrics["subset"] = subset_record(evalset.filter_report, len(evalset))  # what was scored
    metrics["stopped"] = stopped
    if warmup_seconds is not None:
        metrics["warmup_seconds"] = round(warmup_seconds, 3)
    engine = local_engine(lm)
    if engine is not None:
        metrics["lm_runtime"] = engine.runtime()
    return metrics


def _write_run_config(
    out_dir: Path,
    settings: Settings,
    evalset: EvalSet,
    program: Any,
    endpoint: Any,
    extra_config: dict | None,
    *,
    resume: bool,
) -> dict[str, Any]:
    """config.json of the run; a resumed run keeps its creation time and adds this resumption's."""
    cfg = run_config(settings, evalset, program, endpoint, extra=extra_config)
    cfg_path = out_dir / CONFIG
    if resume and cfg_path.exists():
        previous = read_config(cfg_path)
        cfg["created"] = previous.get("created", cfg["created"])
        cfg["resumed"] = [
            *previous.get("resumed", []),
            _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        ]
    write_json(cfg_path, cfg)
    return cfg


def _tracked_run(
    tracker: Any,
    settings: Settings,
    evalset: EvalSet,
    out_dir: Path,
    cfg: dict[str, Any],
    *,
    nested: bool,
    run_tags: Mapping[str, str] | None,
) -> Any:
    """The variant's MLflow run (a context that gives its id), or a null context when not tracked."""
    params = {**run_params(settings, evalset, len(evalset)), **pool_params(cfg["demo_pool"])}
    if not tracker:
        return _null_context()
    return tracker.run(
        run_name(settings.variant, evalset.dataset, evalset.split, settings.lm),
        params=params,
        nested=nested,
        tags={"kind": "eval", "out_dir": str(out_dir), **(run_tags or {})},
    )


def _log_variant(
    tracker: Any,
    run_id: str | None,
    settings: Settings,
    evalset: EvalSet,
    out_dir: Path,
    metrics: dict[str, Any],
    lines: list[dict[str, Any]],
) -> None:
    """Metrics, the evaluation set as dataset input, the per-question table; each question's scores and tags on
    its trace; the run's files (and the compiled program) as artifacts."""
    tracker.log_eval_result(metrics, lines, settings.variant, eval_set=evalset.rows(), eval_set_name=evalset.name)
    tracker.flush()
    tracker.log_assessments(run_id, lines, evalset.rows(), variant=settings.variant, dataset=evalset.name)
    tracker.log_artifacts([out_dir / PREDICTIONS, out_dir / CONFIG, out_dir / METRICS])
    if settings.program:
        tracker.log_artifact(settings.program, artifact_path="program")


class _null_context:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def attr_params(obj: Any, *names: str) -> dict[str, Any]:
    """The named attributes of `obj` (the settings, a compile's options) as MLflow params, under their own names."""
    return {name: getattr(obj, name) for name in names}


def run_params(settings: Settings, evalset: EvalSet, n: int) -> dict[str, Any]:
    return {
        "dataset": evalset.dataset,
        "split": evalset.split,
        **attr_params(settings, "variant", "lm", "endpoint", "schema_coverage"),
        "program": str(settings.program) if settings.program else None,
        "metric_mode": settings.metric_mode,
        "n_questions": n,
        **attr_params(settings, "limit", "num_threads", "max_steps", "demos", "demo_anchors", "filter_mode"),
        **attr_params(settings, "temperature", "seed", "kg"),
    }


def pool_params(pool: dict[str, Any] | None) -> dict[str, Any]:
    """The demo pool as MLflow params: its name, size, sources (`qald10=38 wwq=490`) and what was left out."""
    if not pool:
        return {"demo_pool": "none", "demo_pool_records": 0}
    return {
        "demo_pool": pool.get("pool"),
        "demo_pool_file": pool.get("file"),
        "demo_pool_records": pool.get("records"),
        "demo_pool_sources": " ".join(f"{k}={v}" for k, v in (pool.get("sources") or {}).items()),
        "demo_pool_exclude": ",".join(pool.get("exclude") or []) or None,
    }


def make_program(settings: Settings, endpoint: Endpoint, search: Search) -> SagaProgram:
    return SagaProgram(settings, endpoint=endpoint, search=search)


ProgramFactory = Callable[[Settings, Endpoint, Search], SagaProgram]


def evaluate(
    settings: Settings,
    variants: Sequence[str] = ("full",),
    *,
    out: str | Path | None = None,
    ids: Sequence[str] | None = None,
    data_file: str | Path | None = None,
    gold_file: str | Path | None = None,
    answerable_only: bool = True,
    resume: bool = False,
    retry_failed: bool = False,
    overwrite: bool = False,
    lm: dspy.BaseLM | None = None,
    endpoint: Endpoint | None = None,
    search: Search | None = None,
    program_factory: ProgramFactory | None = None,
    progress: bool = True,
    experiment: str | None = None,
    stream=None,
) -> dict[str, VariantResult]:
    """Evaluate each variant on the same questions; returns the results by variant.

    `lm` is used through `dspy.context` in every worker thread (default: dspy's configured
    LM, else the program builds `build_lm(settings)`); `endpoint`/`search` are opened from
    settings when not given (and closed at the end)."""
    stream = stream or sys.stdout
    variants = checked_variants(settings, variants)
    resume = resume or retry_failed
    out_dir = out_dir_for(settings, resume, out)
    settings = _checked_inputs(settings, data_file)
    evalset, preflighted = _frozen_eval_set(
        settings, ids, data_file, gold_file, endpoint, search, lm, answerable_only, progress=progress, stream=stream
    )
    tracker = Tracker(settings, experiment or f"saga-eval-{evalset.dataset}-{evalset.split}")
    invocation = invocation_record(variants, ids, data_file, gold_file, answerable_only, experiment)
    with locked_run_dir(out_dir), KgServices(settings, endpoint, search) as services, sigterm_as_interrupt():
        try:
            results = _run_variants(
                settings,
                variants,
                evalset,
                out_dir,
                services,
                tracker,
                program_factory or make_program,
                lm=lm,
                resume=resume,
                retry_failed=retry_failed,
                overwrite=overwrite,
                progress=progress,
                preflight_first=settings.preflight and not preflighted,
                extra_config={INVOCATION: invocation},
            )
        finally:
            tracker.close()
    print_outcome(settings, evalset, results, out_dir, stream)
    if tracker.enabled:  # last: where to click through to the metrics and traces
        print("\n" + tracker.ui_hint(), file=stream)
    return results


def _frozen_eval_set(
    settings: Settings,
    ids: Sequence[str] | None,
    data_file: str | Path | None,
    gold_file: str | Path | None,
    endpoint: Endpoint | None,
    search: Search | None,
    lm: dspy.BaseLM | None,
    answerable_only: bool,
    *,
    progress: bool,
    stream: TextIO,
) -> tuple[EvalSet, bool]:
    """The run's questions with their gold (said on `stream`; none is an EvalError), the split's gold frozen first
    where it is missing and may be frozen here (the one step of a run that writes gold; loading itself writes
    nothing); and whether the preflight ran: before a freeze, so that a dead LM or endpoint stops the run before any
    gold is frozen."""
    preflighted = settings.preflight and freezes_now(settings, settings.dataset, settings.split, data_file, gold_file)
    if preflighted:
        with KgServices(settings, endpoint, search) as services:
            preflight(settings, services, lm)
    freeze_missing_gold(
        settings, settings.dataset, settings.split, data_file=data_file, gold_file=gold_file, progress=progress
    )
    evalset = load_eval_set(
        settings, ids=ids, data_file=data_file, gold_file=gold_file, answerable_only=answerable_only, progress=progress
    )
    print(describe_filter(evalset), file=stream)
    if not len(evalset):
        raise EvalError("no questions to evaluate (check --ids / --limit / the answerable filter)")
    return evalset, preflighted


def _checked_inputs(settings: Settings, data_file: str | Path | None) -> Settings:
    """The graph, the input files and the demo pool checked before anything runs; a user's questions file takes
    the shared demo pool where the choice was left to `auto` (they are no bundled benchmark's)."""
    check_graph(settings, settings.dataset, data_file)
    check_file_inputs(settings, data_file)
    if data_file is not None and settings.demo_pool == "auto":
        settings = settings.model_copy(update={"demo_pool": "shared"})
    try:
        check_pool_choice(settings)
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    return settings


def _questions_left_in_runs(
    settings: Settings,
    variants: Sequence[str],
    evalset: EvalSet,
    out_dir: Path,
    *,
    resume: bool,
    retry_failed: bool,
    overwrite: bool,
) -> int:
    """What each variant's run directory says against this run (before any server is asked), and how many
    questions are left to answer in all."""
    several = len(variants) > 1
    todo = 0
    for variant in variants:
        vdir = out_dir / variant if several else out_dir
        vsettings = settings.model_copy(update={"variant": variant})
        check_out_dir(vdir, vsettings, resume=resume, overwrite=overwrite)
        todo += questions_left(vdir, evalset, resume=resume, retry_failed=retry_failed)
    return todo


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM takes the Ctrl-C path while the questions run (only the main thread may set handlers)."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run_variants(
    settings: Settings,
    variants: list[str],
    evalset: EvalSet,
    out_dir: Path,
    services: KgServices,
    tracker: Tracker,
    factory: ProgramFactory,
    *,
    lm: dspy.BaseLM | None,
    resume: bool,
    retry_failed: bool,
    overwrite: bool,
    progress: bool,
    preflight_first: bool = False,
    extra_config: dict[str, Any] | None = None,
) -> dict[str, VariantResult]:
    """Each variant into its run directory (one sub-directory each when there are several), then the comparison;
    `preflight_first`: the preflight, when any question is left to answer (after each run directory is checked)."""
    todo = _questions_left_in_runs(
        settings, variants, evalset, out_dir, resume=resume, retry_failed=retry_failed, overwrite=overwrite
    )
    if preflight_first and todo:
        preflight(settings, services, lm)
    results: dict[str, VariantResult] = {}
    several = len(variants) > 1
    invocation = _invocation_name(settings, variants, evalset)
    for variant in variants:
        vs = settings.model_copy(update={"variant": variant})
        warning = program_variant_warning(vs.program, variant)
        if warning:
            print(warning, file=sys.stderr)
        program = factory(vs, services.endpoint, services.search)
        vdir = out_dir / variant if several else out_dir
        try:
            warmup = warm_up(program, services, lm)
            result = run_variant(
                vs,
                evalset,
                vdir,
                program=program,
                endpoint=services.endpoint,
                lm=lm,
                resume=resume,
                retry_failed=retry_failed,
                overwrite=overwrite,
                progress=progress,
                tracker=tracker if tracker.enabled else None,
                run_tags={INVOCATION_TAG: invocation},
                extra_config=extra_config,
                warmup_seconds=warmup,
            )
        finally:
            program.close()  # given the endpoint, the program owns nothing shared
        results[variant] = result
        if result.interrupted or result.stopped:
            break
    _write_comparison(evalset, results, out_dir, tracker, several)
    return results


def _invocation_name(settings: Settings, variants: list[str], evalset: EvalSet) -> str:
    """The tag the variants' runs share: flat runs, one row per variant in MLflow's runs table."""
    name = run_name(" vs ".join(variants), evalset.dataset, evalset.split, settings.lm)
    return name + f" · {_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M:%S')}"


def _write_comparison(
    evalset: EvalSet, results: dict[str, VariantResult], out_dir: Path, tracker: Tracker, several: bool
) -> None:
    """comparison.png / .json / .md in the run directory, and in the tracked run(s). comparison.json: each
    variant's metrics, those after the first with `f1_delta` (its paired bootstrap CI, wins / losses / ties
    against the first variant: `report.comparison_metrics`)."""
    against = against_first({v: r.lines for v, r in results.items()})
    table = {v: {**r.metrics, **(comparison_metrics(against[v]) if v in against else {})} for v, r in results.items()}
    what = " vs ".join(results) if len(results) > 1 else next(iter(results), "")
    chart = comparison_chart(
        table, out_dir / "comparison.png", title=f"{what}: {evalset.name} ({len(evalset)} questions)"
    )
    write_json(out_dir / "comparison.json", table)
    write_file(out_dir / "comparison.md", markdown_table(table, against) + "\n")
    if tracker.enabled:
        for variant, comparison in against.items():  # on the variant's own (closed) run, beside its f1
            tracker.log_metrics_to(results[variant].run_id, comparison_metrics(comparison))
        files = [chart, out_dir / "comparison.json", out_dir / "comparison.md"] if several else [chart]
        for result in results.values():  # every variant's run carries the invocation's comparison
            for path in files:
                tracker.log_artifact_to(result.run_id, path)


def print_outcome(
    settings: Settings, evalset: EvalSet, results: dict[str, VariantResult], out_dir: Path, stream
) -> None:
    """The summary table, the run directory, and how to continue an interrupted run."""
    title = (
        f"{evalset.name} on {settings.endpoint}, LM {settings.lm}, "
        f"coverage {settings.schema_coverage}%, metric {settings.metric_mode} (percent; seconds per question)"
    )
    against = against_first({v: r.lines for v, r in results.items()})
    print("\n" + summary_table({v: r.metrics for v, r in results.items()}, title, against), file=stream)
    print(describe_subset(subset_record(evalset.filter_report, len(evalset))), file=stream)
    warmups = {
        v: r.metrics.get("warmup_seconds") for v, r in results.items() if r.metrics.get("warmup_seconds") is not None
    }
    if warmups:
        print("warm-up (loading, not in s/q): " + ", ".join(f"{v} {s:.1f} s" for v, s in warmups.items()), file=stream)
    pools = {v: describe_pool(r.demo_pool) for v, r in results.items()}
    for variant, line in pools.items() if len(set(pools.values())) > 1 else list(pools.items())[:1]:
        print(f"[{variant}] {line}" if len(set(pools.values())) > 1 else line, file=stream)
    print(f"\nrun directory: {out_dir}", file=stream)
    for variant, r in results.items():
        if r.stopped:
            print(
                f"error: [{variant}] {r.stopped}; fix it, then continue with "
                f"`{resume_command(out_dir, retry_failed=True, settings=settings)}`",
                file=sys.stderr,
            )
    if any(r.interrupted for r in results.values()):
        done = sum(len(r.lines) for r in results.values())
        print(
            f"interrupted: {done} finished questions are saved; continue with "
            f"`{resume_command(out_dir, settings=settings)}`",
            file=stream,
        )
