"""``run_locomo``: answer, judge and score every LoCoMo question of a selection, resumably.

A run lives in one output folder: ``memory.db`` (unless a store is given), ``llm-cache.db``
(unless ``QEMEM_LLM_CACHE`` or a cache path is given), ``results.jsonl`` (one record per
question, appended and flushed as each finishes; a rerun skips the questions already there),
``manifest.json``, ``timings.json``, ``build.json`` and the report (``summary.json``,
``report.md``, plots; see :mod:`qemem.eval.report`). Evidence annotations are used only to
analyse the records; the system never sees them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qemem.answer import AskConfig
from qemem.answer.ask import MODES, Mode
from qemem.build.config import CalibrateRule
from qemem.errors import InputError
from qemem.eval.errata import ERRATA_FILE, Errata, judge_errata, load_errata
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS, Judgement, judge_answer
from qemem.eval.manifest import run_info
from qemem.eval.records import make_record
from qemem.eval.report import write_report
from qemem.eval.results import load_records, record_key
from qemem.eval.runs import (
    Context,
    RunProgress,
    RunResult,
    answer_all,
    check_fingerprint,
    client_name,
    finish_run,
    open_clients,
    prepare_memory,
    write_json,
)
from qemem.evidence.layout import Layout
from qemem.ingest.locomo import LocomoQuestion, load_locomo, locomo_questions
from qemem.llm import Ledger, LLMClient
from qemem.memory import Memory
from qemem.prompts import prompt_hashes
from qemem.retrieve.budgets import RetrievalConfig
from qemem.store import redact

DEFAULT_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
#: manifest entries that must match for a rerun to continue the records of an output folder
FINGERPRINT = ("data_sha256", "embedder", "answerer", "judge", "judge_runs", "planning")


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
    defaults); ``plan`` False is the planning ablation (``AskConfig.plan``); ``errata`` a
    file of known answer-key errors (:mod:`qemem.eval.errata`) to score beside the original
    gold; ``prompt_layout`` the prompts' layout (the method's published ``paper`` order or
    ``cached``, see ``qemem.evidence.layout``) and ``background_tokens`` the answer's
    background (``AskConfig.background_tokens``), both recorded in the manifest. In full mode
    every question that triggers refinement also gets the answer from its round-0 cards,
    judged (``AskConfig.answer_round0``), for the refinement analysis.
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
    calibrate_rule: CalibrateRule = "complete"
    plan: bool = True
    errata: Path | None = None
    prompt_layout: Layout = "paper"
    background_tokens: int | None = AskConfig.background_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as text; a store URL's password masked)."""
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        if self.store is not None:
            data["store"] = redact(self.store)
        return data


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
    if config.errata is not None and config.mode == "retrieval":
        raise InputError("--errata rescoring needs judged answers: retrieval mode has none")
    bad = [c for c in config.categories if c not in (1, 2, 3, 4, 5)]
    if bad or not config.categories:
        raise InputError(f"categories must be among 1-5, got {config.categories}")


def run_locomo(
    config: LocomoRunConfig,
    progress: RunProgress | None = None,
    *,
    llm: LLMClient | None = None,
    judge: LLMClient | None = None,
) -> RunResult:
    """Run (or resume) the LoCoMo evaluation of ``config`` and write its report; ``llm`` and
    ``judge`` clients, when given, replace the answerer and judge specs of ``config``."""
    clock = {"started": time.perf_counter()}
    _check(config)
    errata = load_errata(config.errata) if config.errata is not None else None
    samples = load_locomo(config.data)
    questions = select_questions(samples, config)
    config.out.mkdir(parents=True, exist_ok=True)
    results = config.out / "results.jsonl"
    done = {record_key(r) for r in load_records(results)}
    llm, judge = open_clients(config, llm, judge)
    needed = list(dict.fromkeys(q.conversation for q in questions))
    memory = Memory.open(
        config.out / "memory.db" if config.store is None else config.store,
        embedder=config.embedder,
        llm=llm,
    )
    try:
        manifest = _manifest(config, memory, llm, judge, questions, errata)
        check_fingerprint(config.out / "manifest.json", manifest, FINGERPRINT)
        write_json(config.out / "manifest.json", manifest)
        build = llm is not None and config.build
        context = prepare_memory(
            memory,
            samples,
            needed,
            config,
            build=build,
            progress=progress,
            clock=clock,
        )
        pending = [q for q in questions if (q.conversation, q.index, config.mode) not in done]
        skipped = len(questions) - len(pending)
        answer_one = _answerer(memory, judge, config, context)
        failures = answer_all(
            pending, answer_one, results, config.concurrency, skipped, len(questions), progress
        )

        def report(records: list[dict[str, Any]]) -> dict[str, Any]:
            judged = _judge_errata(config, records, errata, judge)
            return write_report(config.out, records, manifest, plots=config.plots, errata=judged)

        return finish_run(
            config.out,
            {(q.conversation, q.index, config.mode) for q in questions},
            clock,
            (len(questions), len(pending)),
            failures,
            [llm, judge],
            report,
        )
    finally:
        memory.close()
        if judge is not None and judge is not llm:
            judge.close()


