"""The tools as a test reads them: by name, each returning its observation text."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from saga_dspy.tools import ToolOutput, observation_of


def observing(tools: Iterable[Callable[..., ToolOutput]]) -> dict[str, Callable[..., str]]:
    def text_of(tool: Callable[..., ToolOutput]) -> Callable[..., str]:
        def call(*args: Any, **kwargs: Any) -> str:
            return observation_of(tool(*args, **kwargs))

        return call

    return {tool.__name__: text_of(tool) for tool in tools}
