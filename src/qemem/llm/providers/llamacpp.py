"""Local GGUF models through llama-cpp-python (extra ``local``).

With a schema, ``response_format={"type": "json_object", "schema": ...}`` makes llama.cpp
constrain decoding with a grammar compiled from the schema. Calls are serialised (one model
instance is not thread-safe). Environment: QEMEM_LLAMACPP_N_CTX (default 8192),
QEMEM_LLAMACPP_GPU_LAYERS (default -1: all layers on the GPU when there is one).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from qemem.errors import ConfigError, LLMCallError
from qemem.llm.providers._common import require
from qemem.llm.types import LLMRequest, LLMResponse


def load_model(llama_cpp: ModuleType, model_path: str) -> Any:
    """Load the GGUF file at ``model_path`` with the ``llama_cpp`` module (the test guard
    replaces this, so that no test loads a real model)."""
    try:
        return llama_cpp.Llama(
            model_path=model_path,
            n_ctx=int(os.environ.get("QEMEM_LLAMACPP_N_CTX", "8192")),
            n_gpu_layers=int(os.environ.get("QEMEM_LLAMACPP_GPU_LAYERS", "-1")),
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise ConfigError(f"llama.cpp cannot load {model_path}: {exc}") from exc


class LlamaCppProvider:
    """A GGUF model loaded in-process; ``llama`` injects a ready ``Llama``-like object."""

    name = "llamacpp"

    def __init__(self, model_path: str, *, llama: Any = None) -> None:
        self.model = Path(model_path).name
        self._lock = threading.Lock()
        if llama is None:
            llama_cpp = require("llama_cpp", "local")
            if not Path(model_path).is_file():
                raise ConfigError(
                    f"GGUF model file {model_path} does not exist; give its path as "
                    "llamacpp:/path/to/model.gguf"
                )
            llama = load_model(llama_cpp, model_path)
        self._llama = llama

    def __repr__(self) -> str:
        return f"LlamaCppProvider(model={self.model!r})"

    def payload(self, request: LLMRequest) -> dict[str, Any]:
        """Keyword arguments of ``create_chat_completion`` for ``request``."""
        messages = [{"role": "system", "content": request.system}] if request.system else []
        kwargs: dict[str, Any] = {
            "messages": messages + [m.to_dict() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.schema}
        return kwargs

    def complete(self, request: LLMRequest) -> LLMResponse:
        """One local chat completion."""
        start = time.perf_counter()
        try:
            with self._lock:
                out = self._llama.create_chat_completion(**self.payload(request))
        except (ValueError, RuntimeError) as exc:
            raise LLMCallError(f"llama.cpp generation failed: {exc}") from exc
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return LLMResponse(
            text=choice["message"].get("content") or "",
            parsed=None,
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - start,
            model=self.model,
            cost_usd=None,
            stage=request.stage,
            extra={"stop_reason": choice.get("finish_reason")},
        )