def _manifest(
    config: LocomoRunConfig,
    memory: Memory,
    llm: LLMClient | None,
    judge: LLMClient | None,
    questions: Sequence[LocomoQuestion],
    errata: Errata | None = None,
) -> dict[str, Any]:
    """What the run is: data, config, models, judge, selection, prompt hashes, whether it
    planned, and the errata file it scored against (with its sha256)."""
    return run_info(
        config.data,
        config=config.to_dict(),
        mode=config.mode,
        prompt_layout=config.prompt_layout,
        embedder=memory.embedder.id,
        answerer=client_name(llm),
        judge=client_name(judge),
        judge_is_answerer=judge is not None and judge is llm,
        judge_runs=config.judge_runs if judge else 0,
        judge_max_tokens=config.judge_max_tokens if judge else None,
        built=config.build,
        planning=config.plan,
        selection=[f"{q.conversation}#{q.index}" for q in questions],
        models={"answerer": llm and llm.describe(), "judge": judge and judge.describe()},
        prompts=prompt_hashes(),
        errata={"file": errata.path, "sha256": errata.sha256} if errata else None,
    )


def _judge_errata(
    config: LocomoRunConfig,
    records: Sequence[Mapping[str, Any]],
    errata: Errata | None,
    judge: LLMClient | None,
) -> dict[str, Any] | None:
    """Judge the corrected questions and write ``errata.json`` (removing a stale one when the
    run has no errata file); its content, or None."""
    path = config.out / ERRATA_FILE
    if errata is None:
        path.unlink(missing_ok=True)
        return None
    judged = judge_errata(
        records, errata, judge, runs=config.judge_runs, max_tokens=config.judge_max_tokens
    )
    write_json(path, judged)
    return judged


def _answerer(
    memory: Memory, judge: LLMClient | None, config: LocomoRunConfig, context: Context
) -> Callable[[LocomoQuestion], dict[str, Any]]:
    """The work of one question: answer, judge (when there is a judge), make its record."""
    ask_config = AskConfig(
        retrieval=config.retrieval,
        plan=config.plan,
        answer_round0=config.mode == "full",
        prompt_layout=config.prompt_layout,
        background_tokens=config.background_tokens,
    )

    def answer_one(q: LocomoQuestion) -> dict[str, Any]:
        t0 = time.perf_counter()
        answer = memory.ask(q.conversation, q.question, mode=config.mode, config=ask_config)
        t1 = time.perf_counter()
        ledger = Ledger()
        verdict = before = None
        if judge is not None:
            verdict = _judge(judge, q, answer.text, config, ledger)
            if answer.round0 is not None:
                before = _judge(judge, q, answer.round0.text, config, ledger)
        calls = [r.to_dict() for r in ledger.responses]
        latency = {"answer": t1 - t0, "judge": time.perf_counter() - t1}
        turns, aliases = context[q.conversation]
        return make_record(q, answer, verdict, calls, turns, aliases, latency, before)

    return answer_one


def _judge(
    judge: LLMClient, q: LocomoQuestion, prediction: str, config: LocomoRunConfig, ledger: Ledger
) -> Judgement:
    """``prediction`` judged against the question's gold answer, as the run is configured."""
    return judge_answer(
        judge,
        q.question,
        q.answer,
        prediction,
        runs=config.judge_runs,
        max_tokens=config.judge_max_tokens,
        ledger=ledger,
    )
