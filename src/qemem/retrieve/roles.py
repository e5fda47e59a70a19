"""The user's messages ranked apart: in a conversation with an assistant, each ranked list of
the turn space is fused a second time restricted to the user's messages.

What an agent's memory is asked about is mostly what the user said: their situation, plans,
decisions, instructions and preferences. The user's messages are short and few beside the
assistant's replies (on five BEAM-100K chats 8% of the tokens, yet 196 of the 262 evidence
turns of their probes), and a long reply is indexed passage by passage, so the replies fill
every ranked list and push the user's messages down it. Fusing each list once more over the
user's messages alone (the same scores: the conversation's BM25 statistics and cosines,
restricted) gives a user's message the reciprocal rank of its place among the user's messages
as well; a reply is ranked as before. A conversation without a user role (LoCoMo's two people)
is ranked as before.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from qemem.models import split_key
from qemem.retrieve.bm25 import top_positive
from qemem.retrieve.fusion import ListKey
from qemem.retrieve.index import SearchIndex, top_rows
from qemem.store.base import Ranked

USER_METHODS = {"dense": "dense-user", "bm25": "bm25-user"}
"""The names of the restricted lists, by the method they restrict."""


def row_mask(ids: Sequence[str], owners: Collection[str]) -> np.ndarray:
    """Which index rows (record ids, a passage under its turn's key) belong to ``owners``."""
    return np.fromiter((split_key(rid)[0] in owners for rid in ids), dtype=bool, count=len(ids))


def restricted_rankings(
    index: SearchIndex,
    owners: Collection[str],
    vectors: np.ndarray,
    tokens: Sequence[Sequence[str]],
    depth: int | None,
) -> dict[ListKey, Ranked]:
    """For every query (``vectors[i]``, ``tokens[i]``), the dense and BM25 rankings of the
    index restricted to the rows of ``owners`` (turn ids), keyed (i, "dense-user") and
    (i, "bm25-user"), (id, score) best first, each cut at ``depth`` (None: all). Empty when
    no row belongs to them."""
    rows = np.flatnonzero(row_mask(index.ids, owners))
    if rows.size == 0:
        return {}
    ids = [index.ids[r] for r in rows]
    sims = index.dense_scores(vectors)[:, rows]
    rankings: dict[ListKey, Ranked] = {}
    for i, query in enumerate(tokens):
        dense = top_rows(sims[i], depth)
        rankings[(i, USER_METHODS["dense"])] = [(ids[n], score) for n, score in dense]
        sparse = top_positive(index.bm25.scores(query)[rows], depth)
        rankings[(i, USER_METHODS["bm25"])] = [(ids[n], score) for n, score in sparse]
    return rankings


def restricted_lists(
    index: SearchIndex,
    owners: Collection[str],
    vectors: np.ndarray,
    tokens: Sequence[Sequence[str]],
    depth: int | None,
) -> dict[ListKey, list[str]]:
    """The ids of :func:`restricted_rankings`, best first."""
    rankings = restricted_rankings(index, owners, vectors, tokens, depth)
    return {key: [rid for rid, _ in ranked] for key, ranked in rankings.items()}
