"""What an install gives: a console script per command line (each one's `--help` works), the licence file, and
`py.typed` in the wheel's package. A fresh virtual environment installs the checkout's wheel (`pip install`, no
dependencies: the test's own environment lends them) and runs each installed script."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SCRIPTS: dict[str, str] = PYPROJECT["project"]["scripts"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    env.pop("PYTHONPATH", None)
    return env


def command_line_modules() -> set[str]:
    """The package's modules that are command lines: `python -m` runs them through `cli.run_main`."""
    found = set()
    for path in (REPO / "saga_dspy").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = [
            node
            for node in tree.body
            if isinstance(node, ast.If)
            and "__main__" in ast.unparse(node.test)
            and "__name__" in ast.unparse(node.test)
        ]
        uses_run_main = any(isinstance(n, ast.Name) and n.id == "run_main" for n in ast.walk(tree))
        if guarded and uses_run_main:
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found.add(module.removesuffix(".__main__"))
    return found


def test_every_command_line_has_a_console_script_whose_target_exists():
    targets = {name: value.split(":") for name, value in SCRIPTS.items()}
    modules = {module.removesuffix(".__main__") for module, _ in targets.values()}
    assert command_line_modules() <= modules, sorted(command_line_modules() - modules)
    assert {"saga-eval", "saga-optimize", "saga-ask", "saga-stats", "saga-schema", "saga-kg"} <= set(SCRIPTS)
    for name, (module, function) in targets.items():
        assert callable(getattr(importlib.import_module(module), function)), name


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_console_script_target_prints_its_help(name):
    """The entry point itself (not `python -m`), in a fresh interpreter, as the installed script calls it."""
    module, function = SCRIPTS[name].split(":")
    code = f"import sys; sys.argv = [{name!r}, '--help']; from {module} import {function}; {function}()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:") and "Traceback" not in proc.stderr


def test_the_licence_and_the_typing_marker_are_there():
    licence = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"} and "Apache License" in licence
    assert "Version 2.0, January 2004" in licence
    assert (REPO / "saga_dspy" / "py.typed").is_file()  # the wheel takes the whole package directory
    assert PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["saga_dspy"]
    classifiers = PYPROJECT["project"]["classifiers"]
    assert "Typing :: Typed" in classifiers and "License :: OSI Approved :: Apache Software License" in classifiers
    assert {"Homepage", "Repository", "Issues"} <= set(PYPROJECT["project"]["urls"])


def test_a_fresh_install_runs_every_console_script(tmp_path):
    """`pip install` of the checkout (its wheel, built here) into a new virtual environment, no dependencies
    fetched (the test's own site-packages are lent to it through a .pth file); then each installed script's
    `--help`, and the wheel's py.typed, bundled data and licence."""
    try:
        import hatchling  # noqa: F401  (the build backend, needed without build isolation)
    except ImportError:
        pytest.skip("hatchling (the build backend) is not installed here: `pip install hatchling` to run this")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
        ).stdout.strip()
    )
    lent = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (site / "lent.pth").write_text("\n".join(lent) + "\n")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", str(REPO)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    assert (site / "saga_dspy" / "py.typed").is_file() and (site / "saga_dspy" / "_data" / "benchmarks").is_dir()
    assert any(p.name == "LICENSE" for p in site.glob("saga_dspy-*.dist-info/**/*"))
    for name in SCRIPTS:
        script = env_dir / "bin" / name
        assert script.is_file(), name
        proc = subprocess.run([script, "--help"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.startswith("usage:"), (name, proc.stderr[-2000:])
