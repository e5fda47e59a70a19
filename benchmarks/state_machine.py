"""A longer search of the forget-and-correct state machine (issue 30; the machine is
``tests/forget_machine.py``, its CI budget ``tests/test_state_machine.py``).

python benchmarks/state_machine.py --examples 200
python benchmarks/state_machine.py --examples 200 --backend postgres --steps 40

Runs ``--examples`` random examples (hypothesis, not derandomised: each run tries new ones) of
up to ``--steps`` steps on each backend asked for (default both; PostgreSQL is a throwaway
``pgserver`` in a temporary folder unless ``--postgres-url`` names a server), then prints per
backend what it tried: examples, steps, operations by kind and their outcomes, seconds. A
failing example is printed by hypothesis (the steps that reproduce it) and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from forget_checks import PostgresBackend, SQLiteBackend  # noqa: E402
from forget_machine import Backend, ForgetMachine  # noqa: E402


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """The URL of a PostgreSQL server started by ``pgserver`` in a temporary folder, removed
    at the end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # the [postgres] extra

        with tempfile.TemporaryDirectory(prefix="qemem-machine-pg-") as folder:
            server = pgserver.get_server(folder, cleanup_mode="delete")
            try:
                yield server.get_uri()
            finally:
                server.cleanup()


def search(backend: Backend, examples: int, steps: int) -> tuple[Counter[str], float, bool]:
    """Run the machine; (what it tried, seconds, whether every example held)."""
    tally: Counter[str] = Counter()
    options = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.perf_counter()
    held = True
    try:
        run_state_machine_as_test(lambda: ForgetMachine(backend, tally), settings=options)
    except Exception:
        held = False
        traceback.print_exc()
    finally:
        backend.close()
    return tally, time.perf_counter() - started, held


def report(name: str, tally: Counter[str], seconds: float, held: bool) -> None:
    print(f"{name}: {'held' if held else 'FAILED'} in {seconds:.1f} s")
    print(f"  examples {tally.pop('examples', 0)}, steps {tally.pop('steps', 0)}")
    operations = {k: v for k, v in tally.items() if ":" not in k}
    for kind, count in sorted(operations.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {count:6d}  {kind}")
        for outcome, n in sorted(tally.items()):
            if outcome.startswith(f"{kind}:"):
                print(f"  {n:6d}    {outcome[len(kind) + 1 :].strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--steps", type=int, default=40, help="most steps of one example")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--postgres-url", help="a PostgreSQL (with pgvector) to use instead")
    args = parser.parse_args()
    held = True
    if args.backend in ("sqlite", "both"):
        result = search(SQLiteBackend(), args.examples, args.steps)
        report("sqlite", *result)
        held &= result[2]
    if args.backend in ("postgres", "both"):
        with contextlib.ExitStack() as stack:
            url = args.postgres_url or stack.enter_context(throwaway_postgres())
            result = search(PostgresBackend(url), args.examples, args.steps)
        report("postgresql", *result)
        held &= result[2]
    sys.exit(0 if held else 1)


if __name__ == "__main__":
    main()
