"""``ScriptedChatModel``: a LangChain chat model for tests and offline examples (needs
``langchain-core``, the ``langgraph`` extra). It answers each call with what its script
returns for the messages it was given, records those messages, and accepts tools (binding
them changes nothing: the script decides which tool calls to make)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

Script = Callable[[Sequence[BaseMessage]], AIMessage]
"""What the model replies to the messages of one call."""


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from ``script``; ``calls`` holds the messages of every
    call, in order."""

    script: Script
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "qemem-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The model itself: its script makes the tool calls."""
        return self
