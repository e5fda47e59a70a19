"""Prompt pieces shared by the build steps: turn lines, requests and output schemas."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import pydantic

from qemem.errors import CacheMissError, LLMAuthError, LLMError
from qemem.llm.types import LLMRequest, Message
from qemem.models import Turn, format_datetime
from qemem.participants import Participants
from qemem.prompts import as_data, as_lines, render


class SegmentOut(pydantic.BaseModel):
    """Segmentation: message numbers grouped by episode, episodes in order."""

    groups: list[list[int]]


class EpisodeOut(pydantic.BaseModel):
    """An episode's title and third-person narrative."""

    title: str
    narrative: str


class PredictOut(pydantic.BaseModel):
    """Statements an episode is expected to contain, given the known facts."""

    prediction: list[str]


class NewFact(pydantic.BaseModel):
    """A new fact given as an object: one that replaces a known one (``supersedes`` names the
    known fact, ``turns`` the numbers of the messages that show it changed), or one of a
    ``kind`` other than a plain fact (a standing instruction or preference of the user)."""

    fact: str
    supersedes: str | None = None
    turns: list[int | str] = pydantic.Field(default_factory=list)
    kind: Literal["fact", "instruction", "preference"] = "fact"


class CalibrateOut(pydantic.BaseModel):
    """New durable facts extracted from an episode (a plain string, or a ``NewFact`` for one
    that updates or contradicts a known fact)."""

    facts: list[str | NewFact]


def turn_lines(turns: Sequence[Turn]) -> str:
    """Turns as numbered lines ``[n] Speaker (date): text``, numbered from 1 (a text of
    several lines on continuation lines, :func:`~qemem.prompts.as_lines`)."""
    return "\n".join(
        f"[{n}] {as_data(t.speaker)} ({format_datetime(t.timestamp)}):{as_lines(t.text)}"
        for n, t in enumerate(turns, start=1)
    )


def context_block(turns: Sequence[Turn]) -> str:
    """The messages just before an episode, as prompts show them: a paragraph saying they are
    context only, then one ``(before) Speaker (date): text`` line each; "" when there are
    none."""
    if not turns:
        return ""
    lines = "\n".join(
        f"(before) {as_data(t.speaker)} ({format_datetime(t.timestamp)}):{as_lines(t.text)}"
        for t in turns
    )
    return (
        "The messages just before this episode, for context only: use them to understand who "
        "and what the episode's messages refer to, but do not summarise them and take nothing "
        f"from them that the episode's messages do not say.\n{lines}\n\n"
    )


def request(
    stage: str,
    speakers: Sequence[str],
    max_tokens: int,
    inputs: Mapping[str, Any] | None = None,
    *,
    participants: Participants | None = None,
    **fields: object,
) -> LLMRequest:
    """A build request of ``stage`` (one of ``stages.BUILD``; its template is the stage's name
    with ``_`` for ``.``), carrying ``inputs`` (e.g. the ``turns`` shown) as data; the prompts
    name the conversation's ``participants`` (default: the ``speakers`` as people)."""
    who = participants or Participants.of(speakers)
    named: dict[str, object] = {**who.prompt_fields(), **fields}
    return LLMRequest(
        system=render("build_system", **named),
        messages=[Message("user", render(stage.replace(".", "_"), **named))],
        stage=stage,
        max_tokens=max_tokens,
        inputs=inputs or {},
    )


def session_date(value: datetime) -> str:
    """A session date as prompts show it."""
    return format_datetime(value)


def degradable(exc: BaseException) -> bool:
    """Whether a failed build call may degrade (fallback) instead of stopping the build.

    One call failing (provider error after retries, unparseable output) degrades; a replay
    cache miss or rejected credentials would fail every call alike, so they stop the build.
    """
    return isinstance(exc, LLMError) and not isinstance(exc, CacheMissError | LLMAuthError)
