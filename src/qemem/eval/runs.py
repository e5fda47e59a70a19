"""The machinery every evaluation run shares (LoCoMo's and BEAM's): the answerer and judge
clients, the run folder's manifest check, ingesting and building the memory, answering
questions concurrently and resumably into ``results.jsonl``, and the run's timings."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from qemem.build import BuildConfig
from qemem.build.config import CalibrateRule
from qemem.errors import ConfigError, InputError, LLMAuthError, LLMError
from qemem.eval.coverage import alias_keys
from qemem.eval.results import load_records, record_key
from qemem.eval.sources import write_run_sources
from qemem.ingest.locomo import parse_locomo
from qemem.llm import LLMClient, open_llm
from qemem.memory import Memory
from qemem.models import Turn

RunProgress = Callable[[str, int, int], None]
"""Called with (phase, done, total); phases ``ingest``, ``build`` and ``questions``."""


@dataclass
class RunResult:
    """What a run did. ``provider_calls`` counts LLM calls not served from the cache (build,
    answering and judging), ``cached_calls`` those that were."""

    out: Path
    questions: int
    answered: int
    skipped: int
    failures: list[str] = field(default_factory=list)
    provider_calls: int = 0
    cached_calls: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class ClientSettings(Protocol):
    """What opening a run's clients reads of its config."""

    @property
    def out(self) -> Path: ...
    @property
    def cache(self) -> Path | None: ...
    @property
    def cache_mode(self) -> str | None: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def llm(self) -> str | None: ...
    @property
    def judge(self) -> str | None: ...
    @property
    def mode(self) -> str: ...


class Question(Protocol):
    """What answering reads of a question: its conversation and index (for failures)."""

    @property
    def conversation(self) -> str: ...
    @property
    def index(self) -> int: ...


Item = TypeVar("Item", bound=Question)


class MemorySettings(Protocol):
    """What preparing a run's memory reads of its config."""

    @property
    def data(self) -> Path: ...
    @property
    def out(self) -> Path: ...
    @property
    def calibrate_rule(self) -> CalibrateRule: ...


Context = dict[str, tuple[dict[str, Turn], Mapping[str, object]]]
"""Per conversation: its turns by id and the alias keys of its turns (for visibility)."""


def open_clients(
    settings: ClientSettings, llm: LLMClient | None = None, judge: LLMClient | None = None
) -> tuple[LLMClient | None, LLMClient | None]:
    """Answerer and judge clients: the ones given, else opened from their specs sharing one
    cache (``settings.cache``, else ``QEMEM_LLM_CACHE``, else ``OUT/llm-cache.db``); the judge
    is the answerer unless a different judge (spec or client) is given; neither in retrieval
    mode without an LLM."""
    cache = settings.cache or os.environ.get("QEMEM_LLM_CACHE") or settings.out / "llm-cache.db"
    kwargs: dict[str, Any] = {
        "cache_path": cache,
        "cache_mode": settings.cache_mode,
        "concurrency": settings.concurrency,
    }
    if llm is None:
        llm = open_llm(settings.llm, **kwargs)
    if llm is None and settings.mode != "retrieval":
        raise LLMError(
            f"mode {settings.mode!r} needs an LLM: pass --llm (e.g. anthropic:claude-haiku-4-5, "
            "or fake for an offline trial) or set QEMEM_LLM; mode retrieval needs none"
        )
    if settings.mode == "retrieval":
        return llm, None
    if judge is not None:
        return llm, judge
    if settings.judge is None or settings.judge == settings.llm:
        return llm, llm
    return llm, open_llm(settings.judge, **kwargs)


def client_name(client: LLMClient | None) -> str | None:
    """``provider:model`` of a client (None without one)."""
    return f"{client.provider.name}:{client.provider.model}" if client is not None else None


def call_counts(clients: Sequence[LLMClient | None]) -> tuple[int, int]:
    """(provider calls, cached calls) of a run's clients, each client counted once."""
    totals = [c.ledger.total() for c in dict.fromkeys(clients) if c is not None]
    cached = sum(t.cached_calls for t in totals)
    return sum(t.calls for t in totals) - cached, cached


def write_json(path: Path, data: Any) -> None:
    """``data`` as sorted, indented JSON."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", "utf-8")


def check_fingerprint(path: Path, manifest: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Refuse to mix records of different models, data or embedder in one folder: the
    manifest at ``path``, when there is one, must agree with ``manifest`` on ``keys``."""
    if not path.exists():
        return
    old = json.loads(path.read_text("utf-8"))
    changed = [k for k in keys if k in old and old[k] != manifest.get(k)]
    if changed:
        raise ConfigError(
            f"{path.parent} holds a run with a different {', '.join(changed)} "
            f"({', '.join(f'{old[k]!r}' for k in changed)}); use a new --out folder"
        )


def timings(
    clock: Mapping[str, float],
    records: Sequence[Mapping[str, Any]],
    answered: int,
    skipped: int,
    failures: Sequence[str],
) -> dict[str, Any]:
    """The phases' durations, what was answered, and the per-question answer latency."""
    return {
        "ingest_s": round(clock["ingested"] - clock["started"], 2),
        "build_s": round(clock["built"] - clock["ingested"], 2),
        "questions_s": round(clock["answered"] - clock["built"], 2),
        "wall_s": round(time.perf_counter() - clock["started"], 2),
        "answered": answered,
        "skipped": skipped,
        "failures": list(failures),
        "latency_s": latency(records),
    }


