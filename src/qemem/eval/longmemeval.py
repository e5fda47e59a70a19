"""``run_longmemeval``: answer and judge LongMemEval questions, each over its own history.

The data is the LoCoMo-shaped file ``qemem data longmemeval`` writes (one conversation per
question). The run folder is like BEAM's (:mod:`qemem.eval.beam`): resumable
``results.jsonl``, ``manifest.json`` (with the judge's prompts), ``summary.json`` and
``report.md``; the modes are the same (:mod:`qemem.eval.answering`).

Each question is asked with its date, as the benchmark asks it: ``<question> (Current date:
<question_date>.)``. The judge (prompts ``lme_judge`` and one rule per kind of question, in
our own words after the benchmark's description) says CORRECT or WRONG: the reference answer
or an equivalent for most types; off-by-one accepted for counts of days, weeks or months in
temporal reasoning; the current value for knowledge updates (earlier ones may be named too);
use of the user's preferences for preference questions; a refusal for abstention questions
(ids ending ``_abs``). Reported: accuracy over all questions, per type, for abstention, and
averaged over the types, with Wilson intervals; evidence coverage of the ``has_answer``
turns; tokens and cost per question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qemem.answer.ask import MODES, AskConfig
from qemem.build.config import CalibrateRule
from qemem.datasets.longmemeval import QUESTION_TYPES
from qemem.errors import InputError, StructuredOutputError
from qemem.eval.answering import (
    EVAL_MODES,
    answer_in_mode,
    check_window,
    cost_per_question,
    coverage_block,
    shared_record,
    turn_costs,
)
from qemem.eval.beam_baselines import DEFAULT_RAG_TURNS, DEFAULT_WINDOW_TOKENS
from qemem.eval.judge import DEFAULT_JUDGE_MAX_TOKENS, Verdict
from qemem.eval.manifest import run_info
from qemem.eval.results import load_records, record_key, run_records
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
from qemem.eval.stats import wilson_interval
from qemem.ingest.locomo import load_locomo
from qemem.llm import Ledger, LLMClient, LLMRequest, Message, stages
from qemem.memory import Memory
from qemem.prompts import load_prompt, prompt_hashes, render
from qemem.retrieve.budgets import RetrievalConfig

RECORD_FORMAT = "longmemeval/1"
FINGERPRINT = ("data_sha256", "embedder", "answerer", "judge")
#: the judge's rule template for each kind of question (abstention overrides the type)
RULES = {
    "temporal-reasoning": "lme_rule_temporal",
    "knowledge-update": "lme_rule_update",
    "single-session-preference": "lme_rule_preference",
    "abstention": "lme_rule_abstention",
}
DEFAULT_RULE = "lme_rule_default"


@dataclass(frozen=True)
class LmeQuestion:
    """One LongMemEval question as the converted file holds it."""

    conversation: str
    index: int
    question: str
    answer: str
    question_type: str
    abstention: bool
    question_date: str
    evidence: tuple[str, ...]

    @property
    def asked(self) -> str:
        """The text put to the memory: the question with its date."""
        return f"{self.question} (Current date: {self.question_date.replace('T', ' ')}.)"

    @property
    def rule(self) -> str:
        """The judge's rule template for this question."""
        kind = "abstention" if self.abstention else self.question_type
        return RULES.get(kind, DEFAULT_RULE)


def lme_questions(samples: Sequence[dict[str, Any]], file: str) -> list[LmeQuestion]:
    """The questions of a converted file; InputError when it is not one."""
    out = []
    for n, sample in enumerate(samples):
        cid = str(sample.get("sample_id") or f"sample-{n}")
        for i, qa in enumerate(sample.get("qa") or []):
            if not isinstance(qa, dict) or qa.get("question_type") not in QUESTION_TYPES:
                raise InputError(
                    "not a LongMemEval question: convert the file with `qemem data longmemeval`",
                    file=file,
                    record=f"sample {cid}, qa {i}",
                    field="question_type",
                )
            out.append(
                LmeQuestion(
                    cid,
                    i,
                    str(qa["question"]),
                    str(qa["answer"]),
                    str(qa["question_type"]),
                    bool(qa.get("abstention")),
                    str(qa.get("question_date", "")),
                    tuple(str(e) for e in qa.get("evidence", [])),
                )
            )
    return out


