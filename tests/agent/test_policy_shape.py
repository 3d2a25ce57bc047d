"""The final-query policy's shape: it returns decisions the episode applies (it assigns no field of the episode),
and no module of `agent/` imports, even for type checking only, a module that imports it back."""

from __future__ import annotations

import ast

from tests.helpers import codebase


def _agent_imports() -> dict[str, set[str]]:
    """agent module -> the agent modules it imports (`from saga_dspy.agent import x` counts x)."""
    mods = {m.name: m for m in codebase.modules() if m.name.startswith("saga_dspy.agent.")}
    out: dict[str, set[str]] = {name: set() for name in mods}
    for name, module in mods.items():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            out[name] |= {t for t in targets if t in mods and t != name}
    return out


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs (a, b) where a reaches b and b reaches a."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {name: reach(name) for name in graph}
    return sorted((a, b) for a in graph for b in reached[a] if a < b and a in reached[b])


def test_no_import_circle_inside_agent():
    assert _cycles(_agent_imports()) == []


def test_the_cycle_rule_can_fail():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [("a", "b")]


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
