"""The facts of one conversation held in memory during a build: loaded once, searched for each
episode at its snapshot point, and extended as episodes merge in order.

A fact's *creator* is the number ``n`` of the first episode in its provenance (``E<n>``); an
episode numbered ``m`` is extracted against the facts whose creator is at most ``m - lag``
(the build's snapshot lag), so what it sees depends only on the episode order, never on which
call finished first, and a resumed build sees exactly what an uninterrupted one would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from qemem.build.facts import find_duplicate
from qemem.models import Episode, FactKind, SemanticFact
from qemem.retrieve.bm25 import BM25Index, tokenize
from qemem.retrieve.fusion import cosine_rank, fuse_lists
from qemem.store.base import MemoryStore, Scope


def episode_number(episode_id: str) -> int:
    """``n`` of an episode id ``E<n>``; 0 for any other id (visible to every episode)."""
    match = re.fullmatch(r"E(\d+)", episode_id)
    return int(match[1]) if match else 0


@dataclass
class Merge:
    """What merging one episode's facts changes: new facts with their vectors, existing facts
    whose provenance gained the episode (with their unchanged vectors), and the merge count."""

    new: list[SemanticFact]
    new_vectors: np.ndarray
    changed: list[SemanticFact]
    changed_vectors: np.ndarray
    merged: int


class FactPool:
    """Facts, their unit vectors (rows of ``matrix``), BM25 tokens and creator numbers."""

    def __init__(self, facts: list[SemanticFact], matrix: np.ndarray) -> None:
        self.facts = facts
        self.matrix = matrix
        self.tokens = [tokenize(f.content) for f in facts]
        self.creators = [episode_number(f.episode_ids[0]) if f.episode_ids else 0 for f in facts]
        self.rows = {f.id: row for row, f in enumerate(facts)}

    @classmethod
    def load(cls, store: MemoryStore, scope: Scope, dim: int) -> FactPool:
        """The stored facts of ``scope`` with their vectors (one read for the whole build)."""
        ids, matrix = store.vectors(scope, "fact")
        by_id = {f.id: f for f in store.facts(scope)}
        if not ids:
            matrix = np.zeros((0, dim), dtype=np.float32)
        return cls([by_id[i] for i in ids], matrix)

    def related(
        self, vector: np.ndarray, tokens: list[str], k: int, upto: int
    ) -> list[SemanticFact]:
        """The ``k`` facts created by episodes numbered ``<= upto`` most related to a query:
        reciprocal rank fusion of its dense ranking (``vector``) and BM25 ranking (``tokens``)
        over exactly those facts."""
        rows = [row for row, creator in enumerate(self.creators) if creator <= upto]
        if not rows or k <= 0:
            return []
        dense = [self.facts[rows[i]].id for i, _ in cosine_rank(self.matrix[rows], vector)]
        bm25 = BM25Index([self.tokens[row] for row in rows]).rank(tokens)
        sparse = [self.facts[rows[i]].id for i, _ in bm25]
        fused = fuse_lists({(0, "dense"): dense, (0, "bm25"): sparse})
        return [self.facts[self.rows[fid]] for fid in list(fused)[:k]]

    def merge(
        self,
        episode: Episode,
        texts: list[str],
        vectors: np.ndarray,
        threshold: float,
        next_fact: int,
        paraphrase_cosine: float | None = None,
        names: Sequence[str] = (),
        kinds: Mapping[str, FactKind] | None = None,
    ) -> Merge:
        """Add ``episode``'s facts (``texts`` with unit ``vectors``; ``kinds`` those that are
        not plain facts), merging each one that restates a fact already here
        (:func:`~qemem.build.facts.find_duplicate` with ``threshold``, ``paraphrase_cosine``
        and the speakers' ``names``) into it (a plain fact restated as an instruction or a
        preference takes that kind); new facts are numbered ``S<next_fact>`` onwards."""
        kinds = kinds or {}
        contents = [f.content for f in self.facts]
        new: list[SemanticFact] = []
        new_rows: list[np.ndarray] = []
        changed: dict[str, SemanticFact] = {}
        merged = 0
        for text, vector in zip(texts, vectors, strict=True):
            row = find_duplicate(
                text, vector, contents, self.matrix, threshold, paraphrase_cosine, names
            )
            if row is None:
                fact = SemanticFact(
                    f"S{next_fact + len(new)}",
                    episode.conversation_id,
                    text,
                    episode.session,
                    (episode.id,),
                    kind=kinds.get(text, "fact"),
                )
                self._append(fact, vector, episode_number(episode.id))
                contents.append(text)
                new.append(fact)
                new_rows.append(vector)
                continue
            merged += 1
            target = self.facts[row]
            kind = kinds.get(text, "fact") if target.kind == "fact" else target.kind
            if episode.id not in target.episode_ids or kind != target.kind:
                episodes = tuple(dict.fromkeys((*target.episode_ids, episode.id)))
                updated = replace(target, episode_ids=episodes, kind=kind)
                self.facts[row] = updated
                changed[updated.id] = updated
        dim = self.matrix.shape[1]
        return Merge(
            new,
            np.vstack(new_rows) if new_rows else np.zeros((0, dim), dtype=np.float32),
            list(changed.values()),
            np.vstack([self.matrix[self.rows[f]] for f in changed])
            if changed
            else np.zeros((0, dim), dtype=np.float32),
            merged,
        )

    def retire(self, ids: list[str]) -> None:
        """Take superseded facts out of the pool: later episodes neither see them nor merge
        into them."""
        gone = set(ids)
        keep = [row for row, f in enumerate(self.facts) if f.id not in gone]
        if len(keep) == len(self.facts):
            return
        self.facts = [self.facts[row] for row in keep]
        self.matrix = self.matrix[keep]
        self.tokens = [self.tokens[row] for row in keep]
        self.creators = [self.creators[row] for row in keep]
        self.rows = {f.id: row for row, f in enumerate(self.facts)}

    def _append(self, fact: SemanticFact, vector: np.ndarray, creator: int) -> None:
        self.rows[fact.id] = len(self.facts)
        self.facts.append(fact)
        self.matrix = np.vstack([self.matrix, vector[None, :].astype(self.matrix.dtype)])
        self.tokens.append(tokenize(fact.content))
        self.creators.append(creator)
