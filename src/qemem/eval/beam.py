"""``run_beam``: answer, judge and score BEAM probes, resumably, in a run folder like LoCoMo's.

The data is the LoCoMo-shaped file ``qemem data beam`` writes. A run folder holds
``memory.db`` (unless a store is given), ``llm-cache.db``, ``results.jsonl`` (one record per
probe, :mod:`qemem.eval.beam_records`; a rerun skips the probes already there),
``manifest.json`` (with the judge's prompts), ``timings.json``, ``build.json``,
``summary.json`` and ``report.md`` (:mod:`qemem.eval.beam_report`).

Modes: qemem's own (``respond`` by default: BEAM's probes are requests to an assistant;
``full``, ``no-refine``, ``direct``, ``matched``, ``retrieval`` ... any mode ``ask`` has, passed
through; ``retrieval`` makes no LLM call and reports coverage only) and two baselines on the
same store (:mod:`qemem.eval.beam_baselines`): ``rag`` and ``full-context``. Evidence
annotations are used only to analyse the records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qemem.answer.ask import MODES, AskConfig
from qemem.build.config import CalibrateRule
from qemem.errors import InputError
from qemem.eval.answering import EVAL_MODES, answer_in_mode, check_window, turn_costs
from qemem.eval.beam_baselines import (
    DEFAULT_RAG_TURNS,
    DEFAULT_WINDOW_TOKENS,
)
from qemem.eval.beam_judge import judge_prompts
from qemem.eval.beam_records import BeamProbe, beam_probes, beam_record, judge_probe
from qemem.eval.beam_report import write_beam_report
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS
from qemem.eval.manifest import run_info
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
from qemem.ingest.locomo import load_locomo
from qemem.llm import Ledger, LLMClient
from qemem.memory import Memory
from qemem.prompts import prompt_hashes
from qemem.retrieve.budgets import RetrievalConfig
from qemem.store import redact

#: every mode a BEAM run takes: qemem's own and the baselines
BEAM_MODES = EVAL_MODES
FINGERPRINT = ("data_sha256", "embedder", "answerer", "judge")
SCORING = (
    "BEAM's published method: each rubric item judged 0, 0.5 or 1 (prompt beam_judge); a "
    "probe scores the mean of its items, an event-ordering probe its tau_norm = (tau_b + 1) / 2 "
    "over the union of reference and answered items (answer lines matched to reference items "
    "by prompt beam_order; missing items tied last); per ability the mean over chats of each "
    "chat's mean; overall the mean of the abilities"
)


@dataclass(frozen=True)
class BeamRunConfig:
    """What to run. As :class:`~qemem.eval.locomo.LocomoRunConfig` for data, folder, models,
    cache, concurrency, retrieval settings and the answer's background
    (``AskConfig.background_tokens``); ``abilities`` and ``conversations`` select probes (all
    when empty);
    ``rag_turns`` is the rag baseline's k, ``window_tokens`` the model window full-context
    must fit."""

    data: Path
    out: Path
    store: str | Path | None = None
    mode: str = "respond"
    llm: str | None = None
    judge: str | None = None
    judge_max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS
    build: bool = True
    abilities: tuple[str, ...] = ()
    conversations: tuple[str, ...] = ()
    limit: int | None = None
    concurrency: int = 4
    embedder: str | None = None
    cache: Path | None = None
    cache_mode: str | None = None
    retrieval: RetrievalConfig | None = None
    background_tokens: int | None = AskConfig.background_tokens
    rag_turns: int = DEFAULT_RAG_TURNS
    window_tokens: int = DEFAULT_WINDOW_TOKENS
    calibrate_rule: CalibrateRule = "complete"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as text; a store URL's password masked)."""
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        if self.store is not None:
            data["store"] = redact(self.store)
        return data


def _check(config: BeamRunConfig) -> None:
    if config.mode not in BEAM_MODES:
        raise InputError(f"unknown mode {config.mode!r}: use one of {', '.join(BEAM_MODES)}")
    if min(config.concurrency, config.judge_max_tokens, config.rag_turns) < 1:
        raise InputError("concurrency, judge max tokens and rag turns must be at least 1")
    if config.limit is not None and config.limit < 1:
        raise InputError("limit must be at least 1 (leave it out to run every probe)")


