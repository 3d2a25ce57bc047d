"""Compiled vs default on the report set: the same questions, the same LM, in the same window, interleaved
(question by question, the two programs alternating which goes first), so a drift of the machine or the server
hits both alike. Each program's answers are a run directory of their own (`report/default`,
`report/compiled`: re-scorable with `eval rescore`); the table gives F1 and EM of both and the paired bootstrap
interval of the F1 difference (`eval.scoring.significance`). `resume` keeps the answers already written and runs
the rest; `report_of` reads a compile's report set back from its config.json (`optimize compare`). Other splits no
choice of the compile saw (another benchmark's dev split on the same graph) can join the report set: each is
compared in a directory of its own (`report-<benchmark>-<split>`), and the pooled interval covers them all.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from saga_dspy.agent.program import SagaProgram
from saga_dspy.config import Settings
from saga_dspy.errors import Interrupted
from saga_dspy.eval.files import write_file
from saga_dspy.eval.loading.answerability import subset_record
from saga_dspy.eval.loading.datasets import benchmark_info
from saga_dspy.eval.loading.evalset import EvalSet, load_eval_set
from saga_dspy.eval.running.answering import run_questions
from saga_dspy.eval.running.predictions import PREDICTIONS, PredictionsFile
from saga_dspy.eval.running.records import CONFIG, METRICS, run_config, write_json
from saga_dspy.eval.running.run_inputs import check_out_dir
from saga_dspy.eval.scoring.metrics import compute_metrics
from saga_dspy.eval.scoring.report import markdown_table, summary_table
from saga_dspy.eval.scoring.significance import PairedComparison, paired_by_id
from saga_dspy.eval.tracking.tracker import Tracker, run_name
from saga_dspy.optimize.compile_run import PROGRAM, CompileArgs, compile_services, tracked_compile
from saga_dspy.optimize.sets import OptimizeError

ROLES = ("default", "compiled")
REPORT_DIR = "report"


def compare_on_report(
    report: EvalSet,
    programs: dict[str, tuple[Any, Settings]],
    out_dir: Path,
    *,
    endpoint: Any,
    lm: Any = None,
    tracker: Tracker | None = None,
    progress: bool = False,
    stream=None,
    resume: bool = False,
    name: str = REPORT_DIR,
) -> dict[str, Any]:
    """Run `programs` ({role: (program, its settings)}) interleaved on `report`; writes the runs and the table
    under `out_dir/name`. `resume`: a role's answers already written to its run (for a question of `report`) are
    kept, not run again. The result's `f1` holds each role's F1 by question, for pooling."""
    stream = stream or sys.stdout
    roles = list(programs)
    base = out_dir / name
    files: dict[str, PredictionsFile] = {}
    lines: dict[str, list[dict[str, Any]]] = {role: [] for role in roles}
    wanted = {item.id for item in report.items}
    for role in roles:
        (base / role).mkdir(parents=True, exist_ok=True)
        path = base / role / PREDICTIONS
        if resume:
            lines[role] = [line for line in PredictionsFile.read(path, repair=True) if line["id"] in wanted]
        else:
            path.unlink(missing_ok=True)
        files[role] = PredictionsFile(path)
    done = {role: {line["id"] for line in lines[role]} for role in roles}
    if resume:
        print(f"resuming: {', '.join(f'{r} {len(done[r])}' for r in roles)} of {len(report)} answered", file=stream)
    mode = programs[roles[0]][1].metric_mode
    try:
        for index, item in enumerate(tqdm(report.items, desc="report set", unit="q", disable=not progress)):
            for role in roles if index % 2 == 0 else roles[::-1]:
                if item.id in done[role]:
                    continue
                program = programs[role][0]
                new, interrupted, _ = run_questions(program, [item], files[role], mode=mode, lm=lm, progress=False)
                if interrupted:
                    raise Interrupted(f"interrupted on the report set ({index} of {len(report)} questions done)")
                lines[role].extend(new)
    finally:
        for handle in files.values():
            handle.close()
    metrics = {}
    for role in roles:
        program, settings = programs[role]
        other = [r for r in roles if r != role]
        write_json(
            base / role / CONFIG,
            run_config(settings, report, program, endpoint, extra={"role": role, "interleaved_with": other}),
        )
        metrics[role] = compute_metrics(lines[role], total=len(report))
        metrics[role]["subset"] = subset_record(report.filter_report, len(report))
        write_json(base / role / METRICS, metrics[role])
    f1 = {role: {line["id"]: float(line["f1"]) for line in lines[role]} for role in roles}
    paired = paired_by_id(*(f1[role] for role in roles))
    text = comparison_text(report, metrics, paired)
    print("\n" + text, file=stream)
    write_file(base / "report.md", markdown_table(metrics) + f"\n\n{roles[1]} - {roles[0]} F1: {paired.describe()}\n")
    result = {"set": report.name, "ids": [i.id for i in report.items], "metrics": metrics, "paired": paired.as_dict()}
    write_json(base / "report.json", result)
    if tracker is not None:
        key = name.replace("-", "_")
        tracker.log_metrics(
            {
                **{f"{key}_{role}_f1": metrics[role].get("f1") for role in roles},
                **{f"{key}_{role}_em": metrics[role].get("em") for role in roles},
                f"{key}_delta_f1": paired.delta,
                f"{key}_ci_low": paired.low,
                f"{key}_ci_high": paired.high,
            }
        )
        tracker.log_artifacts([base / "report.md", base / "report.json"], artifact_path=name)
    return {**result, "f1": f1}


def report_of(compile_dir: Path) -> tuple[str, str, list[str]]:
    """(benchmark, split, question ids) of the report set a compile recorded in its config.json: the questions
    no choice of that compile saw."""
    path = Path(compile_dir) / CONFIG
    try:
        record = json.loads(path.read_text())["sets"]["report"]
        bench, split = str(record["name"]).split("/", 1)
        ids = [str(i) for i in record["ids"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OptimizeError(f"{path}: no report set recorded ({exc}); is it a compile's --out?") from None
    if not ids:
        raise OptimizeError(f"{path}: the compile's report set is empty")
    return bench, split, ids


def compare_compiled(
    settings: Settings,
    compile_dir: str | Path,
    *,
    also: Sequence[tuple[str, str]] = (),
    lm: Any = None,
    endpoint: Any = None,
    search: Any = None,
    resume: bool = False,
    overwrite: bool = False,
    experiment: str | None = None,
    progress: bool = False,
    stream=None,
) -> dict[str, Any]:
    """`optimize compare`: the compiled program (`settings.program`, else the compile's program.json) against the
    default (`settings` without a program) on the report set `compile_dir`'s compile recorded, written under it;
    then on each (benchmark, split) of `also` (all its answerable questions), and the pooled interval over all.
    The result is the report set's comparison, with `sets` (each set's) and `pooled` where `also` is given."""
    stream = stream or sys.stdout
    out_dir = Path(compile_dir)
    sets = check_report_dirs(settings, out_dir, also, resume=resume, overwrite=overwrite)
    bench, split, ids, _ = sets[0]
    compiled_path = compiled_program(settings, out_dir)
    tracker = Tracker(settings, experiment or f"saga-decisions-{bench}")
    name = run_name("compare compiled vs default", bench, split, settings.lm)
    params = {
        "dataset": bench,
        "report_set": f"{bench}/{split}",
        "n_report": len(ids or ()),
        "also": ",".join(f"{b}/{s}" for b, s in also),
        "program": str(compiled_path),
    }
    run: CompileArgs = {"endpoint": endpoint, "search": search}
    results: dict[str, dict[str, Any]] = {}
    with compile_services(settings, out_dir, run) as services:
        with tracked_compile(tracker, lm, name, params, "optimize-compare", out_dir):
            for set_bench, set_split, set_ids, set_name in sets:
                roles = role_settings(settings, set_bench, set_split, compiled_path)
                report = load_eval_set(roles["default"], ids=set_ids)
                programs = {
                    role: (SagaProgram(on, endpoint=services.endpoint, search=services.search), on)
                    for role, on in roles.items()
                }
                results[set_name] = compare_on_report(
                    report,
                    programs,
                    out_dir,
                    endpoint=services.endpoint,
                    lm=lm,
                    tracker=tracker,
                    progress=progress,
                    stream=stream,
                    resume=resume,
                    name=set_name,
                )
            result = results[REPORT_DIR]
            if len(results) > 1:
                pooled = pooled_comparison(results, out_dir, tracker=tracker, stream=stream)
                result = {**result, "sets": results, "pooled": pooled}
    return result


def compiled_program(settings: Settings, out_dir: Path) -> Path:
    """The compiled program compared: `settings.program`, else the compile's program.json."""
    path = Path(settings.program) if settings.program else out_dir / PROGRAM
    if not path.is_file():
        raise OptimizeError(f"no compiled program at {path}")
    return path