@dataclass(frozen=True)
class LongMemEvalRunConfig:
    """What to run; as :class:`~qemem.eval.beam.BeamRunConfig`, with ``types`` selecting
    question types (all when empty)."""

    data: Path
    out: Path
    store: str | Path | None = None
    mode: str = "full"
    llm: str | None = None
    judge: str | None = None
    judge_max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS
    build: bool = True
    types: tuple[str, ...] = ()
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
        """JSON-ready form (paths as text)."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


def judge_question(
    judge: LLMClient, q: LmeQuestion, prediction: str, *, max_tokens: int, ledger: Ledger
) -> tuple[str, int]:
    """The judge's label of ``prediction`` (WRONG when its output does not parse) and the
    number of parse failures."""
    shown = prediction or "(no answer)"
    request = LLMRequest(
        system=render("lme_judge", rule=load_prompt(q.rule).strip()),
        messages=[
            Message(
                "user",
                render("lme_judge_input", question=q.asked, gold=q.answer, prediction=shown),
            )
        ],
        stage=stages.JUDGE,
        temperature=0.0,
        max_tokens=max_tokens,
        inputs={"question": q.asked, "gold": q.answer, "prediction": shown},
    )
    try:
        return llm_label(judge, request, ledger), 0
    except StructuredOutputError:
        return "WRONG", 1


def llm_label(judge: LLMClient, request: LLMRequest, ledger: Ledger) -> str:
    """The label of one judge request."""
    return judge.structured(request, Verdict, ledger=ledger).value.label


def _accuracy(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    judged = [r for r in records if r["score"] is not None]
    if not judged:
        return {"n": 0, "accuracy": None}
    right = sum(float(r["score"]) for r in judged)
    low, high = wilson_interval(round(right), len(judged))
    return {
        "n": len(judged),
        "accuracy": round(right / len(judged), 4),
        "ci95": [round(low, 4), round(high, 4)],
    }


def summarise(records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy (all, per type, abstention, averaged over types), coverage and cost."""
    types = [t for t in QUESTION_TYPES if any(r["question_type"] == t for r in records)]
    by_type = {t: _accuracy([r for r in records if r["question_type"] == t]) for t in types}
    means = [b["accuracy"] for b in by_type.values() if b["accuracy"] is not None]
    return {
        "benchmark": "LongMemEval",
        "mode": manifest.get("mode"),
        "answerer": manifest.get("answerer"),
        "judge": manifest.get("judge"),
        "data_sha256": manifest.get("data_sha256"),
        "questions": len(records),
        "accuracy": _accuracy(records),
        "by_type": by_type,
        "abstention": _accuracy([r for r in records if r["abstention"]]),
        "task_averaged_accuracy": round(sum(means) / len(means), 4) if means else None,
        "parse_failures": sum(int(r["judge_parse_failures"]) for r in records),
        "coverage": {
            "overall": coverage_block(records),
            "by_type": {
                t: coverage_block([r for r in records if r["question_type"] == t]) for t in types
            },
        },
        "cost": cost_per_question(records),
    }


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}"


def render_markdown(summary: Mapping[str, Any]) -> str:
    """report.md of a LongMemEval run."""
    lines = [
        f"# LongMemEval run: mode {summary['mode']}",
        "",
        f"Answerer {summary['answerer']}, judge {summary['judge']}; {summary['questions']} "
        f"questions; task-averaged accuracy {_pct(summary['task_averaged_accuracy'])}%.",
        "",
        "| questions | n | accuracy % | 95% CI | evidence in first pool % | in prompt % |",
        "|---|---|---|---|---|---|",
    ]
    rows = [("all", summary["accuracy"], summary["coverage"]["overall"])]
    rows += [(t, b, summary["coverage"]["by_type"][t]) for t, b in summary["by_type"].items()]
    rows.append(("abstention", summary["abstention"], {}))
    for name, block, cover in rows:
        ci = block.get("ci95")
        lines.append(
            f"| {name} | {block['n']} | {_pct(block['accuracy'])} | "
            f"{'-' if not ci else f'{_pct(ci[0])}-{_pct(ci[1])}'} | "
            f"{_pct(cover.get('visible_initial'))} | {_pct(cover.get('visible_final'))} |"
        )
    lines += ["", "## Cost per question", ""]
    lines += [f"- {k}: {v}" for k, v in sorted(summary["cost"].items())]
    return "\n".join(lines) + "\n"


def write_lme_report(
    out: Path, records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]
) -> dict[str, Any]:
    """Write summary.json and report.md into the run folder ``out``; return the summary."""
    summary = summarise(records, manifest)
    write_json(out / "summary.json", summary)
    (out / "report.md").write_text(render_markdown(summary), "utf-8")
    return summary


def rebuild_lme_report(out: Path) -> dict[str, Any]:
    """Rewrite a LongMemEval run folder's summary.json and report.md from its records."""
    manifest, records = run_records(out)
    return write_lme_report(out, records, manifest)


