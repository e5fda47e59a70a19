"""Which LLM built each episode, and what degraded: recorded with the episode, read back to
rebuild degraded memory and memory built by another model.

The record lives in the conversation's state (key ``build.episode.<id>``), written in the
episode's own transaction: ``{"llm": "<provider>:<model>", "degraded": [reasons]}``. A fact
was built by the LLM of its first episode. Episodes without a record (imported, or built
before records existed) have no known builder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from qemem.llm.client import LLMClient
from qemem.models import Episode
from qemem.store.base import MemoryStore, Scope

ORIGIN_KEY = "build.episode.{episode}"
SEGMENTS_KEY = "build.segments.{session}"
IMPORTED = "import:nemori"
"""The builder recorded for episodes imported from a NEMORI export."""


@dataclass(frozen=True)
class Origin:
    """Who built an episode (``provider:model``) and why it degraded (empty when it did not)."""

    llm: str
    degraded: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"llm": self.llm, "degraded": list(self.degraded)})


def builder_id(llm: LLMClient) -> str:
    """The ``provider:model`` name of the LLM behind a client, as origins record it."""
    return f"{llm.provider.name}:{llm.provider.model}"


def record_origin(store: MemoryStore, scope: Scope, episode: str, origin: Origin) -> None:
    """Store ``origin`` for ``episode`` (call inside the episode's transaction)."""
    store.set_state(scope, ORIGIN_KEY.format(episode=episode), origin.to_json())


def origin_of(store: MemoryStore, scope: Scope, episode: str) -> Origin | None:
    """The recorded origin of ``episode``; None when it has none."""
    raw = store.get_state(scope, ORIGIN_KEY.format(episode=episode))
    if not raw:
        return None
    data = json.loads(raw)
    return Origin(str(data.get("llm", "")), tuple(str(r) for r in data.get("degraded", ())))


def stale_episodes(
    store: MemoryStore, scope: Scope, builder: str, *, other_models: bool
) -> list[Episode]:
    """Episodes to build again: every degraded one, and with ``other_models`` every one not
    built by ``builder`` (imported and unrecorded ones included)."""
    out = []
    for episode in store.episodes(scope):
        origin = origin_of(store, scope, episode.id)
        degraded = origin is not None and bool(origin.degraded)
        foreign = origin is None or origin.llm != builder
        if degraded or (other_models and foreign):
            out.append(episode)
    return out


def forget(store: MemoryStore, scope: Scope, episodes: Sequence[Episode], builder: str) -> None:
    """Remove ``episodes`` (with the facts only they support) so their turns are pending again.

    A session losing an episode that another LLM than ``builder`` made, or whose segmentation
    fell back to windows, is segmented anew; otherwise its stored segmentation is reused.
    """
    if not episodes:
        return
    resegment = set()
    for episode in episodes:
        origin = origin_of(store, scope, episode.id)
        fell_back = origin is not None and any(r.startswith("segment") for r in origin.degraded)
        if origin is None or origin.llm != builder or fell_back:
            resegment.add(episode.session)
    with store.transaction():
        store.delete_episodes(scope, [e.id for e in episodes])
        for session in sorted(resegment):
            store.set_state(scope, SEGMENTS_KEY.format(session=session), "")
