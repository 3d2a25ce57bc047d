"""The package's shape: layers import only downward (and so do the parts of eval/), no import goes round in a circle,
knowledge-graph differences are flavour data (no comparison against a KG's name, no KG name as a default, outside
`kg/flavours/` and `config.py`; no Wikidata id outside `kg/flavours/`), no lab notebook in comments and docstrings,
no module over 600 lines, no function over 80 lines but two at most. The rules read the source
(tests/helpers/codebase.py); benchmarks/code_metrics.py reports the same figures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import codebase

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS_ALLOWED = 2


@pytest.fixture(scope="module")
def modules() -> list[codebase.Module]:
    return codebase.modules()


def _module(tmp_path: Path, name: str, text: str) -> codebase.Module:
    path = tmp_path / "saga_dspy" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return codebase.Module(path, "saga_dspy." + name.removesuffix(".py").replace("/", "."), text, ast.parse(text))


def test_every_module_has_a_layer(modules):
    assert modules and all(codebase.layer_of(m.name) is not None for m in modules)


def test_no_upward_import(modules):
    assert codebase.upward_imports(modules) == []


def test_the_import_rule_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    cli = _module(tmp_path, "cli.py", "from saga_dspy.eval.errors import EvalError\n")
    schema = _module(
        tmp_path, "schema/__main__.py", "from ..grounding.flavours import flavour_for\nimport saga_dspy.kg\n"
    )
    assert codebase.upward_imports([cli, schema]) == [
        "cli.py:1 -> saga_dspy.eval.errors",
        "schema/__main__.py:1 -> saga_dspy.grounding.flavours",
    ]


def test_no_upward_import_inside_eval(modules):
    """eval/ is cut by concept into parts that import only downward: errors, then files and preflight, then
    scoring, loading, stats, tracking, running, reports, and the CLI on top (INNER_LAYERS)."""
    found = codebase.inner_upward_imports(modules)
    assert found == [], "imports of a higher part of the package:\n" + "\n".join(found)


def test_every_eval_part_has_a_layer(modules):
    assert all(codebase.inner_layer_of(m.name) for m in modules if m.name.startswith("saga_dspy.eval"))


def test_the_inner_import_rule_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    mods = [
        _module(tmp_path, "eval/__init__.py", ""),
        _module(tmp_path, "eval/errors.py", ""),
        _module(tmp_path, "eval/files.py", "from saga_dspy.eval.errors import EvalError\n"),
        _module(tmp_path, "eval/scoring/__init__.py", ""),
        _module(tmp_path, "eval/scoring/metrics.py", "def f():\n    from saga_dspy.eval.loading.gold import x\n"),
        _module(tmp_path, "eval/loading/__init__.py", ""),
        _module(tmp_path, "eval/loading/gold.py", "from ..scoring import metrics\nfrom ..running import runner\n"),
        _module(tmp_path, "eval/running/__init__.py", ""),
        _module(
            tmp_path, "eval/running/runner.py", "from saga_dspy.eval import files, __main__\nimport saga_dspy.kg\n"
        ),
        _module(tmp_path, "eval/__main__.py", "from saga_dspy.eval.running.runner import evaluate\n"),
        _module(tmp_path, "kg/__init__.py", ""),
    ]
    assert codebase.inner_upward_imports(mods) == [
        "eval/loading/gold.py:2 -> saga_dspy.eval.running.runner",
        "eval/running/runner.py:1 -> saga_dspy.eval.__main__",
        "eval/scoring/metrics.py:2 -> saga_dspy.eval.loading.gold",
    ]
    with pytest.raises(KeyError, match="INNER_LAYERS"):
        codebase.inner_layer_of("saga_dspy.eval.misc.x")


def test_no_import_cycle(modules):
    """No circle anywhere: inside each package a module imports only modules below it there (lazy and
    TYPE_CHECKING imports too), and no two modules of different packages import each other round."""
    found = codebase.import_cycles(modules)
    assert found == [], "import circles:\n" + "\n".join(found)


def test_no_import_cycle_between_packages(modules):
    """The packages and leaves, taken whole, import each other without a circle (agent, lm and signatures share a
    layer, so the layer rule alone does not see one between them)."""
    found = codebase.import_cycles(modules, by_package=True)
    assert found == [], "import circles between packages:\n" + "\n".join(found)


def test_the_cycle_rule_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    mods = [
        _module(tmp_path, "__init__.py", ""),
        _module(tmp_path, "agent/__init__.py", ""),
        _module(tmp_path, "agent/a.py", "from saga_dspy.agent import b\n"),
        _module(tmp_path, "agent/b.py", "import os\nfrom .c import run\n"),
        _module(tmp_path, "agent/c.py", "def run():\n    from saga_dspy.agent.a import x\n"),
        _module(tmp_path, "agent/d.py", "from saga_dspy.lm import wire\nfrom . import c\n"),
        _module(tmp_path, "lm/__init__.py", ""),
        _module(
            tmp_path,
            "lm/wire.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import saga_dspy.agent.d\n",
        ),
        _module(tmp_path, "kg/__init__.py", ""),
        _module(tmp_path, "kg/base.py", "from saga_dspy.kg import cache\n"),
        _module(tmp_path, "kg/cache.py", "from saga_dspy.config import Settings\n"),
    ]
    assert codebase.import_cycles(mods) == [
        "agent/a.py:1 -> agent/b.py:2 -> agent/c.py:2 -> agent/a.py",
        "agent/d.py:1 -> lm/wire.py:3 -> agent/d.py",
    ]
    assert codebase.import_cycles(mods, by_package=True) == ["agent (agent/d.py:1) -> lm (lm/wire.py:3) -> agent"]


def test_no_kg_name_comparison_outside_the_flavours(modules):
    found = codebase.kg_name_comparisons(modules)
    assert found == [], "ask the flavour (kg/flavours/) instead of comparing a knowledge graph's name"


def test_the_kg_name_rule_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    text = (
        'if settings.kg == "freebase": pass\n'
        'x = 1 if kg != "Wikidata" else 2\n'
        'ok = kg in ("wikidata", "other")\n'
        'match kg:\n    case "freebase":\n        pass\n'
        'fine = {"wikidata": 1}[kg] and flavour.name == WIKIDATA.name\n'
    )
    bad = _module(tmp_path, "grounding/x.py", text)
    home = _module(tmp_path, "kg/flavours/y.py", text)
    assert codebase.kg_name_comparisons([bad, home]) == [
        "grounding/x.py:1",
        "grounding/x.py:2",
        "grounding/x.py:3",
        "grounding/x.py:5",
    ]


def test_no_kg_name_default_outside_the_flavours(modules):
    assert codebase.kg_name_defaults(modules) == [], "default to config.DEFAULT_KG"


def test_no_wikidata_id_outside_the_flavours(modules):
    """Every Wikidata id the code names (a class, a property, a constraint value, a prompt's example) lives in
    `kg/flavours/` (`wikidata_ids`, the flavour's queries); docstrings may name them as prose."""
    found = codebase.id_literals(modules)
    assert found == [], "name the id from kg/flavours/ (wikidata_ids):\n" + "\n".join(found)


def test_the_id_and_default_rules_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    text = (
        '"""Ids such as P31 in a docstring are prose."""\n'
        'HUMAN = "Q5"\n'
        'QUERY = "SELECT ?x WHERE { ?x wdt:P279* wd:Q35120 }"\n'
        'fine = ("P", "Q0", "MP3", "P31x", "q5", "sP31")\n'
        'def f(kg: str = "wikidata", *, pid=f"wdt:P19 {x}"):\n'
        '    """P19 here is prose too."""\n'
        'g = lambda kg="freebase": kg\n'
    )
    bad = _module(tmp_path, "grounding/x.py", text)
    home = _module(tmp_path, "kg/flavours/y.py", text)
    assert codebase.id_literals([bad, home]) == [
        "grounding/x.py:2: Q5",
        "grounding/x.py:3: P279, Q35120",
        "grounding/x.py:5: P19",
    ]
    assert codebase.kg_name_defaults([bad, home]) == ["grounding/x.py:5", "grounding/x.py:7"]


def test_no_lab_notebook_in_comments_and_docstrings(modules):
    mentions = codebase.notebook_mentions(modules)
    assert mentions == [], "measurements belong in docs/RESULTS.md, rationale in docs/DESIGN.md, history in git"


def test_the_notebook_rule_can_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(codebase, "PACKAGE", tmp_path / "saga_dspy")
    text = (
        '"""The lookup (issue 12).\n\nMeasured in session 17."""\n'
        "x = 1  # a small model needs it\n"
        'y = "issue 12 in a string is data"\n'
        "# F1 0.41 on dev\n"
        "# the bundled Qwen2.5-Coder-1.5B-Instruct\n"
    )
    assert [m.split(": ")[0] for m in codebase.notebook_mentions([_module(tmp_path, "z.py", text)])] == [
        "z.py:1",
        "z.py:3",
        "z.py:4",
        "z.py:6",
    ]


def test_no_module_over_600_lines(modules):
    long = [f"{m.rel} ({m.lines})" for m in modules if m.lines > MAX_MODULE_LINES]
    assert long == []


def test_no_function_over_80_lines_but_two_at_most(modules):
    """A long function is split into named steps; two may stay long while their split waits."""
    long = codebase.long_functions(modules, MAX_FUNCTION_LINES)
    assert len(long) <= LONG_FUNCTIONS_ALLOWED, "functions over 80 lines:\n" + "\n".join(long)
