"""saga-dspy: SAGA (schema-aware grounding for text-to-SPARQL) as a DSPy program.

The public faces, for a newcomer's first look:

    from saga_dspy import Settings, SagaProgram, build_lm, evaluate

    settings = Settings(variant="full", lm="local")
    program = SagaProgram(settings)             # saga_dspy/agent/program.py
    prediction = program(question="Who founded Tencent?")

Where the rest lives: `kg` (endpoints, results, search, the bundled store) <- `schema` <- `grounding`
<- `tools` <- `agent` (signatures, ReAct, episode, program, demos) and `lm` <- `eval`, `optimize`
<- the CLIs (`ask`, `stats`, `python -m saga_dspy.eval` ...). docs/CONTRACTS.md has the interfaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from saga_dspy.config import Settings, apply_offline_env

# The offline defaults (no cost-map download, no hub access, no slow MLflow exit) must be in the
# environment before anything imports litellm, dspy or mlflow; setdefault never overrides a user's value.
apply_offline_env()

if TYPE_CHECKING:
    from saga_dspy.agent.program import SagaProgram
    from saga_dspy.eval.running.runner import evaluate
    from saga_dspy.lm import build_lm

# Lazy (PEP 562): `import saga_dspy.kg` must not pull in dspy, mlflow and litellm (seconds to import).
_LAZY = {
    "SagaProgram": "saga_dspy.agent.program",
    "build_lm": "saga_dspy.lm",
    "evaluate": "saga_dspy.eval.running.runner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'saga_dspy' has no attribute {name!r}")


__all__ = ["SagaProgram", "Settings", "build_lm", "evaluate"]
