"""Known answer-key errors: score a run on the original gold and on a corrected gold, side by side.

An errata file is a JSON object keyed by question key, ``<conversation>#<index>`` (the index
of the question in its conversation's ``qa`` list, as ``manifest.json``'s ``selection`` and the
run page name it), each value an object with a non-empty ``reason`` and either a corrected
``answer`` (a non-empty string) or ``"excluded": true`` (the question has no usable gold)::

    {
      "conv-26#12": {"answer": "the Tuesday before 17 December 2023", "reason": "..."},
      "conv-30#4": {"excluded": true, "reason": "..."}
    }

A corrected question's prediction is judged again against the corrected answer (same judge,
same runs); an excluded one leaves the corrected accuracy. The judgements are kept in the run
folder's ``errata.json`` (with the file's sha256), so ``summary.json`` stays a function of the
folder's files and ``eval report`` rebuilds it byte for byte.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS, judge_answer
from qemem.eval.manifest import data_sha256
from qemem.eval.results import run_records
from qemem.llm import Ledger, LLMClient, open_llm

Record = Mapping[str, Any]
ERRATA_FILE = "errata.json"
_KEY = re.compile(r"^[^#\s]+#\d+$")


@dataclass(frozen=True)
class Correction:
    """One known error: the question key, why, and the corrected gold (None: excluded)."""

    key: str
    reason: str
    answer: str | None

    @property
    def excluded(self) -> bool:
        """Whether the question leaves the corrected scoring (no usable gold)."""
        return self.answer is None


@dataclass(frozen=True)
class Errata:
    """A validated errata file: its path, the sha256 of its bytes, its corrections by key."""

    path: str
    sha256: str
    corrections: dict[str, Correction]


def _correction(key: Any, value: Any, where: str) -> Correction:
    """One entry checked; InputError saying what is wrong and what to write instead."""
    if not isinstance(key, str) or not _KEY.match(key):
        raise InputError(
            f"{where}: key {key!r} is not a question key: use <conversation>#<index>, "
            "e.g. conv-26#12 (the index of the question in the conversation's qa list)"
        )
    if not isinstance(value, dict):
        raise InputError(f"{where}: {key}: give an object with reason and answer (or excluded)")
    unknown = sorted(set(value) - {"answer", "excluded", "reason"})
    if unknown:
        raise InputError(f"{where}: {key}: unknown field(s) {', '.join(unknown)}")
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise InputError(f"{where}: {key}: every entry needs a non-empty reason")
    excluded = value.get("excluded", False)
    if not isinstance(excluded, bool):
        raise InputError(f"{where}: {key}: excluded must be true or false")
    answer = value.get("answer")
    if excluded == ("answer" in value):
        raise InputError(
            f'{where}: {key}: give either a corrected answer or "excluded": true, not '
            + ("both" if excluded else "neither")
        )
    if not excluded and (not isinstance(answer, str | int | float) or not str(answer).strip()):
        raise InputError(f"{where}: {key}: the corrected answer must be a non-empty string")
    return Correction(key, reason.strip(), None if excluded else str(answer).strip())


def parse_errata(data: Any, where: str = "errata") -> dict[str, Correction]:
    """The corrections of an errata file's parsed JSON ``data``, validated (see module doc)."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: the errata file must hold a JSON object keyed by question key")
    return {key: _correction(key, value, where) for key, value in data.items()}


def load_errata(path: str | Path) -> Errata:
    """Read and validate an errata file; InputError for unreadable JSON or a bad entry."""
    path = Path(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the errata file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc}); see docs/evaluation.md") from None
    return Errata(str(path), data_sha256(path), parse_errata(data, str(path)))


def question_key(record: Record) -> str:
    """A record's question key, ``<conversation>#<index>``."""
    return f"{record['conversation']}#{record['index']}"


