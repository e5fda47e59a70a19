"""The one exception tree of qemem: every user-facing failure is a ``QememError``.

Each message says what went wrong and what to do about it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Literal


class QememError(Exception):
    """Root of every error qemem raises on purpose."""


class ConfigError(QememError):
    """A setting, spec string, missing extra or missing credential."""


class InputError(QememError):
    """Input data (a file to ingest, a question, an argument) is malformed."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: str | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.record = record
        self.field = field
        where = ", ".join(
            part
            for part in (
                f"file {file}" if file is not None else None,
                record,  # already says what it is: "record 3", "line 12", "sample conv-26"
                f"field {field}" if field is not None else None,
            )
            if part is not None
        )
        super().__init__(f"{message} ({where})" if where else message)


class StoreError(QememError):
    """The memory store cannot do what was asked (missing scope, schema, mismatch)."""


Missing = Literal["conversation", "message", "episode", "fact", "job"]
"""What a ``NotFoundError`` did not find, when it says (each channel words its own advice)."""


class NotFoundError(StoreError):
    """A conversation, turn, episode or fact that does not exist in the store.

    ``kind``, ``name`` and ``conversation`` say what was missing (the id asked for, and the
    conversation it was looked for in), so that the HTTP API and the MCP server can give the
    advice of their own channel; the message gives the command line's."""

    def __init__(
        self,
        message: str,
        *,
        kind: Missing | None = None,
        name: str = "",
        conversation: str = "",
    ) -> None:
        self.kind = kind
        self.name = name
        self.conversation = conversation
        super().__init__(message)


class BusyError(StoreError):
    """Another process (or a background job) is writing what was asked for now, under its lock
    (a build of the same conversation): wait for it to finish."""


class ConversationGoneError(NotFoundError):
    """The conversation an operation pinned at its start (a build) was deleted since, and
    maybe created again under its id: the operation wrote nothing more."""


class ConversationChangedError(StoreError):
    """A message or fact of the conversation an operation pinned at its start (a build) was
    deleted or redacted since: the operation wrote nothing more (what it would write may
    derive from the removed text)."""


class EmbedderMismatchError(StoreError):
    """Vectors of a different embedder or dimension than the store already holds."""


class EmbedderUnavailableError(ConfigError):
    """The embedding engine cannot be loaded on this machine."""


class DownloadError(QememError):
    """A dataset could not be downloaded, or its bytes are not the expected ones."""


class OutputError(QememError):
    """An output file (``--html``, ``--out``) cannot be written."""


class LLMError(QememError):
    """An LLM call failed after retries, or no LLM is configured where one is needed."""


class StructuredOutputError(LLMError):
    """The model's output did not validate against the stage schema, even after a repair call."""


class CacheMissError(LLMError):
    """Replay mode found no recorded exchange for a request."""


class LLMCallError(LLMError):
    """One provider call failed; ``retryable`` says whether trying again may help.

    ``status`` is the HTTP-like status when known; ``retry_after`` the server's requested wait
    in seconds, if it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        super().__init__(message)


class LLMAuthError(LLMCallError, ConfigError):
    """The provider rejected the credentials (HTTP 401/403): check the API key or permissions."""


class ConflictError(InputError):
    """A message contradicts what the store already holds under the same id."""


class AuthError(QememError):
    """An API key is missing, malformed, unknown or revoked, or may not do what was asked."""


class JobStoppedError(QememError):
    """A running background job stopped before its end: it was cancelled, another worker took
    it over after its lease expired, or its worker is shutting down (the job is queued again)."""


HIDDEN = "[server path]"
"""What stands for a filesystem path (or a store URL) in a message shown to a remote caller."""
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"/:,;()\[\]]+/?)+")


def without_paths(message: str, known: Iterable[str] = ()) -> str:
    """``message`` as a remote caller may read it: each of ``known`` (a store's path or URL)
    and every absolute path whose top folder exists on this machine (``/tmp/...``, a socket of
    the database) replaced by :data:`HIDDEN`. A route such as ``/v1/jobs`` stays."""
    for text in sorted({k for k in known if k and k != ":memory:"}, key=len, reverse=True):
        message = message.replace(repr(text), HIDDEN).replace(text, HIDDEN)

    def hide(found: re.Match[str]) -> str:
        top = found.group().split("/")[1]
        return HIDDEN if top and os.path.isdir(f"/{top}") else found.group()

    return _ABSOLUTE.sub(hide, message)
