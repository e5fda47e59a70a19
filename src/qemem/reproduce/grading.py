"""Figures out of a run's JSON, graded against pinned values (pure functions)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from qemem.errors import InputError

OK, OKISH, FAIL = "OK", "OKish", "FAIL"


def extract(document: Any, path: Sequence[str]) -> Any:
    """The value at ``path`` (mapping keys, or list indices) of a JSON document; None below a
    null (an analysis the run reports as n/a, such as a cluster bootstrap of one conversation)."""
    value = document
    for depth, key in enumerate(path):
        if value is None:
            return None
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif (
            isinstance(value, list)
            and key.lstrip("-").isdigit()
            and -len(value) <= int(key) < len(value)
        ):
            value = value[int(key)]
        else:
            where = ".".join(path[: depth + 1])
            raise InputError(f"the run's output has no {where!r}")
    return value


def last_json_line(stdout: str) -> Any:
    """The JSON document of a command's last non-empty output line (``--json`` prints it so)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise InputError("the command printed nothing (expected one JSON line)")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        raise InputError(f"the command's last line is not JSON: {lines[-1][:80]!r}") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def grade(expected: Any, measured: Any, tolerance: float) -> str:
    """OK when equal, OKish when both are numbers within ``tolerance`` of each other, else FAIL."""
    if expected == measured:
        return OK
    a, b = _number(expected), _number(measured)
    if a is not None and b is not None and math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12):
        return OK
    if a is not None and b is not None and abs(a - b) <= tolerance + 1e-12:
        return OKISH
    return FAIL


def pinned_diff(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The figures whose value a re-record changes: (name, old, new); absent is None."""
    return [
        (name, old.get(name), new.get(name))
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name) or (name in old) != (name in new)
    ]


def format_value(value: Any) -> str:
    """A figure as a table shows it: numbers as JSON writes them, nothing as a dash."""
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(value)
    return json.dumps(value) if not isinstance(value, str) else value
