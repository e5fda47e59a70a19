"""What the routes share: one ``Memory`` per namespace, the worker running the store's jobs
and the key check, held by one ``ServiceState`` on ``app.state.service``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as Late
from typing import Annotated

from fastapi import Depends, Request

from qemem.errors import QememError, StoreError
from qemem.keys import KeyStore, KeyVerifier
from qemem.memory import Memory
from qemem.memory.jobs import job_table
from qemem.memory.worker import DEFAULT_LEASE_S, JobWorker
from qemem.models import Conversation

log = logging.getLogger(__name__)


class Tenants:
    """One ``Memory`` per namespace over a shared store, embedder and LLM."""

    def __init__(self, root: Memory, job_attempts: int = 3) -> None:
        self.root = root
        self.job_attempts = job_attempts
        self._lock = threading.Lock()
        self._memories: dict[str, Memory] = {}

    def memory(self, namespace: str) -> Memory:
        with self._lock:
            if namespace not in self._memories:
                memory = Memory(
                    self.root.store,
                    self.root.embedder,
                    llm=self.root.llm,
                    namespace=namespace,
                    idempotency_hours=self.root.idempotency_hours,
                    auto_build=self.root.auto_build,
                )
                memory.job_attempts = self.job_attempts
                self._memories[namespace] = memory
            return self._memories[namespace]


READY_WITHIN_S = 1.0
"""``/readyz`` answers not-ready when the store or the key store has not answered by then."""


class Readiness:
    """Reads each of ``probes`` (callables raising when what they read cannot be read) in a
    thread of its own and waits at most ``within`` seconds: a store that hangs (a database
    that is down or restarting) makes the answer not-ready in time, never a hung probe. While
    a probe still hangs, later calls wait for that one rather than start another."""

    def __init__(self, probes: Sequence[Callable[[], None]], within: float = READY_WITHIN_S):
        self.probes = list(probes)
        self.within = within
        self._threads = ThreadPoolExecutor(1, thread_name_prefix="qemem-readyz")
        self._lock = threading.Lock()
        self._pending: Future[None] | None = None

    def _probe(self) -> None:
        for probe in self.probes:
            probe()

    def check(self) -> None:
        """Return when every probe answered in time; a StoreError (503) otherwise, which
        names no server path (the log has the cause)."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._threads.submit(self._probe)
            pending = self._pending
        try:
            pending.result(timeout=self.within)
        except Late:
            raise StoreError(
                f"not ready: the store or the key store did not answer within {self.within:g} s"
            ) from None
        except Exception as exc:  # any failure to read means not ready
            log.warning("readiness probe failed: %s", exc)
            raise StoreError("not ready: the store or the key store cannot be read") from None

    def close(self) -> None:
        """Stop the probe thread (a hung probe is left to end on its own)."""
        self._threads.shutdown(wait=False, cancel_futures=True)


class ServiceState:
    """The app's resources: the root ``Memory`` (store, embedder, LLM) and its tenants, the
    key store and its verifier, the worker running the store's jobs (``job_lease`` seconds of
    lease, ``job_attempts`` starts at most). ``owned`` resources are closed with the app."""

    def __init__(
        self,
        root: Memory,
        keys: KeyStore,
        *,
        owned: bool,
        job_lease: float = DEFAULT_LEASE_S,
        job_attempts: int = 3,
    ) -> None:
        self.root = root
        self.tenants = Tenants(root, job_attempts)
        self.keys = keys
        self.verify = KeyVerifier(keys)
        self.worker = JobWorker(root, self.tenants.memory, lease_s=job_lease)
        self.readiness = Readiness([root.ping, keys.ping])
        self.owned = owned

    def job_counts(self) -> dict[str, int]:
        """How many jobs of the store (all namespaces, every server) are in each status."""
        return job_table(self.root.store).counts()

    def memory(self, namespace: str) -> Memory:
        """The ``Memory`` of ``namespace``."""
        return self.tenants.memory(namespace)

    def start(self) -> None:
        """Start the job worker (the app's startup), unless the server has no LLM to run
        builds with (another server of the store may have one)."""
        try:
            llm = self.root.llm
        except QememError as exc:  # the routes that need the LLM report it, with a 503
            log.warning("this server runs no background builds: %s", exc)
            return
        if llm is not None:
            self.worker.start()

    def close(self) -> None:
        """Stop the job worker (its running jobs are queued again); close the store and key
        store when the app opened them."""
        self.worker.close()
        self.readiness.close()
        if self.owned:
            self.root.close()
            self.keys.close()


def _service_state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


State = Annotated[ServiceState, Depends(_service_state)]
"""A route parameter receiving the app's ``ServiceState``."""


def existing_conversation(memory: Memory, conversation: str) -> Conversation:
    """The caller's conversation, or a 404 (worded by ``problems.NOT_FOUND``)."""
    return memory.conversation(conversation)
