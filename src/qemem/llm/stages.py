"""The stage label of every kind of LLM call, in one place.

The ledger tallies calls by stage, the cache and run records keep it, and the offline LLM
(:mod:`qemem.testing.offline`) answers each request by it: the library's requests and the
offline LLM's answerers name stages only through these constants, and a test checks that
every stage of ``STAGES`` has an offline answerer, so a renamed stage cannot silently get
the generic answer. A follow-up call carries its stage with ``REPAIR`` (a structured output
that did not validate, asked again) or ``RETRY`` (an answer asked again) appended.
"""

from __future__ import annotations

PLAN = "plan"
"""The LLM planner of a question's retrieval."""
CONSTRUCT = "construct"
"""The card constructor of each round."""
ANSWER = "answer"
ANSWER_ROUND0 = "answer_round0"
"""The answer over the round-0 cards alone: an analysis call, not part of the method's cost."""
RESPOND = "respond"
"""The assistant's reply to a request (mode ``respond``), in place of the short answer."""
ANSWER_NEMORI = "answer.nemori"
"""The answer of the NEMORI baseline."""
ANSWER_RAG = "answer.rag"
"""The answer of the RAG baseline (top passages by hybrid search, one call)."""
ANSWER_CONTEXT = "answer.context"
"""The answer of the full-context baseline (the whole conversation in the prompt)."""
JUDGE = "judge"
"""The LoCoMo (and LongMemEval) judge of an answer against the gold one."""
JUDGE_RUBRIC = "judge.rubric"
"""BEAM's judge of one rubric item (0 / 0.5 / 1)."""
JUDGE_ORDER = "judge.order"
"""BEAM's matching of an answer's lines to the reference event order."""
BUILD_SEGMENT = "build.segment"
BUILD_EPISODE = "build.episode"
BUILD_PREDICT = "build.predict"
BUILD_CALIBRATE = "build.calibrate"
CHECK_SPLIT = "check.split"
CHECK_CLAIM = "check.claim"
AUDIT_CLAIM = "audit.claim"
AUDIT_SPLIT = "audit.split"
AUDIT_ANSWER = "audit.answer"
AUDIT_MEMORY = "audit.memory"

BUILD = (BUILD_SEGMENT, BUILD_EPISODE, BUILD_PREDICT, BUILD_CALIBRATE)
"""The build's stages, in the order a build runs them."""
STAGES = (
    PLAN,
    CONSTRUCT,
    ANSWER,
    ANSWER_ROUND0,
    RESPOND,
    ANSWER_NEMORI,
    ANSWER_RAG,
    ANSWER_CONTEXT,
    JUDGE,
    JUDGE_RUBRIC,
    JUDGE_ORDER,
    *BUILD,
    CHECK_SPLIT,
    CHECK_CLAIM,
    AUDIT_CLAIM,
    AUDIT_SPLIT,
    AUDIT_ANSWER,
    AUDIT_MEMORY,
)
"""Every stage."""

REPAIR = ".repair"
RETRY = ".retry"
