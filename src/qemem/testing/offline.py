"""OfflineLLM: the one deterministic provider for tests, demos and ``QEMEM_LLM=fake``.

Resolution order for a request: the ``handler`` given to :class:`OfflineLLM` (a test scripting
answers); else the answerer of the request's stage (``build.*``, ``plan``, ``construct``,
``answer``, ``answer_round0``, ``respond``, ``answer.nemori``, ``answer.rag``,
``answer.context``, ``judge``, ``judge.rubric``, ``judge.order``, ``audit.*``, ``check.*``; a
``.repair`` or ``.retry`` request is answered like the request it follows), which reads the
structured ``request.inputs`` the stage attached, never the prompt text; else, for a stage it
does not know or a request without those inputs, the generic answer of
:mod:`qemem.testing.generic`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from qemem.llm import stages
from qemem.llm.jsonx import extract_json
from qemem.llm.types import LLMRequest, LLMResponse, estimate_tokens
from qemem.testing import audit, beam, build, query
from qemem.testing.generic import generic_instance, generic_text

OfflineResult = str | dict[str, Any] | list[Any] | LLMResponse
Handler = Callable[[LLMRequest], OfflineResult]
Answerer = Callable[[Mapping[str, Any]], str | dict[str, Any] | None]

ANSWERERS: dict[str, Answerer] = {
    stages.PLAN: query.plan,
    stages.CONSTRUCT: query.construct,
    stages.ANSWER: query.answer,
    stages.ANSWER_NEMORI: query.short_answer,
    stages.ANSWER_ROUND0: query.answer,
    stages.RESPOND: query.respond,
    stages.ANSWER_RAG: query.answer,
    stages.ANSWER_CONTEXT: query.answer,
    stages.JUDGE: query.judge,
    stages.JUDGE_RUBRIC: beam.rubric_item,
    stages.JUDGE_ORDER: beam.order_matches,
    stages.BUILD_SEGMENT: build.segment,
    stages.BUILD_EPISODE: build.episode,
    stages.BUILD_PREDICT: build.predict,
    stages.BUILD_CALIBRATE: build.calibrate,
    stages.AUDIT_CLAIM: audit.claim,
    stages.AUDIT_SPLIT: audit.split,
    stages.AUDIT_ANSWER: audit.answer,
    stages.AUDIT_MEMORY: audit.memory,
    stages.CHECK_SPLIT: audit.split,
    stages.CHECK_CLAIM: audit.check,
}
"""The stage answerers, by stage label (every stage of :mod:`qemem.llm.stages` has one)."""

_FOLLOW_UPS = (stages.REPAIR, stages.RETRY)


def base_stage(stage: str) -> str:
    """``stage`` without its ``.repair`` / ``.retry`` suffixes."""
    while stage.endswith(_FOLLOW_UPS):
        stage = stage.rsplit(".", 1)[0]
    return stage


def offline_answer(request: LLMRequest) -> str | dict[str, Any] | list[Any]:
    """What the offline LLM answers ``request`` without a handler."""
    answerer = ANSWERERS.get(base_stage(request.stage))
    found = answerer(request.inputs) if answerer is not None else None
    if found is not None:
        return found
    if request.schema is not None:
        result: dict[str, Any] | list[Any] = generic_instance(request.schema, request.prompt_text)
        return result
    return generic_text(request)


class OfflineLLM:
    """Deterministic provider; ``handler(request)`` may script answers (str, dict or response).

    Its ``name`` and ``model`` are ``fake`` (the spec string that builds it), so its cache keys
    and run manifests are those of the fake provider it replaces. ``calls`` keeps every request.
    """

    name = "fake"

    def __init__(self, handler: Handler | None = None, model: str = "fake") -> None:
        self.handler = handler
        self.model = model
        self.calls: list[LLMRequest] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OfflineLLM(model={self.model!r})"

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` from the handler, the stage's answerer, or generically."""
        with self._lock:
            self.calls.append(request)
        result = self.handler(request) if self.handler is not None else offline_answer(request)
        if isinstance(result, LLMResponse):
            return result
        parsed: Any = None
        if isinstance(result, str):
            text = result
            if request.schema is not None:
                try:
                    parsed = extract_json(text)
                except ValueError:
                    parsed = None
        else:
            parsed = result
            text = json.dumps(result, ensure_ascii=False)
        return LLMResponse(
            text=text,
            parsed=parsed,
            input_tokens=estimate_tokens(request.prompt_text),
            output_tokens=estimate_tokens(text),
            latency_s=0.0,
            model=self.model,
            cost_usd=None,
            stage=request.stage,
        )