def judge_errata(
    records: Sequence[Record],
    errata: Errata,
    judge: LLMClient | None,
    *,
    runs: int = 1,
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS,
    ledger: Ledger | None = None,
) -> dict[str, Any]:
    """What ``errata.json`` holds: the file and its hash, and per corrected question of
    ``records`` its original and corrected gold, the reason, and the judge labels of its
    prediction against the corrected answer (none for an excluded question). InputError when
    a correction needs judging and there is no judge."""
    by_key = {question_key(r): r for r in records}
    questions: dict[str, Any] = {}
    for key, fix in sorted(errata.corrections.items()):
        record = by_key.get(key)
        if record is None:
            continue
        labels: list[str] = []
        if fix.answer is not None:
            if judge is None:
                raise InputError(
                    f"correcting {key} needs a judge to grade the answer against the corrected "
                    "gold: pass --judge (or run in a mode that judges)"
                )
            verdict = judge_answer(
                judge,
                str(record["question"]),
                fix.answer,
                str(record["prediction"]),
                runs=runs,
                max_tokens=max_tokens,
                ledger=ledger,
            )
            labels = list(verdict.labels)
        questions[key] = {
            "reason": fix.reason,
            "excluded": fix.excluded,
            "gold": record["gold"],
            "corrected": fix.answer,
            "judge_labels": labels,
        }
    unmatched = sorted(set(errata.corrections) - set(by_key))
    return {
        "file": errata.path,
        "sha256": errata.sha256,
        "questions": questions,
        "unmatched": unmatched,
    }


def corrected_records(records: Sequence[Record], judged: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``records`` scored on the corrected gold: excluded questions left out, corrected ones
    with their corrected gold, labels and score (``judged`` as :func:`judge_errata` gives)."""
    out: list[dict[str, Any]] = []
    questions = judged.get("questions", {})
    for record in records:
        fix = questions.get(question_key(record))
        if fix is None:
            out.append(dict(record))
        elif not fix["excluded"]:
            labels = list(fix["judge_labels"])
            score = sum(label == "CORRECT" for label in labels) / len(labels) if labels else None
            out.append({**record, "gold": fix["corrected"], "judge_labels": labels, "score": score})
    return out


def changed_questions(records: Sequence[Record], judged: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The corrected and excluded questions of ``records``: key, category, question, both golds,
    the reason, the prediction and its score on each gold (None where excluded)."""
    questions = judged.get("questions", {})
    corrected = {question_key(r): r for r in corrected_records(records, judged)}
    rows = []
    for record in records:
        key = question_key(record)
        fix = questions.get(key)
        if fix is None:
            continue
        after = corrected.get(key)
        rows.append(
            {
                "key": key,
                "category": int(record["category"]),
                "question": record["question"],
                "gold": fix["gold"],
                "corrected": fix["corrected"],
                "excluded": fix["excluded"],
                "reason": fix["reason"],
                "prediction": record["prediction"],
                "score_original": record["score"],
                "score_corrected": None if after is None else after["score"],
            }
        )
    return sorted(rows, key=lambda row: row["key"])


def apply_errata(
    out: Path, path: str | Path, *, judge: str | None = None, cache: Path | None = None
) -> dict[str, Any]:
    """Score the run folder ``out`` against the errata file ``path``: judge its corrected
    questions (with ``judge``, else the run's judge spec; LLM cache ``cache``, else
    ``QEMEM_LLM_CACHE``, else the run's cache), write ``errata.json`` and record
    the file and its hash in ``manifest.json``; return what ``errata.json`` holds."""
    errata = load_errata(path)
    manifest, records = run_records(out)
    if not any(r["judge_labels"] for r in records):
        raise InputError(f"{out} has no judged answers to rescore (a retrieval-mode run?)")
    client = None
    if any(fix.answer is not None for fix in errata.corrections.values()):
        config = manifest.get("config", {})
        spec = judge or config.get("judge") or config.get("llm")
        cache_path = (
            cache
            or os.environ.get("QEMEM_LLM_CACHE")
            or config.get("cache")
            or out / "llm-cache.db"
        )
        client = open_llm(spec, cache_path=cache_path)
    try:
        judged = judge_errata(
            records,
            errata,
            client,
            runs=int(manifest.get("judge_runs") or 1),
            max_tokens=int(manifest.get("judge_max_tokens") or DEFAULT_JUDGE_MAX_TOKENS),
        )
    finally:
        if client is not None:
            client.close()
    (out / ERRATA_FILE).write_text(json.dumps(judged, indent=2, sort_keys=True) + "\n", "utf-8")
    manifest["errata"] = {"file": errata.path, "sha256": errata.sha256}
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n", "utf-8"
    )
    return judged