def answer_all(
    pending: Sequence[Item],
    answer_one: Callable[[Item], dict[str, Any]],
    results: Path,
    concurrency: int,
    skipped: int,
    total: int,
    progress: RunProgress | None,
) -> list[str]:
    """Answer ``pending`` with at most ``concurrency`` in flight, appending each record as it
    finishes; a question that fails (an LLM call, or any other error in its worker) is reported
    with its error and retried by a rerun, and the run goes on; only an authentication error
    stops it."""
    failures: list[str] = []
    finished = skipped
    data = results.read_bytes() if results.exists() else b""
    if data and not data.endswith(b"\n"):  # drop a line cut off by an interrupted run
        results.write_bytes(data[: data.rfind(b"\n") + 1])
    if progress:
        progress("questions", finished, total)
    queue = iter(pending)
    with results.open("a", encoding="utf-8") as handle, ThreadPoolExecutor(concurrency) as pool:
        running: dict[Future[dict[str, Any]], Item] = {}
        try:
            while True:
                while len(running) < concurrency and (q := next(queue, None)) is not None:
                    running[pool.submit(answer_one, q)] = q
                if not running:
                    break
                ready, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in ready:
                    q = running.pop(future)
                    try:
                        record = future.result()
                    except LLMAuthError:
                        raise
                    except LLMError as exc:
                        failures.append(f"{q.conversation}#{q.index}: {exc}")
                    except Exception as exc:  # a bug or bad record must not end the run
                        failures.append(f"{q.conversation}#{q.index}: {type(exc).__name__}: {exc}")
                    else:
                        handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                        handle.flush()
                    finished += 1
                    if progress:
                        progress("questions", finished, total)
        finally:
            for future in running:
                future.cancel()
    return failures


def latency(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean, median and 95th percentile of per-question answer latency."""
    values = sorted(float(r["latency_s"].get("answer", 0.0)) for r in records)
    if not values:
        return {}
    p50, p95 = (values[min(len(values) - 1, int(q * len(values)))] for q in (0.5, 0.95))
    return {"mean": round(sum(values) / len(values), 3), "p50": round(p50, 3), "p95": round(p95, 3)}


def build_memory(
    memory: Memory,
    conversations: Sequence[str],
    settings: MemorySettings,
    progress: RunProgress | None,
) -> None:
    """Build what the store lacks; record the builds that did work in OUT/build.json."""
    path = settings.out / "build.json"
    done = json.loads(path.read_text("utf-8")) if path.exists() else {}
    build = BuildConfig(calibrate_rule=settings.calibrate_rule)
    reports = memory.build(list(conversations), config=build)  # several at once
    for n, (cid, report) in enumerate(zip(conversations, reports, strict=True)):
        if report.llm_calls or report.episodes:
            done[cid] = report.to_dict()
        if progress:
            progress("build", n + 1, len(conversations))
    if done:
        write_json(path, done)


def prepare_memory(
    memory: Memory,
    samples: Sequence[dict[str, Any]],
    needed: Sequence[str],
    settings: MemorySettings,
    *,
    build: bool,
    progress: RunProgress | None,
    clock: dict[str, float],
) -> Context:
    """Ingest the needed conversations of ``samples`` (LoCoMo-shaped), build their memory
    (when ``build``), write the run's sources; returns what scoring needs of each
    conversation. ``clock`` gets the times ingest and build ended."""
    wanted = [
        s for n, s in enumerate(samples) if str(s.get("sample_id") or f"sample-{n}") in needed
    ]
    memory.ingest(
        parse_locomo(wanted, str(settings.data)),
        progress=(lambda d, t: progress("ingest", d, t)) if progress else None,
    )
    clock["ingested"] = time.perf_counter()
    if build:
        build_memory(memory, needed, settings, progress)
    clock["built"] = time.perf_counter()
    write_run_sources(settings.out, memory, needed)
    context: Context = {}
    for cid in needed:
        turns = memory.turns(cid)
        context[cid] = ({t.id: t for t in turns}, alias_keys(turns))
    return context


def finish_run(
    out: Path,
    keys: set[tuple[str, int, str]],
    clock: dict[str, float],
    counts: tuple[int, int],
    failures: Sequence[str],
    clients: Sequence[LLMClient | None],
    report: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> RunResult:
    """End a run whose answering is done: report its records (those of ``keys`` in
    ``OUT/results.jsonl``) with ``report``, write ``timings.json``, and say what it did.
    ``counts`` is (questions selected, questions pending when answering began)."""
    clock["answered"] = time.perf_counter()
    records = [r for r in load_records(out / "results.jsonl") if record_key(r) in keys]
    summary = report(records)
    provider, cached = call_counts(clients)
    total, pending = counts
    answered, skipped = pending - len(failures), total - pending
    spent = timings(clock, records, answered, skipped, failures)
    write_json(out / "timings.json", {**spent, "provider_calls": provider, "cached_calls": cached})
    seconds = time.perf_counter() - clock["started"]
    return RunResult(
        out, total, answered, skipped, list(failures), provider, cached, summary, seconds
    )


def run_benchmark(out: Path) -> str:
    """The benchmark a run folder holds (its manifest's ``benchmark``; LoCoMo when it names
    none); InputError when the folder holds no manifest.json."""
    path = out / "manifest.json"
    if not path.exists():
        raise InputError(f"{out} holds no manifest.json: give the folder of a qemem eval run")
    return str(json.loads(path.read_text("utf-8")).get("benchmark", "LoCoMo"))
