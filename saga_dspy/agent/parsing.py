"""Reading the LM's tool choice: tool names (as written, quoted or called) and arguments as JSON, text or key=value;
property lists. Never raises."""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from saga_dspy.config import DEFAULT_KG
from saga_dspy.kg.flavours import flavour_for

FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
MARKER = re.compile(r"\[\[ ## \w+ ## \]\]")  # an adapter's field marker the model wrote into a value


def normalize_tool_name(raw: Any, available: Iterable[str]) -> str | None:
    """The tool named by what the model wrote (`execute_sparql`, `` `Execute_SPARQL` ``, `search_wikidata("x")`), None
    for a name it has no tool for: no other name stands for a tool (none was seen to fire in the recorded runs)."""
    names = list(available)
    text = str(raw or "").strip().strip("`'\"").strip()
    text = re.split(r"[\s(]", text, maxsplit=1)[0].strip().lower() if text else ""
    text = text.rstrip(":.,;")
    return text if text in names else None


def parse_tool_args(raw: Any, params: list[str]) -> dict[str, Any]:
    """Tool arguments from whatever the LM wrote (a dict, JSON text, a bare value); never raises."""
    value: Any = raw
    if isinstance(raw, str):
        text = FENCE.sub("", raw.strip()).strip()
        value = text
        if text.startswith(("{", "[")):
            for loader in (json.loads, ast.literal_eval):
                try:
                    value = loader(text)
                    break
                except Exception:  # LM text: any loader failure means try the next reading
                    continue
            else:
                try:
                    import json_repair  # lazy: only a broken JSON reply needs it (it ships with dspy)

                    value = json_repair.loads(text)
                except Exception:  # unrepairable LM text: keep it as the raw argument
                    value = text
        elif text in ("", "{}", "None", "null"):
            value = {}
    if value is None:
        value = {}
    if isinstance(value, dict):
        args = {str(k): v for k, v in value.items()}
        if len(params) == 1 and params[0] not in args and len(args) == 1:
            args = {params[0]: next(iter(args.values()))}
        known = {k: v for k, v in args.items() if k in params}
        return known
    if isinstance(value, (list, tuple)) and len(params) == 1 and len(value) == 1:
        value = value[0]
    if not params:
        return {}
    if isinstance(value, str):
        value = FENCE.sub("", value).strip()
    return {params[0]: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}


def params_of(func: Callable) -> list[str]:
    try:
        return [
            p.name
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
    except (TypeError, ValueError):
        return []


def parse_pids(raw: Any, kg: str = DEFAULT_KG) -> list[str]:
    """Property ids from whatever the LM returned (list, JSON-ish text, prose); never raises."""
    if raw is None:
        return []
    if isinstance(raw, (list, tuple, set)):
        text = " ".join(str(x) for x in raw)
    else:
        text = str(raw)
    seen: list[str] = []
    for pid in flavour_for(kg).property_ids_in(text):
        if pid not in seen:
            seen.append(pid)
    return seen
