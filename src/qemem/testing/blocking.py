"""BlockingLLM: the offline LLM behind a gate the test opens, for deterministic interleavings.

A build (or any operation that calls the LLM) runs in another thread; each of its calls of a
gated stage waits at the gate until the test lets it through. Meanwhile the test knows where
the operation stands (:meth:`BlockingLLM.wait_for_calls` returns once that many calls wait)
and can act on the store (delete the conversation, forget a message, append, ...), then let
the calls through one by one (:meth:`BlockingLLM.release`) or all at once
(:meth:`BlockingLLM.open`, until :meth:`BlockingLLM.shut`). No sleeps: every wait ends on an
event, or on a timeout that fails loudly (a test that forgot to release never hangs the
suite).

Typical use::

    llm = BlockingLLM(stages={"build.segment"})
    memory = Memory(store, HashEmbedder(), llm=LLMClient(llm))
    worker = threading.Thread(target=memory.build, args=("c1",))
    worker.start()
    llm.wait_for_calls(1)       # the build is segmenting its first session
    memory.delete("c1")         # ... act while it waits
    llm.open()                  # let it go on
    worker.join()
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from qemem.llm.types import LLMRequest, LLMResponse
from qemem.testing.offline import OfflineLLM, base_stage

WAIT_S = 30.0
"""How long a gated call, or a test waiting for calls, waits before failing."""


class BlockingLLM:
    """A provider answering as ``inner`` (default: a new :class:`OfflineLLM`) once the gate
    lets each call through. ``stages``: the stage labels gated (``.repair``/``.retry``
    follow-ups count as their stage); None gates every call. ``waited`` keeps the requests
    that waited at the gate, in arrival order."""

    name = "fake"

    def __init__(
        self,
        inner: OfflineLLM | None = None,
        *,
        stages: Collection[str] | None = None,
        wait_s: float = WAIT_S,
    ) -> None:
        self.inner = inner or OfflineLLM()
        self.model = self.inner.model
        self.stages = None if stages is None else frozenset(stages)
        self.wait_s = wait_s
        self.waited: list[LLMRequest] = []
        self._gate = threading.Condition()
        self._arrived = 0
        self._granted = 0
        self._open = False

    def __repr__(self) -> str:
        return f"BlockingLLM({self.inner!r}, stages={sorted(self.stages or ())})"

    @property
    def waiting(self) -> int:
        """How many calls wait at the gate: arrived and not yet let through (a released call
        stops counting at once, before its thread runs on)."""
        with self._gate:
            return self._waiting()

    def _waiting(self) -> int:
        return 0 if self._open else max(0, self._arrived - self._granted)

    def complete(self, request: LLMRequest) -> LLMResponse:
        """Wait at the gate (a gated stage), then answer as ``inner``. RuntimeError when the
        gate stays shut for ``wait_s`` seconds (the gate then opens for every call)."""
        if self.stages is None or base_stage(request.stage) in self.stages:
            self._pass(request)
        return self.inner.complete(request)

    def _pass(self, request: LLMRequest) -> None:
        """Wait for this call's turn: calls pass in the order they arrived."""
        with self._gate:
            self.waited.append(request)
            self._arrived += 1
            turn = self._arrived
            self._gate.notify_all()
            if not self._gate.wait_for(lambda: self._open or self._granted >= turn, self.wait_s):
                self._open = True  # the test failed: no other call hangs behind this one
                self._gate.notify_all()
                raise RuntimeError(
                    f"BlockingLLM: a {request.stage} call waited {self.wait_s:g} s at the "
                    "gate: the test never released it (release() or open())"
                )

    def wait_for_calls(self, count: int = 1) -> None:
        """Return once ``count`` calls wait at the gate; RuntimeError after ``wait_s``."""
        with self._gate:
            if not self._gate.wait_for(lambda: self._waiting() >= count, self.wait_s):
                raise RuntimeError(
                    f"BlockingLLM: {count} calls were expected at the gate within "
                    f"{self.wait_s:g} s, {self._waiting()} came"
                )

    def release(self, count: int = 1) -> None:
        """Let the ``count`` calls that arrived first among those not let through yet go on
        (those waiting now first, then the next to come)."""
        with self._gate:
            self._granted += count
            self._gate.notify_all()

    def open(self) -> None:
        """Let every call through, now and from now on (until :meth:`shut`)."""
        with self._gate:
            self._open = True
            self._gate.notify_all()

    def shut(self) -> None:
        """Close the gate again: calls arriving from now on wait (the ones that arrived while
        it was open went through)."""
        with self._gate:
            self._open = False
            self._granted = max(self._granted, self._arrived)