def role_settings(settings: Settings, bench: str, split: str, compiled_path: Path) -> dict[str, Settings]:
    """Each role's settings on one report set: the default without a program, the compiled with it."""
    on = settings.model_copy(update={"dataset": bench, "split": split})
    return {
        "default": on.model_copy(update={"program": None}),
        "compiled": on.model_copy(update={"program": str(compiled_path)}),
    }


def check_report_dirs(
    settings: Settings, out_dir: Path, also: Sequence[tuple[str, str]], *, resume: bool, overwrite: bool
) -> list[tuple[str, str, list[str] | None, str]]:
    """The report sets, (benchmark, split, ids or None for all, directory name), once every role's run directory
    can take them as `eval` decides (`check_out_dir`): answers there are kept with `resume` (the same settings),
    replaced only with `overwrite`. Called before the model loads."""
    bench, split, ids = report_of(out_dir)
    sets: list[tuple[str, str, list[str] | None, str]] = [(bench, split, ids, REPORT_DIR)]
    sets += [(b, s, None, f"{REPORT_DIR}-{b}-{s}") for b, s in also_checked(bench, also)]
    compiled_path = compiled_program(settings, out_dir)
    for set_bench, set_split, _, name in sets:
        for role, on in role_settings(settings, set_bench, set_split, compiled_path).items():
            check_out_dir(out_dir / name / role, on, resume=resume, overwrite=overwrite, elsewhere=None)
    return sets


