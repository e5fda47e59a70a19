"""Ids stored before the rule that no id holds ``/`` (:data:`~qemem.models.ID_RULE`).

Every entry point refuses such ids now, but a store written before may hold some: the HTTP API
cannot address them (Starlette routes on the decoded path). Migrating a store across the rule
logs them, with how to remove them: the library and the CLI still address them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from qemem.models import ID_RULE

log = logging.getLogger("qemem.store")

SLASHED_IDS = """
SELECT namespace, id, 'conversation', id FROM conversations WHERE id LIKE '%/%'
UNION ALL SELECT c.namespace, c.id, 'message', r.id FROM turns r
    JOIN conversations c ON c.pk = r.conv WHERE r.id LIKE '%/%'
UNION ALL SELECT c.namespace, c.id, 'episode', r.id FROM episodes r
    JOIN conversations c ON c.pk = r.conv WHERE r.id LIKE '%/%'
UNION ALL SELECT c.namespace, c.id, 'fact', r.id FROM facts r
    JOIN conversations c ON c.pk = r.conv WHERE r.id LIKE '%/%'
ORDER BY 1, 2, 3, 4
"""
"""(namespace, conversation, kind, id) of every stored id holding ``/``, on both backends."""
SHOWN = 20
"""How many such ids the warning names (it counts them all)."""


def slashed_warning(rows: Sequence[tuple[Any, ...]], where: str) -> str | None:
    """The warning listing ``rows`` of :data:`SLASHED_IDS` of the store ``where``; None when
    there are none."""
    if not rows:
        return None
    named = "; ".join(
        f"{kind} {rid!r} of conversation {cid!r}" + ("" if ns == "default" else f" ({ns})")
        for ns, cid, kind, rid in rows[:SHOWN]
    )
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return (
        f"store {where} holds {len(rows)} id(s) with '/' ({ID_RULE}): {named}{more}. The HTTP "
        "API cannot address them; the library and the CLI still do: qemem delete-message "
        "-c CONV ID and qemem delete-fact -c CONV ID delete one, qemem delete CONV a "
        "conversation (an episode goes with its conversation or with a message it cites)"
    )


def warn_slashed(rows: Sequence[tuple[Any, ...]], where: str) -> None:
    """Log :func:`slashed_warning` of ``rows`` (a warning), if any."""
    warning = slashed_warning(rows, where)
    if warning is not None:
        log.warning(warning)