def _manifest(
    config: LongMemEvalRunConfig,
    memory: Memory,
    llm: LLMClient | None,
    judge: LLMClient | None,
    questions: Sequence[LmeQuestion],
) -> dict[str, Any]:
    """What the run is: data, config, models, the judge's prompts, how questions are asked."""
    return run_info(
        config.data,
        benchmark="LongMemEval",
        config=config.to_dict(),
        mode=config.mode,
        embedder=memory.embedder.id,
        answerer=client_name(llm),
        judge=client_name(judge),
        judge_prompts={
            n: load_prompt(n)
            for n in ("lme_judge", "lme_judge_input", DEFAULT_RULE, *RULES.values())
        },
        question_text="<question> (Current date: <question_date>.)",
        selection=[f"{q.conversation}#{q.index}" for q in questions],
        prompts=prompt_hashes(),
    )


def run_longmemeval(
    config: LongMemEvalRunConfig,
    progress: RunProgress | None = None,
    *,
    llm: LLMClient | None = None,
    judge: LLMClient | None = None,
) -> RunResult:
    """Run (or resume) the LongMemEval evaluation of ``config`` and write its report."""
    clock = {"started": time.perf_counter()}
    if config.mode not in EVAL_MODES:
        raise InputError(f"unknown mode {config.mode!r}: use one of {', '.join(EVAL_MODES)}")
    samples = load_locomo(config.data)
    questions = [
        q
        for q in lme_questions(samples, str(config.data))
        if not config.types or q.question_type in config.types
    ][: config.limit]
    config.out.mkdir(parents=True, exist_ok=True)
    results = config.out / "results.jsonl"
    done = {record_key(r) for r in load_records(results)}
    llm, judge = open_clients(config, llm, judge)
    needed = list(dict.fromkeys(q.conversation for q in questions))
    memory = Memory.open(
        config.store or config.out / "memory.db", embedder=config.embedder, llm=llm
    )
    try:
        manifest = _manifest(config, memory, llm, judge, questions)
        check_fingerprint(config.out / "manifest.json", manifest, FINGERPRINT)
        write_json(config.out / "manifest.json", manifest)
        build = llm is not None and config.build and config.mode in MODES
        context = prepare_memory(
            memory, samples, needed, config, build=build, progress=progress, clock=clock
        )
        if config.mode == "full-context":
            check_window(memory, needed, config.window_tokens)
        pending = [q for q in questions if (q.conversation, q.index, config.mode) not in done]
        failures = answer_all(
            pending,
            _answerer(memory, llm, judge, config, context),
            results,
            config.concurrency,
            len(questions) - len(pending),
            len(questions),
            progress,
        )
        return finish_run(
            config.out,
            {(q.conversation, q.index, config.mode) for q in questions},
            clock,
            (len(questions), len(pending)),
            failures,
            [llm, judge],
            lambda records: write_lme_report(config.out, records, manifest),
        )
    finally:
        memory.close()
        if judge is not None and judge is not llm:
            judge.close()


def _answerer(
    memory: Memory,
    llm: LLMClient | None,
    judge: LLMClient | None,
    config: LongMemEvalRunConfig,
    context: Context,
) -> Callable[[LmeQuestion], dict[str, Any]]:
    """The work of one question: answer, judge, make its record."""
    tokens = turn_costs(context)

    def answer_one(q: LmeQuestion) -> dict[str, Any]:
        t0 = time.perf_counter()
        answered = answer_in_mode(memory, llm, config, q.conversation, q.asked)
        t1 = time.perf_counter()
        ledger = Ledger()
        label, failures = (None, 0)
        if judge is not None:
            label, failures = judge_question(
                judge, q, answered.text, max_tokens=config.judge_max_tokens, ledger=ledger
            )
        latency = {"answer": t1 - t0, "judge": time.perf_counter() - t1}
        calls = [r.to_dict() for r in ledger.responses]
        shared = shared_record(
            answered, q.evidence, calls, context[q.conversation][1], tokens[q.conversation], latency
        )
        return {
            "conversation": q.conversation,
            "index": q.index,
            "mode": config.mode,
            "question": q.question,
            "asked": q.asked,
            "gold": q.answer,
            "question_type": q.question_type,
            "abstention": q.abstention,
            "evidence": list(q.evidence),
            "judge_labels": [label] if label else [],
            "judge_parse_failures": failures,
            "score": None if label is None else float(label == "CORRECT"),
            "f1": None,
            "f1_locomo": None,
            **shared,
            "format": RECORD_FORMAT,
        }

    return answer_one
