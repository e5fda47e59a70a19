"""The names the audits' records use: the labels of the claim and memory audits and the
figures of the answer audit. The audits that write them (``qemem.eval.audit``,
``qemem.answer.memory_audit``) and the pages that read them (``qemem.view``) import them
from here."""

from __future__ import annotations

from typing import Literal, get_args

ClaimLabel = Literal["fully supported", "partially supported", "unsupported", "contradicted"]
CLAIM_LABELS: tuple[ClaimLabel, ...] = get_args(ClaimLabel)
"""The claim audit's labels (audit-claims.json), supported first."""

MemoryLabel = Literal["supported", "partially supported", "unsupported", "contradicted"]
MEMORY_LABELS: tuple[MemoryLabel, ...] = get_args(MemoryLabel)
"""The memory audit's labels (audit-memory.json), supported first."""

ANSWER_METRICS = (
    "fully_grounded",
    "core_grounded",
    "claim_support",
    "claims_per_answer",
    "abstention",
    "correct_and_grounded",
)
"""The answer audit's figures (audit-answers.json), in the order reports show them."""
