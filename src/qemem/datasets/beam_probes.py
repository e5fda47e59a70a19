"""BEAM's probing questions as LoCoMo-shaped QA items.

A chat's ``probing_questions.json`` maps each of ten abilities to its probes. A probe keeps its
question, its reference answer (under ``answer``, ``ideal_answer``, ``ideal_response``,
``ideal_summary`` or ``expected_compliance``, the field recorded), its rubric, its difficulty
and the ability-specific fields (the ordering items of event ordering, which its rubric lists;
the abstention type), and the rest of its fields verbatim under ``beam_fields``. Its
``source_chat_ids`` (a list of message ids, a list of such lists, or an object of them such as
``first_statement`` / ``second_statement``) become evidence turn ids through the chat's id
mapping; a probe without any (abstention, a few summaries) gets no evidence and a note.

Each probe also gets a LoCoMo category, so the LoCoMo harness can read it: multi-session
reasoning 1 (multi-hop), temporal reasoning 2, information extraction and knowledge update 4
(single-hop), abstention 5 (adversarial, outside the default selection 1-4), the rest 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qemem.errors import InputError

ABILITIES: tuple[str, ...] = (
    "abstention",
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
ABILITY_CATEGORY: dict[str, int] = {
    "abstention": 5,
    "contradiction_resolution": 3,
    "event_ordering": 3,
    "information_extraction": 4,
    "instruction_following": 3,
    "knowledge_update": 4,
    "multi_session_reasoning": 1,
    "preference_following": 3,
    "summarization": 3,
    "temporal_reasoning": 2,
}
REFERENCE_FIELDS: tuple[str, ...] = (
    "answer",
    "ideal_answer",
    "ideal_response",
    "ideal_summary",
    "expected_compliance",
)
_MAPPED = {"question", "rubric", "difficulty", "source_chat_ids", "abstention_type"}


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def map_ids(raw: Any, id_map: Mapping[int, str], fail: Any) -> Any:
    """``raw`` (an id, or lists and objects of ids, nested) with each message id replaced by
    its turn id; ``fail(message)`` makes the error for anything else."""
    if _is_id(raw):
        if raw not in id_map:
            raise fail(f"message id {raw} is not in the chat (ids 0-{len(id_map) - 1})")
        return id_map[raw]
    if isinstance(raw, list):
        return [map_ids(item, id_map, fail) for item in raw]
    if isinstance(raw, dict):
        return {str(key): map_ids(value, id_map, fail) for key, value in raw.items()}
    raise fail(f"expected message ids (numbers, lists or objects of them), got {raw!r}")


def flatten_ids(mapped: Any) -> list[str]:
    """The turn ids of a mapped ``source_chat_ids``, in order, each once."""
    if isinstance(mapped, str):
        return [mapped]
    items = mapped.values() if isinstance(mapped, dict) else mapped
    return list(dict.fromkeys(t for item in items for t in flatten_ids(item)))


def _text(probe: Mapping[str, Any], name: str, fail: Any) -> str:
    value = probe.get(name)
    if not isinstance(value, str) or not value.strip():
        raise fail(f"missing or empty {name!r}", name)
    return value


def convert_probe(
    probe: Any, ability: str, index: int, id_map: Mapping[int, str], file: str
) -> dict[str, Any]:
    """One probe as a QA item; InputError names the file, probe and field it cannot map."""
    record = f"probe {ability}[{index}]"

    def fail(message: str, field: str) -> InputError:
        return InputError(message, file=file, record=record, field=field)

    if not isinstance(probe, dict):
        raise fail("a probe must be an object", ability)
    question = _text(probe, "question", fail)
    found = [name for name in REFERENCE_FIELDS if isinstance(probe.get(name), str)]
    if not found or not probe[found[0]].strip():
        raise fail(f"no reference answer: expected one of {', '.join(REFERENCE_FIELDS)}", "answer")
    rubric = probe.get("rubric")
    if not isinstance(rubric, list) or not rubric or not all(isinstance(r, str) for r in rubric):
        raise fail("'rubric' must be a non-empty list of strings", "rubric")
    raw = probe.get("source_chat_ids")
    item: dict[str, Any] = {
        "question": question,
        "answer": probe[found[0]],
        "category": ABILITY_CATEGORY[ability],
        "evidence": [],
        "ability": ability,
        "beam_index": index,
        "reference_field": found[0],
        "rubric": list(rubric),
    }
    if raw is None or raw == [] or raw == {}:
        item["evidence_note"] = "the probe names no source messages"
    else:
        mapped = map_ids(raw, id_map, lambda m: fail(m, "source_chat_ids"))
        item["evidence"] = flatten_ids(mapped)
        if not isinstance(mapped, list) or any(not isinstance(m, str) for m in mapped):
            item["evidence_parts"] = mapped
    if ability == "event_ordering":
        item["ordering_items"] = list(rubric)
    if ability == "abstention":
        item["abstention_type"] = str(probe.get("abstention_type") or "unspecified")
    if isinstance(probe.get("difficulty"), str):
        item["difficulty"] = probe["difficulty"]
    item["beam_fields"] = {
        k: v for k, v in probe.items() if k not in _MAPPED and k not in REFERENCE_FIELDS
    }
    return item


def convert_probes(data: Any, id_map: Mapping[int, str], file: str) -> list[dict[str, Any]]:
    """Every probe of a ``probing_questions.json`` (ability by ability, in BEAM's order of
    abilities, each ability's probes in file order) as QA items."""
    if not isinstance(data, dict):
        raise InputError("expected an object of abilities", file=file, field="probing questions")
    unknown = sorted(set(data) - set(ABILITIES))
    if unknown:
        raise InputError(
            f"unknown abilities {', '.join(unknown)}; BEAM's are {', '.join(ABILITIES)}",
            file=file,
            field=unknown[0],
        )
    items: list[dict[str, Any]] = []
    for ability in ABILITIES:
        probes = data.get(ability, [])
        if not isinstance(probes, list):
            raise InputError("an ability must hold a list of probes", file=file, field=ability)
        items.extend(convert_probe(p, ability, n, id_map, file) for n, p in enumerate(probes))
    return items
