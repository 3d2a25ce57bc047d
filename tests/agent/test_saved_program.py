"""Programs saved before the restructure (saga_dspy/program.py, now saga_dspy/agent/program.py) still load:
dspy saves state per predictor name (answer_type, react.react, react.extract, prune, check), not per module path.
The fixture was written by `SagaProgram.save` of the code before the move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_settings

from saga_dspy import SagaProgram

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "program-before-restructure.json"


def test_a_program_saved_before_the_move_loads_with_its_demos_and_instructions():
    settings = make_settings(demos=0)
    program = SagaProgram.load(FIXTURE, settings, endpoint=object(), search=object())
    saved = json.loads(FIXTURE.read_text())
    assert len(program.react.react.demos) == len(saved["react.react"]["demos"]) == 1
    assert program.react.react.demos[0]["next_tool_name"] == "stop"
    assert program.react.react.signature.instructions.startswith("COMPILED INSTRUCTIONS ")
    assert len(program.answer_type.demos) == 2


def test_the_settings_program_path_loads_the_same(tmp_path):
    program = SagaProgram(make_settings(demos=0, program=str(FIXTURE)), endpoint=object(), search=object())
    assert program.react.react.signature.instructions.startswith("COMPILED INSTRUCTIONS ")


def test_a_file_that_is_no_program_fails_with_a_clear_message(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"kind": "optimize", "variant": "full"}))
    with pytest.raises(ValueError, match="is not a saved SagaProgram"):
        SagaProgram.load(path, make_settings(demos=0), endpoint=object(), search=object())


def _pool_records(n: int) -> list[dict]:
    from saga_dspy.agent.pools import choose_pool

    path = choose_pool(make_settings()).path
    return [{**json.loads(line), "source": "gold"} for line in path.read_text().splitlines()[:n]]


def test_a_compiled_pool_program_saves_and_loads_its_pool_k_and_instructions(tmp_path):
    from saga_dspy.agent.compiled_pool import CompiledPool

    program = SagaProgram(make_settings(demos=2), endpoint=object(), search=object())
    program.use_pool(CompiledPool.of(_pool_records(4), 3))
    program.react.react.signature = program.react.react.signature.with_instructions("COMPILED INSTRUCTIONS")
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = SagaProgram(make_settings(demos=0, program=str(path)), endpoint=object(), search=object())
    assert loaded.settings.demos == 3 and len(loaded.demo_pool()) == 4
    assert loaded.compiled_pool.sources() == {"gold": 4}
    assert loaded.react.react.signature.instructions == "COMPILED INSTRUCTIONS"
    assert len(loaded.demo_pool().select("What is the capital of the Philippines?", 3)) == 3


def test_a_compiled_pool_this_version_cannot_read_fails_in_one_line(tmp_path):
    from saga_dspy.agent.compiled_pool import CompiledPool

    program = SagaProgram(make_settings(), endpoint=object(), search=object())
    program.use_pool(CompiledPool.of(_pool_records(1), 2))
    path = tmp_path / "program.json"
    program.save(str(path))
    state = json.loads(path.read_text())
    for key, value, why in (("format", 9, "format 9"), ("k", -1, "k must be"), ("records", [{"q": 1}], "records")):
        path.write_text(json.dumps({**state, "saga_demo_pool": {**state["saga_demo_pool"], key: value}}))
        with pytest.raises(ValueError, match=why) as err:
            SagaProgram.load(path, make_settings(), endpoint=object(), search=object())
        assert "\n" not in str(err.value) and str(path) in str(err.value)