def also_checked(bench: str, also: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The extra report splits, each checked: on the compile's graph, and not a split the compile chose on (its
    benchmark's own train or dev split)."""
    graph = benchmark_info(bench).kg
    checked = []
    for other, split in also:
        try:
            info = benchmark_info(other)
            resolved = info.resolve_split(split)
        except ValueError as exc:
            raise OptimizeError(f"--also {other}/{split}: {exc}") from None
        if info.kg != graph:
            raise OptimizeError(f"--also {other}/{split}: {other} is on {info.kg}, the compile on {graph}")
        if other == bench and resolved != info.test:
            raise OptimizeError(f"--also {other}/{split}: the compile chose on {bench}'s train and dev questions")
        if (other, resolved) in checked:
            continue
        checked.append((other, resolved))
    return checked


def pooled_comparison(
    results: dict[str, dict[str, Any]], out_dir: Path, *, tracker: Tracker | None = None, stream=None
) -> dict[str, Any]:
    """The paired interval over every report set's questions together (ids qualified by their set); written to
    `out_dir/report-pooled.json` and `.md`, printed, logged."""
    stream = stream or sys.stdout
    scores = {
        role: {f"{res['set']}#{qid}": value for res in results.values() for qid, value in res["f1"][role].items()}
        for role in ROLES
    }
    paired = paired_by_id(scores["default"], scores["compiled"])
    sets = {result["set"]: result["paired"] for result in results.values()}
    lines = [f"- {name}: compiled - default F1 {PairedComparison(**p).describe()}" for name, p in sets.items()]
    text = f"pooled over {', '.join(sets)} ({paired.n} questions): compiled - default F1 {paired.describe()}"
    print("\n" + text, file=stream)
    write_file(out_dir / f"{REPORT_DIR}-pooled.md", "\n".join([text, "", *lines]) + "\n")
    pooled = {"sets": sets, "paired": paired.as_dict()}
    write_json(out_dir / f"{REPORT_DIR}-pooled.json", pooled)
    if tracker is not None:
        tracker.log_metrics(
            {"pooled_delta_f1": paired.delta, "pooled_ci_low": paired.low, "pooled_ci_high": paired.high}
        )
        tracker.log_artifacts([out_dir / f"{REPORT_DIR}-pooled.md", out_dir / f"{REPORT_DIR}-pooled.json"])
    return pooled


def comparison_text(report: EvalSet, metrics: dict[str, dict[str, Any]], paired: PairedComparison) -> str:
    roles = list(metrics)
    title = f"report set {report.name} ({len(report)} questions, never used for selection), percent"
    return summary_table(metrics, title) + f"\n{roles[1]} - {roles[0]} F1: {paired.describe()}"


__all__ = [
    "REPORT_DIR",
    "ROLES",
    "also_checked",
    "check_report_dirs",
    "compare_compiled",
    "compare_on_report",
    "comparison_text",
    "pooled_comparison",
    "report_of",
]
