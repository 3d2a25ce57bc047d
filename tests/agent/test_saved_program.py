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
