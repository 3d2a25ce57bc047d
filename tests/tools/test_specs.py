"""The tool specs are the one copy: make_tools names and documents the tools from them, and the
controller's instructions (what the LM reads) list each of them."""

from __future__ import annotations

from conftest import make_settings

from saga_dspy.agent.react import SagaReAct
from saga_dspy.grounding.context import QuestionContext
from saga_dspy.schema import load_hierarchy, load_schema_index
from saga_dspy.signatures import SagaController
from saga_dspy.tools import make_tools
from saga_dspy.tools.specs import TOOL_NAMES, TOOL_SPECS


def test_make_tools_follows_the_specs(endpoint):
    settings = make_settings()
    schema = load_schema_index(settings)
    ctx = QuestionContext(settings, endpoint, None, schema, load_hierarchy(settings, endpoint, schema))
    tools = make_tools(ctx)
    assert tuple(t.__name__ for t in tools) == TOOL_NAMES
    for tool in tools:
        spec = TOOL_SPECS[tool.__name__]
        assert tool.__doc__ == spec.description
        params = list(tool.__code__.co_varnames[: tool.__code__.co_argcount])
        assert params == ([spec.argument] if spec.argument else [])


def test_the_controller_instructions_list_every_spec():
    react = SagaReAct(SagaController)
    text = react.react.signature.instructions
    for i, spec in enumerate(TOOL_SPECS.values(), start=1):
        assert f"({i}) {spec.name}({spec.argument or ''}): {spec.description}" in text
    assert set(react.tools) == set(TOOL_NAMES)
