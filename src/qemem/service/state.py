"""What the routes share: one ``Memory`` per namespace, the worker running the store's jobs
and the key check, held by one ``ServiceState`` on ``app.state.service``."""

from __future__ import annotations

import logging
import threading
from typing import Annotated

from fastapi import Depends, Request

from qemem.errors import NotFoundError, QememError
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
        if self.owned:
            self.root.close()
            self.keys.close()


def _service_state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


State = Annotated[ServiceState, Depends(_service_state)]
"""A route parameter receiving the app's ``ServiceState``."""


def existing_conversation(memory: Memory, conversation: str) -> Conversation:
    """The caller's conversation, or a 404 that names only what the caller sent."""
    try:
        return memory.conversation(conversation)
    except NotFoundError:
        raise NotFoundError(
            f"no conversation {conversation!r}: appending messages to it creates it"
        ) from None