def select_probes(probes: Sequence[BeamProbe], config: BeamRunConfig) -> list[BeamProbe]:
    """The probes of the chosen abilities and conversations, in file order, limited."""
    for name, chosen, known in (
        ("conversation", config.conversations, {p.conversation for p in probes}),
        ("ability", config.abilities, {p.ability for p in probes}),
    ):
        unknown = sorted(set(chosen) - known)
        if unknown:
            raise InputError(
                f"unknown {name}(s) {', '.join(unknown)}; the data has {', '.join(sorted(known))}"
            )
    kept = [
        p
        for p in probes
        if (not config.conversations or p.conversation in config.conversations)
        and (not config.abilities or p.ability in config.abilities)
    ]
    return kept[: config.limit] if config.limit is not None else kept


def run_beam(
    config: BeamRunConfig,
    progress: RunProgress | None = None,
    *,
    llm: LLMClient | None = None,
    judge: LLMClient | None = None,
) -> RunResult:
    """Run (or resume) the BEAM evaluation of ``config`` and write its report; ``llm`` and
    ``judge`` clients, when given, replace the specs of ``config``."""
    clock = {"started": time.perf_counter()}
    _check(config)
    samples = load_locomo(config.data)
    probes = select_probes(beam_probes(samples, str(config.data)), config)
    config.out.mkdir(parents=True, exist_ok=True)
    results = config.out / "results.jsonl"
    done = {record_key(r) for r in load_records(results)}
    llm, judge = open_clients(config, llm, judge)
    needed = list(dict.fromkeys(p.conversation for p in probes))
    memory = Memory.open(
        config.out / "memory.db" if config.store is None else config.store,
        embedder=config.embedder,
        llm=llm,
    )
    try:
        manifest = _manifest(config, memory, llm, judge, probes)
        check_fingerprint(config.out / "manifest.json", manifest, FINGERPRINT)
        write_json(config.out / "manifest.json", manifest)
        build = llm is not None and config.build and config.mode in MODES
        context = prepare_memory(
            memory, samples, needed, config, build=build, progress=progress, clock=clock
        )
        if config.mode == "full-context":
            check_window(memory, needed, config.window_tokens)
        pending = [p for p in probes if (p.conversation, p.index, config.mode) not in done]
        answer_one = _answerer(memory, llm, judge, config, context)
        failures = answer_all(
            pending,
            answer_one,
            results,
            config.concurrency,
            len(probes) - len(pending),
            len(probes),
            progress,
        )
        return finish_run(
            config.out,
            {(p.conversation, p.index, config.mode) for p in probes},
            clock,
            (len(probes), len(pending)),
            failures,
            [llm, judge],
            lambda records: write_beam_report(config.out, records, manifest),
        )
    finally:
        memory.close()
        if judge is not None and judge is not llm:
            judge.close()


def _manifest(
    config: BeamRunConfig,
    memory: Memory,
    llm: LLMClient | None,
    judge: LLMClient | None,
    probes: Sequence[BeamProbe],
) -> dict[str, Any]:
    """What the run is: data, config, models, judge and its prompts, scoring, selection."""
    return run_info(
        config.data,
        benchmark="BEAM",
        config=config.to_dict(),
        mode=config.mode,
        embedder=memory.embedder.id,
        answerer=client_name(llm),
        judge=client_name(judge),
        judge_is_answerer=judge is not None and judge is llm,
        judge_max_tokens=config.judge_max_tokens if judge else None,
        built=config.build and config.mode in MODES,
        selection=[f"{p.conversation}#{p.index}" for p in probes],
        models={"answerer": llm and llm.describe(), "judge": judge and judge.describe()},
        scoring=SCORING,
        judge_prompts=judge_prompts() if judge else None,
        prompts=prompt_hashes(),
    )


def _answerer(
    memory: Memory,
    llm: LLMClient | None,
    judge: LLMClient | None,
    config: BeamRunConfig,
    context: Context,
) -> Callable[[BeamProbe], dict[str, Any]]:
    """The work of one probe: answer, judge (when there is a judge), make its record."""
    tokens = turn_costs(context)

    def answer_one(probe: BeamProbe) -> dict[str, Any]:
        t0 = time.perf_counter()
        answered = answer_in_mode(memory, llm, config, probe.conversation, probe.question)
        t1 = time.perf_counter()
        ledger = Ledger()
        verdict = None
        if judge is not None:
            verdict = judge_probe(
                judge, probe, answered.text, max_tokens=config.judge_max_tokens, ledger=ledger
            )
        calls = [r.to_dict() for r in ledger.responses]
        latency = {"answer": t1 - t0, "judge": time.perf_counter() - t1}
        aliases = context[probe.conversation][1]
        return beam_record(
            probe,
            config.mode,
            answered,
            verdict,
            calls,
            aliases,
            tokens[probe.conversation],
            latency,
        )

    return answer_one
