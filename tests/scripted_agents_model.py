"""A scripted OpenAI Agents SDK `Model`: each turn answers with the next prepared output items.

No OpenAI call, no API key: ``get_response`` records what the SDK sent and pops
the next step. A step is a list of output items (`call` and `say` build them).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText


def call(name: str, arguments: dict[str, Any] | str, call_id: str) -> ResponseFunctionToolCall:
    """A function call item as the Responses API returns it (``arguments`` as JSON text)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ResponseFunctionToolCall(
        type="function_call",
        name=name,
        arguments=text,
        call_id=call_id,
        id=f"fc_{call_id}",
        status="completed",
    )


def say(text: str) -> ResponseOutputMessage:
    """A final assistant message."""
    return ResponseOutputMessage(
        type="message",
        id="msg_final",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers each model turn with the next step; records every input it was given."""

    def __init__(self, *steps: list[Any]) -> None:
        self.steps = list(steps)
        self.inputs: list[Any] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        self.inputs.append(input)
        if not self.steps:
            raise AssertionError("the agent asked the model for more turns than scripted")
        return ModelResponse(output=self.steps.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")

    def tool_outputs(self) -> dict[str, str]:
        """Every ``function_call_output`` the model was sent, by call id (the last one wins)."""
        found: dict[str, str] = {}
        for sent in self.inputs:
            for item in sent if isinstance(sent, list) else ():
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    found[item["call_id"]] = item["output"]
        return found
