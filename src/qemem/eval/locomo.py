"""``run_locomo``: answer, judge and score every LoCoMo question of a selection, resumably.

A run lives in one output folder: ``memory.db`` (unless a store is given), ``llm-cache.db``
(unless ``QEMEM_LLM_CACHE`` or a cache path is given), ``results.jsonl`` (one record per
question, appended and flushed as each finishes; a rerun skips the questions already there),
``manifest.json``, ``timings.json``, ``build.json`` and the report (``summary.json``,
``report.md``, plots; see :mod:`qemem.eval.report`). Evidence annotations are used only to
analyse the records; the system never sees them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qemem.answer import Answer, AskConfig
from qemem.answer.ask import MODES, Mode
from qemem.answer.wire import answer_to_json
from qemem.errors import ConfigError, InputError, LLMAuthError, LLMError
from qemem.eval.coverage import alias_keys, budget_positions, evidence_rank, exposure_groups
from qemem.eval.grounding import card_records
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS, Judgement, judge_answer
from qemem.eval.manifest import run_info
from qemem.eval.metrics import bleu1, f1_common, f1_locomo
from qemem.eval.report import load_records, record_key, write_report
from qemem.eval.sources import write_run_sources
from qemem.evidence.refine import Evidence
from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions, parse_locomo
from qemem.llm import Ledger, LLMClient, open_llm, stage_group
from qemem.memory import Memory
from qemem.models import Turn
from qemem.prompts import prompt_hashes
from qemem.retrieve.pool import RetrievalConfig
from qemem.view.record import RUN_REASONS

RunProgress = Callable[[str, int, int], None]
"""Called with (phase, done, total); phases ``ingest``, ``build`` and ``questions``."""

DEFAULT_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
#: the results.jsonl record format: 2 keeps the answer's compact JSON under ``answer``; format
#: 1 (records without ``format``, written before the evidence record) kept the viewer's record
#: under ``evidence_view``, which ``eval report`` and the run page still read
RECORD_FORMAT = 2
#: manifest entries that must match for a rerun to continue the records of an output folder
FINGERPRINT = ("data_sha256", "embedder", "answerer", "judge", "judge_runs")


@dataclass(frozen=True)
class LocomoRunConfig:
    """What to run: data, output folder, operating point, models and selection.

    ``llm`` and ``judge`` are LLM specs (None: ``QEMEM_LLM``; without a judge the answerer's
    own model grades it, which the manifest and the report say: the published protocol uses a
    separate judge). ``judge_max_tokens`` bounds each judge call (reasoning models need room).
    ``build`` False answers from what the store holds (turns only when nothing was built), to
    measure the query-time stages alone. ``cache`` defaults to ``QEMEM_LLM_CACHE``, else
    ``out/llm-cache.db``; ``cache_mode`` to ``QEMEM_CACHE_MODE``, else readwrite. ``limit``
    keeps the first questions of the selection (file order); ``concurrency`` bounds both the
    questions in flight and the provider calls of each client; ``plots`` turns the PNG plots
    off; ``retrieval`` sets the pool's budgets and other retrieval settings (None: the
    defaults).
    """

    data: Path
    out: Path
    store: str | Path | None = None
    mode: Mode = "full"
    llm: str | None = None
    judge: str | None = None
    judge_runs: int = 1
    judge_max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS
    build: bool = True
    categories: tuple[int, ...] = DEFAULT_CATEGORIES
    conversations: tuple[str, ...] = ()
    limit: int | None = None
    concurrency: int = 4
    embedder: str | None = None
    cache: Path | None = None
    cache_mode: str | None = None
    plots: bool = True
    retrieval: RetrievalConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as text)."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


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


# ---------------------------------------------------------------------------- per question


def evidence_share(
    ids: Iterable[str], evidence: Sequence[str], aliases: Mapping[str, object]
) -> float | None:
    """Share of the evidence turns shown by ``ids`` (an alias counts); None for no evidence."""
    needed = {aliases.get(e, ("missing", e)) for e in evidence}
    if not needed:
        return None
    shown = {aliases.get(i, ("missing", i)) for i in ids}
    return len(needed & shown) / len(needed)


def evidence_visible(
    ids: Sequence[str], evidence: Sequence[str], aliases: Mapping[str, object]
) -> bool | None:
    """Whether ``ids`` show every evidence turn (or an alias of it); None for no evidence."""
    if not evidence:
        return None
    return evidence_rank(ids, evidence, aliases) is not None


def stage_costs(calls: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Calls, tokens and nominal cost per stage group (cost None when a call had no price)."""
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        tally = out.setdefault(
            stage_group(str(call["stage"])),
            {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        )
        tally["calls"] += 1
        tally["input_tokens"] += int(call["input_tokens"])
        tally["output_tokens"] += int(call["output_tokens"])
        cost = call.get("cost_usd")
        tally["cost_usd"] = (
            None if cost is None or tally["cost_usd"] is None else (tally["cost_usd"] + float(cost))
        )
    return dict(sorted(out.items()))


def refinement_info(answer: Answer) -> dict[str, Any]:
    """Whether round 0 asked for refinement (full mode), rounds run, and the refinement calls:
    the constructor calls of the rounds after the first (repairs included), as the evidence
    record keeps them per round."""
    evidence = answer.evidence
    first = evidence.rounds[0].feedback if evidence.rounds else None
    triggered = answer.mode == "full" and first is not None and not first.sufficient
    extra = [c for r in evidence.rounds[1:] for c in r.calls]
    cost = stage_costs(extra).get("construct", {})
    rounds = len(evidence.rounds) - 1 if answer.mode in ("full", "no-refine") else 0
    return {
        "triggered": triggered,
        "rounds": max(0, rounds),
        "termination": evidence.termination,
        "extra_calls": len(extra),
        "extra_input_tokens": int(cost.get("input_tokens", 0)),
        "extra_output_tokens": int(cost.get("output_tokens", 0)),
        "extra_cost_usd": cost.get("cost_usd", 0.0),
    }


def _evidence_spread(evidence: Sequence[str], turns: Mapping[str, Turn]) -> dict[str, Any]:
    """The sessions of the evidence turns, the days they span, and the ids the store lacks."""
    known = [turns[e] for e in evidence if e in turns]
    dates = [t.timestamp.date() for t in known]
    return {
        "evidence_sessions": sorted({t.session for t in known}),
        "evidence_span_days": (max(dates) - min(dates)).days if dates else None,
        "evidence_unknown": [e for e in evidence if e not in turns],
    }


def _initial_rank(
    record: Evidence, evidence: Sequence[str], aliases: Mapping[str, object]
) -> int | None:
    """The strict budget position at which the round-0 pool covers the evidence."""
    if not evidence:
        return None
    groups = exposure_groups(record.rounds[0].pool)
    return budget_positions(groups, evidence, aliases)[0]


def make_record(
    question: LocomoQuestion,
    answer: Answer,
    judgement: Judgement | None,
    judge_calls: Sequence[Mapping[str, Any]],
    turns: Mapping[str, Turn],
    aliases: Mapping[str, object],
    latency: Mapping[str, float],
) -> dict[str, Any]:
    """The results.jsonl record of one answered (and judged) question; scores are None in
    retrieval mode (no answer), cards and card citations None in modes without cards. Every
    turn set is read from the evidence record: the turns each round's candidates expose, and
    what the answer prompt showed (``Evidence.shown``; the "cited" visibility counts the turns
    of its cited-sources section, not every turn behind a cited episode or fact)."""
    evidence = list(question.evidence)
    record = answer.evidence
    initial = record.turn_ids([0])
    refined = record.turn_ids(range(len(record.rounds)))
    visible = list(record.shown.turns)
    cited = list(record.shown.cited_context)
    gold, prediction = question.answer, answer.text
    answers, cards = answer.mode != "retrieval", answer.mode in ("full", "no-refine")
    return {
        "conversation": question.conversation,
        "index": question.index,
        "mode": answer.mode,
        "question": question.question,
        "gold": gold,
        "category": question.category,
        "category_name": question.category_name,
        "evidence": evidence,
        "prediction": prediction,
        "judge_labels": list(judgement.labels) if judgement else [],
        "judge_parse_failures": judgement.parse_failures if judgement else 0,
        "score": judgement.score if judgement else None,
        "f1": f1_common(prediction, gold) if answers else None,
        "f1_locomo": f1_locomo(prediction, gold, question.category) if answers else None,
        "bleu1": bleu1(prediction, gold) if answers else None,
        "llm": stage_costs([*answer.trace.calls, *judge_calls]),
        "latency_s": {k: round(v, 3) for k, v in latency.items()},
        "refinement": refinement_info(answer),
        "visible_turn_ids": visible,
        "cited_turn_ids": list(answer.citations),
        "cited_context_turn_ids": cited if cards else None,
        "cards": card_records(answer.cards) if cards else None,
        "initial_pool_turn_ids": initial,
        "refined_pool_turn_ids": refined,
        **_evidence_spread(evidence, turns),
        "visibility": {
            "initial": evidence_visible(initial, evidence, aliases),
            "refined": evidence_visible(refined, evidence, aliases),
            "final": evidence_visible(visible, evidence, aliases),
            "cited": evidence_visible(cited, evidence, aliases) if cards else None,
            "cited_share": evidence_share(cited, evidence, aliases) if cards else None,
            "initial_pool_rank": _initial_rank(record, evidence, aliases),
        },
        "degradations": list(record.degradations),
        "format": RECORD_FORMAT,
        "answer": answer_to_json(answer, compact=True, max_reasons=RUN_REASONS),
    }


# ---------------------------------------------------------------------------- the run


def select_questions(
    samples: list[dict[str, Any]], config: LocomoRunConfig
) -> list[LocomoQuestion]:
    """The questions of the chosen categories and conversations, in file order, limited."""
    questions = locomo_questions(samples)
    known = {q.conversation for q in questions} | {
        str(s.get("sample_id") or f"sample-{n}") for n, s in enumerate(samples)
    }
    unknown = sorted(set(config.conversations) - known)
    if unknown:
        raise InputError(
            f"unknown conversation(s) {', '.join(unknown)}; the data has {', '.join(sorted(known))}"
        )
    chosen = [
        q
        for q in questions
        if q.category in config.categories
        and (not config.conversations or q.conversation in config.conversations)
    ]
    return chosen[: config.limit] if config.limit is not None else chosen


def _check(config: LocomoRunConfig) -> None:
    if config.mode not in MODES:
        raise InputError(f"unknown mode {config.mode!r}: use one of {', '.join(MODES)}")
    if config.judge_runs < 1 or config.concurrency < 1 or config.judge_max_tokens < 1:
        raise InputError("judge runs, judge max tokens and concurrency must be at least 1")
    if config.limit is not None and config.limit < 1:
        raise InputError("limit must be at least 1 (leave it out to run every question)")
    bad = [c for c in config.categories if c not in (1, 2, 3, 4, 5)]
    if bad or not config.categories:
        raise InputError(f"categories must be among 1-5, got {config.categories}")


def _clients(config: LocomoRunConfig) -> tuple[LLMClient | None, LLMClient | None]:
    """Answerer and judge clients sharing one cache; the judge is the answerer unless a
    different judge spec is given; neither in retrieval mode without an LLM."""
    cache = config.cache or os.environ.get("QEMEM_LLM_CACHE") or config.out / "llm-cache.db"
    kwargs: dict[str, Any] = {
        "cache_path": cache,
        "cache_mode": config.cache_mode,
        "concurrency": config.concurrency,
    }
    llm = open_llm(config.llm, **kwargs)
    if llm is None and config.mode != "retrieval":
        raise LLMError(
            f"mode {config.mode!r} needs an LLM: pass --llm (e.g. anthropic:claude-haiku-4-5, or "
            "fake for an offline trial) or set QEMEM_LLM; mode retrieval needs none"
        )
    if config.mode == "retrieval":
        return llm, None
    if config.judge is None or config.judge == config.llm:
        return llm, llm
    return llm, open_llm(config.judge, **kwargs)


def _name(client: LLMClient | None) -> str | None:
    return f"{client.provider.name}:{client.provider.model}" if client is not None else None


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", "utf-8")


def _check_fingerprint(path: Path, manifest: Mapping[str, Any]) -> None:
    """Refuse to mix records of different models, data or embedder in one folder."""
    if not path.exists():
        return
    old = json.loads(path.read_text("utf-8"))
    changed = [k for k in FINGERPRINT if k in old and old[k] != manifest.get(k)]
    if changed:
        raise ConfigError(
            f"{path.parent} holds a run with a different {', '.join(changed)} "
            f"({', '.join(f'{old[k]!r}' for k in changed)}); use a new --out folder"
        )


def _build(
    memory: Memory, conversations: Sequence[str], out: Path, progress: RunProgress | None
) -> None:
    """Build what the store lacks; record the builds that did work in build.json."""
    path = out / "build.json"
    done = json.loads(path.read_text("utf-8")) if path.exists() else {}
    reports = memory.build(list(conversations))  # several conversations at once
    for n, (cid, report) in enumerate(zip(conversations, reports, strict=True)):
        if report.llm_calls or report.episodes:
            done[cid] = report.to_dict()
        if progress:
            progress("build", n + 1, len(conversations))
    if done:
        _write_json(path, done)


def run_locomo(config: LocomoRunConfig, progress: RunProgress | None = None) -> RunResult:
    """Run (or resume) the LoCoMo evaluation of ``config`` and write its report."""
    started = time.perf_counter()
    _check(config)
    samples = load_locomo(config.data)
    questions = select_questions(samples, config)
    config.out.mkdir(parents=True, exist_ok=True)
    results = config.out / "results.jsonl"
    done = {record_key(r) for r in load_records(results)}
    llm, judge = _clients(config)
    clients = [c for c in dict.fromkeys([llm, judge]) if c is not None]
    needed = list(dict.fromkeys(q.conversation for q in questions))
    memory = Memory.open(
        config.store or config.out / "memory.db", embedder=config.embedder, llm=llm
    )
    try:
        manifest = run_info(
            config.data,
            config=config.to_dict(),
            mode=config.mode,
            embedder=memory.embedder.id,
            answerer=_name(llm),
            judge=_name(judge),
            judge_is_answerer=judge is not None and judge is llm,
            judge_runs=config.judge_runs if judge else 0,
            judge_max_tokens=config.judge_max_tokens if judge else None,
            built=config.build,
            selection=[f"{q.conversation}#{q.index}" for q in questions],
            models={"answerer": llm and llm.describe(), "judge": judge and judge.describe()},
            prompts=prompt_hashes(),
        )
        _check_fingerprint(config.out / "manifest.json", manifest)
        _write_json(config.out / "manifest.json", manifest)
        wanted = [
            s for n, s in enumerate(samples) if str(s.get("sample_id") or f"sample-{n}") in needed
        ]
        memory.ingest(
            parse_locomo(wanted, str(config.data)),
            progress=(lambda d, t: progress("ingest", d, t)) if progress else None,
        )
        ingested = time.perf_counter()
        if llm is not None and config.build:
            _build(memory, needed, config.out, progress)
        built = time.perf_counter()
        write_run_sources(config.out, memory, needed)
        context = {}
        for cid in needed:
            turns = memory.turns(cid)
            context[cid] = ({t.id: t for t in turns}, alias_keys(turns))

        ask_config = AskConfig(retrieval=config.retrieval)

        def answer_one(q: LocomoQuestion) -> dict[str, Any]:
            t0 = time.perf_counter()
            answer = memory.ask(q.conversation, q.question, mode=config.mode, config=ask_config)
            t1 = time.perf_counter()
            ledger = Ledger()
            verdict = None
            if judge is not None:
                verdict = judge_answer(
                    judge,
                    q.question,
                    q.answer,
                    answer.text,
                    runs=config.judge_runs,
                    max_tokens=config.judge_max_tokens,
                    ledger=ledger,
                )
            calls = [r.to_dict() for r in ledger.responses]
            latency = {"answer": t1 - t0, "judge": time.perf_counter() - t1}
            turns, aliases = context[q.conversation]
            return make_record(q, answer, verdict, calls, turns, aliases, latency)

        pending = [q for q in questions if (q.conversation, q.index, config.mode) not in done]
        skipped = len(questions) - len(pending)
        failures = _answer_all(
            pending, answer_one, results, config.concurrency, skipped, len(questions), progress
        )
        answered_at = time.perf_counter()
        keys = {(q.conversation, q.index, config.mode) for q in questions}
        records = [r for r in load_records(results) if record_key(r) in keys]
        summary = write_report(config.out, records, manifest, plots=config.plots)
        provider = sum(1 for c in clients for r in c.ledger.responses if not r.cached)
        cached = sum(1 for c in clients for r in c.ledger.responses if r.cached)
        _write_json(
            config.out / "timings.json",
            {
                "ingest_s": round(ingested - started, 2),
                "build_s": round(built - ingested, 2),
                "questions_s": round(answered_at - built, 2),
                "wall_s": round(time.perf_counter() - started, 2),
                "answered": len(pending) - len(failures),
                "skipped": skipped,
                "failures": failures,
                "provider_calls": provider,
                "cached_calls": cached,
                "latency_s": _latency(records),
            },
        )
        return RunResult(
            config.out,
            len(questions),
            len(pending) - len(failures),
            skipped,
            failures,
            provider,
            cached,
            summary,
            time.perf_counter() - started,
        )
    finally:
        memory.close()
        if judge is not None and judge is not llm:
            judge.close()


def _answer_all(
    pending: Sequence[LocomoQuestion],
    answer_one: Callable[[LocomoQuestion], dict[str, Any]],
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
        running: dict[Future[dict[str, Any]], LocomoQuestion] = {}
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


def _latency(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean, median and 95th percentile of per-question answer latency."""
    values = sorted(float(r["latency_s"].get("answer", 0.0)) for r in records)
    if not values:
        return {}
    p50, p95 = (values[min(len(values) - 1, int(q * len(values)))] for q in (0.5, 0.95))
    return {"mean": round(sum(values) / len(values), 3), "p50": round(p50, 3), "p95": round(p95, 3)}
