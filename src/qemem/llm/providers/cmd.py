"""Plug in any command-line model runner: ``cmd:<shell command>``.

For every call the command runs once (through the shell, inheriting the environment: pass
secrets in environment variables, never in the command line, which is used as the model id).

stdin receives one JSON object::

    {"system": str, "messages": [{"role": "user"|"assistant", "content": str}, ...],
     "temperature": float, "max_tokens": int, "schema": object|null,
     "schema_name": str|null, "stage": str}

stdout must be one JSON object::

    {"text": str,                # required unless "parsed" is given
     "parsed": object|null,      # optional: the structured output when a schema was given
     "input_tokens": int,        # optional: estimated as ceil(chars / 4) when absent
     "output_tokens": int,       # optional: likewise
     "model": str}               # optional: reported model id (default: the command)

Exit status 0 means success; 75 (EX_TEMPFAIL) means a transient failure worth retrying; any
other status is a permanent failure. The runner's stderr is never shown in qemem's errors (it
may hold secrets): run the command by hand to see it. The command runs in its own process
group, and a timed-out call kills the whole group (the shell and everything it started).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from typing import Any

from qemem.errors import ConfigError, LLMCallError
from qemem.llm.types import LLMRequest, LLMResponse, estimate_tokens

EX_TEMPFAIL = 75


class CmdProvider:
    """Runs ``command`` per request with the JSON protocol in the module docstring."""

    name = "cmd"

    def __init__(self, command: str, *, timeout: float = 120.0) -> None:
        if not command.strip():
            raise ConfigError("cmd: needs a command, e.g. cmd:python my_runner.py")
        self.command = command
        self.model = command
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"CmdProvider(command={self.command!r})"

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the command once for ``request``."""
        start = time.perf_counter()
        proc = subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(json.dumps(request.to_dict()), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise LLMCallError(
                f"cmd provider timed out after {self.timeout:g}s (its process group was "
                "killed); raise QEMEM_LLM_TIMEOUT",
                retryable=True,
            ) from None
        latency = time.perf_counter() - start
        if proc.returncode != 0:
            lines = len(stderr.strip().splitlines())
            raise LLMCallError(
                f"cmd provider exited with status {proc.returncode} ({lines} lines on stderr, "
                "not shown since they may hold secrets: run the command by hand to see them)",
                retryable=proc.returncode == EX_TEMPFAIL,
            )
        try:
            out: Any = json.loads(stdout)
        except json.JSONDecodeError:
            out = None
        if not isinstance(out, dict) or not ("text" in out or "parsed" in out):
            raise LLMCallError(
                "cmd provider must print one JSON object with a 'text' (or 'parsed') field on "
                f"stdout; got: {stdout.strip()[:200]!r}"
            )
        parsed = out.get("parsed")
        text = out.get("text")
        if not isinstance(text, str):
            text = json.dumps(parsed, ensure_ascii=False)
        return LLMResponse(
            text=text,
            parsed=parsed if isinstance(parsed, dict | list) else None,
            input_tokens=int(out.get("input_tokens", estimate_tokens(request.prompt_text))),
            output_tokens=int(out.get("output_tokens", estimate_tokens(text))),
            latency_s=latency,
            model=str(out.get("model", self.model)),
            cost_usd=None,
            stage=request.stage,
        )
