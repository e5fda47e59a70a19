"""Shared fixtures: the bundled sample conversation in an in-memory store with a hash embedder;
store URLs of both backends for the store contract suite (PostgreSQL from a throwaway
``pgserver`` for the session, or the server ``QEMEM_TEST_PG_DSN`` names)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Generator, Iterator
from importlib import resources
from pathlib import Path
from typing import NoReturn

import pytest

from provider_guard import ProviderGuard
from qemem.embed import HashEmbedder
from qemem.memory import Memory
from qemem.store import SQLiteStore

SAMPLE_ID = "demo-1"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    return Path(str(resources.files("qemem").joinpath("data/sample.json")))


@pytest.fixture
def memory(sample_path: Path) -> Iterator[Memory]:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    mem.ingest(sample_path)
    yield mem
    mem.close()


@pytest.fixture(scope="module")
def sample_store(sample_path: Path) -> Iterator[SQLiteStore]:
    """The sample conversation in an in-memory store (hash embedder), shared by the tests of
    a module: they read it and write nothing."""
    store = SQLiteStore(":memory:")
    Memory(store, HashEmbedder()).ingest(sample_path)
    yield store
    store.close()


@pytest.fixture
def empty_memory() -> Iterator[Memory]:
    mem = Memory(SQLiteStore(":memory:"), HashEmbedder())
    yield mem
    mem.close()


def _postgres_unavailable(reason: str) -> NoReturn:
    """Skip the PostgreSQL tests with ``reason``, except under CI, where they must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL tests must run under CI, but: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL server: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL (with pgvector) URL for the session: ``QEMEM_TEST_PG_DSN``, else a
    ``pgserver`` started in a temporary folder and removed at the end, even on failure."""
    dsn = os.environ.get("QEMEM_TEST_PG_DSN")
    if dsn:
        yield dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        try:
            import pgserver
        except ImportError:
            _postgres_unavailable("pgserver is not installed (./scripts/setup installs it)")
    folder = tempfile.mkdtemp(prefix="qemem-pg-")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(folder, cleanup_mode="delete")
    except Exception as exc:
        shutil.rmtree(folder, ignore_errors=True)
        _postgres_unavailable(f"pgserver did not start ({exc})")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def database_url(server: str, name: str) -> str:
    """``server``'s URL with the database part replaced by ``name``."""
    head, _, tail = server.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{tail}" if tail else "")


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"qemem_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield database_url(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store of each backend (the store contract suite runs on both)."""
    if request.param == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_url"))


# --- Test tiers: `./scripts/test --fast` runs what none of these markers name -------------------
# A test is marked by the fixtures it uses (a PostgreSQL server, a browser, live `qemem serve`
# processes, a module fixture that runs a whole evaluation); `slow` is also set by hand on tests
# measured at about half a second or more.

_TIER_BY_FIXTURE = {
    "pg_server": "postgres",
    "pg_url": "postgres",
    "browser": "browser",
    "servers": "server",
    # module fixtures that run a whole evaluation or the property test's world first
    "sample_run": "slow",
    "base_run": "slow",
    "world": "slow",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the tiers its fixtures (or its backend parameter) put it in."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        params = set(map(str, callspec.params.values())) if callspec else set()
        tiers = {tier for name, tier in _TIER_BY_FIXTURE.items() if name in names}
        if "postgresql" in params:
            tiers.add("postgres")
        for tier in sorted(tiers):
            item.add_marker(getattr(pytest.mark, tier))


# --- Provider guard (issue 19): no test reaches a real LLM provider -----------------------------
# Every test runs with tests/provider_guard.py installed: a lookup of or connection to any host
# but loopback, or the load of a real GGUF model, fails the test at once, and fails it at
# teardown too if the code under test swallowed that failure.

_FAILED_BEFORE_TEARDOWN = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note on the item whether its setup or call failed (the guard's teardown reads it)."""
    report: pytest.TestReport = yield
    if report.when in ("setup", "call") and report.failed:
        item.stash[_FAILED_BEFORE_TEARDOWN] = True
    return report


@pytest.fixture(autouse=True)
def provider_guard(request: pytest.FixtureRequest) -> Iterator[ProviderGuard]:
    """The installed guard; a test that provokes it on purpose clears ``blocked``."""
    guard = ProviderGuard()
    with pytest.MonkeyPatch.context() as patch:
        guard.install(patch)
        yield guard
    guard.finish(request.node.stash.get(_FAILED_BEFORE_TEARDOWN, False))
