"""The final-query policy's shape: it returns decisions the episode applies (it assigns no field of the episode),
and no module of `agent/` imports, even for type checking only, a module that imports it back."""

from __future__ import annotations

import ast

from tests.helpers import codebase


def test_no_import_circle_inside_agent():
    """The policy reads an EpisodeView and returns decisions: episode imports final_query, never the reverse."""
    graph = codebase.import_graph()
    assert "saga_dspy.agent.episode" not in graph["saga_dspy.agent.final_query"]
    assert "saga_dspy.agent.final_query" in graph["saga_dspy.agent.episode"]


def test_the_policy_writes_no_episode_field():
    module = next(m for m in codebase.modules() if m.name == "saga_dspy.agent.final_query")
    writes = [
        node.lineno
        for node in ast.walk(module.tree)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "episode"
    ]
    assert writes == []
