"""What the routes share: one ``Memory`` per namespace, the build jobs and the key check,
held by one ``ServiceState`` on ``app.state.service``."""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import Depends, Request

from qemem.errors import NotFoundError
from qemem.keys import KeyStore, KeyVerifier
from qemem.memory import Memory
from qemem.models import Conversation
from qemem.service.jobs import Jobs


class Tenants:
    """One ``Memory`` per namespace over a shared store, embedder and LLM."""

    def __init__(self, root: Memory) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._memories: dict[str, Memory] = {}

    def memory(self, namespace: str) -> Memory:
        with self._lock:
            if namespace not in self._memories:
                self._memories[namespace] = Memory(
                    self.root.store,
                    self.root.embedder,
                    llm=self.root.llm,
                    namespace=namespace,
                    idempotency_hours=self.root.idempotency_hours,
                )
            return self._memories[namespace]


class ServiceState:
    """The app's resources: the root ``Memory`` (store, embedder, LLM) and its tenants, the
    key store and its verifier, the build jobs. ``owned`` resources are closed with the app."""

    def __init__(self, root: Memory, keys: KeyStore, *, owned: bool) -> None:
        self.root = root
        self.tenants = Tenants(root)
        self.keys = keys
        self.verify = KeyVerifier(keys)
        self.jobs = Jobs()
        self.owned = owned

    def memory(self, namespace: str) -> Memory:
        """The ``Memory`` of ``namespace``."""
        return self.tenants.memory(namespace)

    def close(self) -> None:
        """Stop the build jobs; close the store and key store when the app opened them."""
        self.jobs.close()
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
