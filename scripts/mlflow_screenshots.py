"""Screenshots of the MLflow UI over a fresh three-variant eval, taken in a real (headless) browser.

    .venv/bin/python scripts/mlflow_screenshots.py                    # writes docs/screenshots/*.png
    .venv/bin/python scripts/mlflow_screenshots.py --questions 6 --keep   # keep the store, print its URI

What it does: evaluates `full`, `no-query-form` and `spinach` on a few QALD-10 test questions of the
bundled sample with the test suite's scripted LM (real program, real tools; the script makes spinach
miss some answers so the variants differ) into a new sqlite MLflow store; starts `mlflow ui` on
loopback on a free port over that store; opens it with Playwright driving the system Chromium
(`--chromium`, default /usr/bin/chromium; no browser is downloaded) at the addresses the CLI prints
(`tracking.ui_hint`); saves under `docs/screenshots/` the runs table as it opens (a row per variant
with its metrics in percent, no click), the chart view's f1 chart (a bar per variant), the Traces tab
in the shared view (a trace per question and variant, with the variant, f1, em and question id
columns), the comparison of two variants' traces question by question with their assessments (f1,
em) and the gold (expectations), and one trace as it opens (the question's input, its outputs led by
the answers and the SPARQL) and at a tool span; stops the server; keeps each PNG small (a 256-colour palette).
Needs the `playwright` package (the `docs` extra) and a Chromium binary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from saga_dspy.eval.tracking.tracker import Tracker, apply_mlflow_env, ui_hint  # noqa: E402

apply_mlflow_env()  # the offline MLflow environment before mlflow is imported

from conftest import make_settings  # noqa: E402
from helpers.scripted_lm import TwoVariantLM, scripted_plans, wrong_plan  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from saga_dspy.eval.loading.evalset import load_eval_set  # noqa: E402
from saga_dspy.eval.running.runner import evaluate  # noqa: E402

EXPERIMENT = "saga-eval-qald10-test"
VARIANTS = ["full", "no-query-form", "spinach"]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def run_eval(store: Path, questions: int) -> str:
    """Three variants into a new store; returns the tracking URI."""

    uri = f"sqlite:///{store / 'mlflow.db'}"
    settings = make_settings(
        dataset="qald10",
        split="test",
        limit=questions,
        lm="scripted",
        lm_cache=False,
        mlflow=True,
        mlflow_uri=uri,
        num_threads=2,
    )
    evalset = load_eval_set(settings, progress=False)
    plans = scripted_plans(evalset.items)
    wrong = {item.question: wrong_plan(item.question) for item in evalset.items[1::2]}
    evaluate(
        settings,
        VARIANTS,
        out=store / "run",
        lm=TwoVariantLM(plans, wrong),
        progress=False,
        experiment=EXPERIMENT,
    )
    return uri


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ui(uri: str, store: Path, port: int) -> subprocess.Popen:
    mlflow_exe = Path(sys.executable).with_name("mlflow")
    cmd = [
        str(mlflow_exe) if mlflow_exe.exists() else "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(store / "mlflow-ui.log", "w")
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"},
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow ui exited: {(store / 'mlflow-ui.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    stop_ui(proc)
    raise RuntimeError("mlflow ui did not answer within 90 s")


def stop_ui(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its workers: a session of their own
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def ids(uri: str) -> dict:
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id])
    traces = client.search_traces(locations=[exp.experiment_id], max_results=50)
    return {
        "uri": uri,
        "experiment": exp.experiment_id,
        "runs": {r.data.params["variant"]: r.info.run_id for r in runs},
        "traces": [t.info.trace_id for t in traces],
    }


def close_assistant(page) -> None:
    """Dismiss a first-visit guidance popup (it blocks the page), then close the side panel of MLflow's
    assistant if it is open (it takes a third of the page)."""
    got_it = page.get_by_role("button", name="Got it").filter(visible=True)
    if got_it.count():
        got_it.first.click()
        page.wait_for_timeout(500)
    close = page.locator("[data-component-id='mlflow.assistant.chat_panel.close']").filter(visible=True)
    if close.count():
        close.first.click()
        page.wait_for_timeout(500)


def screenshots(base: str, found: dict, out: Path, chromium: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    exp = found["experiment"]
    shots: list[Path] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})

        def shot(name: str) -> None:
            page.wait_for_timeout(2500)
            path = out / f"{name}.png"
            page.screenshot(path=str(path))
            shots.append(path)

        # the addresses the CLI prints at the end of a run, on this server's port
        printed = ui_hint(found["uri"], exp).replace("http://127.0.0.1:5000", base)
        runs_url = re.search(r"runs: +(\S+)", printed).group(1)
        traces_url = re.search(r"traces: +(\S+)", printed).group(1)

        # 1. the runs table as the printed address opens it: a row per variant with its metrics (percent)
        page.goto(runs_url, wait_until="load")
        page.wait_for_timeout(4000)
        close_assistant(page)
        shot("runs-table")

        # 2. the chart view, filtered to f1: one bar chart, a bar per variant
        page.goto(runs_url + "&compareRunsMode=CHART", wait_until="load")
        page.wait_for_timeout(4000)
        close_assistant(page)
        search = page.get_by_placeholder(re.compile("Search metric charts", re.I))
        if search.count():
            search.first.fill("f1")
            page.wait_for_timeout(2000)
        shot("f1-chart")

        # 3. the Traces tab as the printed address opens it (the shared view): a trace per question and
        # variant, with the variant, f1, em and question id tags as columns
        page.goto(traces_url, wait_until="load")
        page.locator("[data-component-id='web-shared.traces-table.search']").wait_for(timeout=120_000)
        page.wait_for_timeout(3000)
        close_assistant(page)
        shot("traces-table")

        # 4. the trace comparison: the evaluation runs page comparing full to spinach, question by question,
        # each question's traces paired with their assessments (f1, em) and expectations (the gold), the run
        # list folded away
        full, other = found["runs"]["full"], found["runs"]["spinach"]
        page.goto(
            f"{base}/#/experiments/{exp}/evaluation-runs?selectedRunUuid={full}&compareToRunUuid={other}",
            wait_until="load",
        )
        page.wait_for_timeout(6000)
        close_assistant(page)
        fold = page.locator('[data-component-id="mlflow.experiment_page.table_resizer.collapse"]')
        if fold.count():  # the run list's fold button, on its right edge
            fold.first.click()
        page.wait_for_timeout(4000)
        shot("trace-comparison")

        # 5. a trace as it opens (the question's inputs and outputs), then one of its tool spans
        if found["traces"]:
            page.goto(f"{base}/#/experiments/{exp}/traces?workflowType=machine_learning", wait_until="load")
            page.wait_for_timeout(5000)
            close_assistant(page)
            page.get_by_text('{"question"').last.click()
            page.wait_for_timeout(3000)
            shot("trace-outputs")  # the question's span: its input, its outputs led by the answers and SPARQL
            tool = page.get_by_text("tool execute_sparql", exact=True).filter(visible=True)
            if tool.count():
                tool.first.click(timeout=10_000, force=True)  # the span tree keeps re-rendering: never "stable"
            shot("trace")
        browser.close()
    return shots


def small_png(path: Path) -> None:
    """The screenshot with a 256-colour palette: a third of the bytes, no visible change for a web page."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=8, help="questions per variant (a trace each)")
    parser.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--store", help="reuse a store written by an earlier run (a directory with mlflow.db)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store")
    args = parser.parse_args()

    store = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="saga-mlflow-ui-"))
    uri = f"sqlite:///{store / 'mlflow.db'}" if args.store else run_eval(store, args.questions)
    if args.store:  # the experiment's note and shared views as this code writes them
        Tracker(make_settings(mlflow=True, mlflow_uri=uri, trace="none"), EXPERIMENT, autolog=False).close()
    found = ids(uri)
    print(json.dumps(found, indent=2))
    port = free_port()
    proc = start_ui(uri, store, port)
    try:
        shots = screenshots(f"http://127.0.0.1:{port}", found, Path(args.out), args.chromium)
    finally:
        stop_ui(proc)
    for path in shots:
        small_png(path)
        print(path)
    if args.keep or args.store:
        print(f"store: {store}")
    else:
        shutil.rmtree(store, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
