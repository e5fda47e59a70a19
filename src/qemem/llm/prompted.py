"""``prompted_request``: the one shape of the requests that show a judge (or a splitter) a
prompt and its input and want a JSON answer of a given schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from qemem.llm.types import LLMRequest, Message
from qemem.prompts import render


def prompted_request(
    prompt: str,
    stage: str,
    schema: type[BaseModel],
    name: str,
    inputs: Mapping[str, Any],
    /,
    *,
    max_tokens: int = 512,
    **shown: object,
) -> LLMRequest:
    """The request of stage ``stage``: the system prompt ``prompt``, the user message
    ``<prompt>_input`` rendered with ``shown`` (text already marked as data), a JSON answer of
    ``schema`` (named ``name``) in at most ``max_tokens``, and the structured ``inputs`` the
    offline LLM reads."""
    return LLMRequest(
        system=render(prompt),
        messages=[Message("user", render(f"{prompt}_input", **shown))],
        stage=stage,
        max_tokens=max_tokens,
        schema=schema.model_json_schema(),
        schema_name=name,
        inputs=dict(inputs),
    )
