"""A ChatAdapter that begins the model's reply for it: the prompt ends with an assistant message holding the
reply's first fields, and the model only continues it.

The final step after the controller's turns uses it (`Settings.final_extract="prefill"`): the controller's own
prompt (so a local model's prefix cache holds all of it but the last lines) with the reply begun up to the
query, `... [[ ## next_tool_name ## ]] execute_sparql [[ ## next_tool_args ## ]] {"sparql": "`. The model
cannot choose another tool, and nothing is evaluated twice. A backend that continues a final assistant message
(the local one, llama.cpp's server) returns the continuation; one that answers with a fresh reply instead is
read as that reply."""

from __future__ import annotations

from typing import Any

from saga_dspy.agent.formatting import StringFieldsAdapter


class BegunReplyAdapter(StringFieldsAdapter):
    """ChatAdapter whose reply starts with `begun` (the text of the reply's first fields)."""

    def __init__(self, begun: str, callbacks: list[Any] | None = None, closing: str = "dspy"):
        super().__init__(callbacks=callbacks, use_json_adapter_fallback=False, closing=closing)
        self.begun = begun

    def format(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        return [*super().format(signature, demos, inputs), {"role": "assistant", "content": self.begun}]

    def parse(self, signature: Any, completion: str) -> dict[str, Any]:
        fresh = completion.lstrip().startswith("[[ ## ")  # the backend answered anew instead of continuing
        return super().parse(signature, completion if fresh else self.begun + completion)


__all__ = ["BegunReplyAdapter"]
