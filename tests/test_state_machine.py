"""The forget-and-correct state machine (``forget_machine``, issue 30) on both backends,
derandomised with a fixed budget; ``benchmarks/state_machine.py --examples N`` runs a longer,
random search and prints what it tried."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from forget_checks import Backend, PostgresBackend, SQLiteBackend
from forget_machine import ForgetMachine

CI = settings(
    derandomize=True,
    database=None,
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""About 650 steps (each followed by every invariant check) per backend."""
COVERED = (
    "delete conversation: while it is built",
    "start build: ended fenced (conversation deleted)",
    "retry: replayed",
    "correct fact: made",
    "delete fact: a correction",
    "redact message",
    "delete message",
    "export",
    "import",
    "append: as history items",
)
"""What the budget must reach (derandomised, the same on every run)."""


def _run(backend: Backend) -> Counter[str]:
    tally: Counter[str] = Counter()
    try:
        run_state_machine_as_test(lambda: ForgetMachine(backend, tally), settings=CI)
    finally:
        backend.close()
    return tally


@pytest.mark.slow
def test_forgetting_and_correcting_hold_on_sqlite() -> None:
    tally = _run(SQLiteBackend())
    assert [kind for kind in COVERED if not tally[kind]] == [], tally


@pytest.mark.slow
def test_forgetting_and_correcting_hold_on_postgresql(pg_url: str) -> None:
    tally = _run(PostgresBackend(pg_url))
    assert [kind for kind in COVERED if not tally[kind]] == [], tally
