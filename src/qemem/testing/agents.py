"""A scripted model for the OpenAI Agents SDK (the ``openai-agents`` extra): the tests of
:mod:`qemem.integrations.openai_agents` and the offline example run an ``Agent`` with it, so no
model is called. Each call of the model takes the next step of its script: text to say, a
function tool to call, or a function of the model's input giving either (to say what a tool
returned, say). The inputs it was called with are kept in ``inputs``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


@dataclass(frozen=True)
class ToolCall:
    """A step that calls function tool ``name`` with ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Reply = str | ToolCall
Step = Reply | Callable[[list[Any]], Reply]


def tool_outputs(items: Sequence[Any]) -> list[str]:
    """The outputs of the function tool calls among a model's input items, in order."""
    return [
        str(item.get("output", ""))
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


class ScriptedModel(Model):
    """A ``Model`` that answers each call with the next step of ``script`` (it fails when
    the script has run out)."""

    def __init__(self, script: Sequence[Step]) -> None:
        self.script = list(script)
        self.inputs: list[list[Any]] = []
        self._calls = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        given = kwargs.get("input", args[1] if len(args) > 1 else "")
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
        self.inputs.append(items)
        if not self.script:
            raise AssertionError(f"the script ran out at call {len(self.inputs)}")
        step = self.script.pop(0)
        reply = step(items) if callable(step) else step
        self._calls += 1
        return ModelResponse(output=[self._output(reply)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("ScriptedModel does not stream: run it with Runner.run")

    def _output(self, reply: Reply) -> Any:
        if isinstance(reply, ToolCall):
            call_id = f"call_{self._calls}"
            return ResponseFunctionToolCall(
                id=f"fc_{self._calls}",
                call_id=call_id,
                type="function_call",
                name=reply.name,
                arguments=json.dumps(reply.arguments),
            )
        return ResponseOutputMessage(
            id=f"msg_{self._calls}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(text=reply, type="output_text", annotations=[])],
        )
