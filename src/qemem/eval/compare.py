"""Compare two LoCoMo runs question by question: paired and conversation-cluster bootstraps of
the difference (run A minus run B) and leave-one-conversation-out differences; and, by a
complexity grouping, how much the A-B gap grows from the low- to the high-complexity
questions (:func:`compare_gaps`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qemem.errors import InputError
from qemem.eval.report import sessions_bucket, span_bucket, turns_bucket
from qemem.eval.results import load_records
from qemem.eval.stats import (
    BootstrapResult,
    cluster_bootstrap,
    cluster_bootstrap_gap,
    gap_difference,
    leave_one_cluster_out,
    leave_one_cluster_out_gap,
    paired_bootstrap,
)

Record = Mapping[str, Any]


def _visible(record: Record) -> float | None:
    flag = record["visibility"]["final"]
    return None if flag is None else float(flag)


#: per-question value of each comparable metric (None: the question does not count)
METRICS: dict[str, Callable[[Record], float | None]] = {
    "judge": lambda r: None if r["score"] is None else float(r["score"]),
    "f1": lambda r: None if r["f1"] is None else float(r["f1"]),
    "f1_locomo": lambda r: None if r["f1_locomo"] is None else float(r["f1_locomo"]),
    "visible": _visible,
}


@dataclass
class Comparison:
    """Run A against run B over the questions both answered (and both can score).

    ``per_question`` lists, for each shared question, its conversation, index, A's and B's
    values and A minus B (e.g. full - matched, direct - matched).

    ``cluster`` and ``leave_one_out`` are None (with ``note`` saying why) when the shared
    questions come from fewer than two conversations.
    """

    run_a: str
    run_b: str
    metric: str
    questions: int
    only_a: int
    only_b: int
    mean_a: float
    mean_b: float
    paired: BootstrapResult
    cluster: BootstrapResult | None
    leave_one_out: dict[str, float] | None
    conversations: list[str] = field(default_factory=list)
    note: str = ""
    mode_a: str = ""
    mode_b: str = ""
    per_question: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (floats rounded to 6 digits)."""

        def rounded(value: Any) -> Any:
            if isinstance(value, float):
                return round(value, 6)
            if isinstance(value, dict):
                return {k: rounded(v) for k, v in value.items()}
            return value

        data = asdict(self)
        return {k: rounded(v) for k, v in data.items()}


def load_run(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """A run folder's mode (from manifest.json, else its only mode) and records of that mode."""
    records = load_records(path / "results.jsonl")
    if not records:
        raise InputError(
            f"{path} has no results.jsonl records: give a qemem eval locomo --out folder"
        )
    manifest = path / "manifest.json"
    modes = sorted({str(r["mode"]) for r in records})
    mode = json.loads(manifest.read_text("utf-8")).get("mode") if manifest.exists() else None
    if mode is None:
        if len(modes) > 1:
            raise InputError(f"{path} mixes modes {modes} and has no manifest.json")
        mode = modes[0]
    return str(mode), [r for r in records if r["mode"] == mode]


def compare_runs(
    run_a: Path,
    run_b: Path,
    *,
    metric: str = "judge",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Comparison:
    """Bootstrap the difference ``metric(A) - metric(B)`` over the shared questions."""
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    value = METRICS[metric]
    scored = []
    modes = []
    for path in (run_a, run_b):
        mode, records = load_run(path)
        modes.append(mode)
        scored.append(
            {
                (str(r["conversation"]), int(r["index"])): v
                for r in records
                if (v := value(r)) is not None
            }
        )
    a, b = scored
    shared = sorted(set(a) & set(b))
    if not shared:
        raise InputError(
            f"runs {run_a} and {run_b} share no question scored by {metric!r} (retrieval-mode "
            "runs have no judge labels: compare them with --metric visible)"
        )
    left, right = [a[k] for k in shared], [b[k] for k in shared]
    clusters = [k[0] for k in shared]
    conversations = sorted(set(clusters))
    paired = paired_bootstrap(
        left, right, n_resamples=n_resamples, seed=seed, confidence=confidence
    )
    cluster, loo, note = None, None, ""
    if len(conversations) >= 2:
        cluster = cluster_bootstrap(
            left, right, clusters, n_resamples=n_resamples, seed=seed, confidence=confidence
        )
        loo = leave_one_cluster_out(left, right, clusters)
    else:
        note = "one conversation only: cluster bootstrap and leave-one-out are n/a"
    return Comparison(
        str(run_a),
        str(run_b),
        metric,
        len(shared),
        len(set(a) - set(b)),
        len(set(b) - set(a)),
        sum(left) / len(left),
        sum(right) / len(right),
        paired,
        cluster,
        loo,
        conversations,
        note,
        modes[0],
        modes[1],
        [
            {"conversation": k[0], "index": k[1], "a": a[k], "b": b[k], "difference": a[k] - b[k]}
            for k in shared
        ],
    )


#: complexity groupings: the bucket of a record and, of its labels, those counted as high
GROUPINGS: dict[str, tuple[Callable[[Record], str | None], tuple[str, ...]]] = {
    "evidence_turns": (turns_bucket, ("2", ">=3")),
    "sessions": (sessions_bucket, ("cross-session",)),
    "span": (span_bucket, ("31-180 days", ">180 days")),
}


def complexity_group(record: Record, by: str) -> bool | None:
    """Whether ``record`` is high-complexity under grouping ``by`` (evidence_turns: two or
    more evidence turns; sessions: cross-session evidence; span: evidence sessions more than
    30 days apart); None when it has no bucket (no known evidence)."""
    bucket, high = GROUPINGS[by]
    label = bucket(record)
    return None if label is None else label in high


@dataclass
class GapComparison:
    """The A-B gap on the low- and the high-complexity questions of grouping ``by`` and their
    difference (high gap minus low gap), with a conversation-cluster bootstrap interval and
    leave-one-conversation-out values (None, with ``note``, for fewer than two conversations).
    """

    run_a: str
    run_b: str
    metric: str
    by: str
    high_labels: list[str]
    groups: dict[str, dict[str, float | int]]
    difference: float
    cluster: BootstrapResult | None
    leave_one_out: dict[str, float | None] | None
    conversations: list[str] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (floats rounded to 6 digits)."""
        rounded: dict[str, Any] = json.loads(
            json.dumps(asdict(self)), parse_float=lambda v: round(float(v), 6)
        )
        return rounded


def _group_stats(pairs: list[tuple[float, float]]) -> dict[str, float | int]:
    n = len(pairs)
    mean_a = sum(a for a, _ in pairs) / n
    mean_b = sum(b for _, b in pairs) / n
    return {"questions": n, "mean_a": mean_a, "mean_b": mean_b, "gap": mean_a - mean_b}


def compare_gaps(
    run_a: Path,
    run_b: Path,
    *,
    by: str,
    metric: str = "judge",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> GapComparison:
    """The difference of A-B ``metric`` gaps between the high- and low-complexity questions
    of grouping ``by`` (:data:`GROUPINGS`), over the questions both runs scored."""
    if by not in GROUPINGS:
        raise InputError(f"unknown grouping {by!r}: use one of {', '.join(GROUPINGS)}")
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    value = METRICS[metric]
    (_, left), (_, right) = load_run(run_a), load_run(run_b)
    b_values = {(str(r["conversation"]), int(r["index"])): value(r) for r in right}
    rows: list[tuple[str, bool, float, float]] = []
    for record in sorted(left, key=lambda r: (str(r["conversation"]), int(r["index"]))):
        key = (str(record["conversation"]), int(record["index"]))
        a, b, high = value(record), b_values.get(key), complexity_group(record, by)
        if a is not None and b is not None and high is not None:
            rows.append((key[0], high, a, b))
    groups = {
        name: [(a, b) for _, h, a, b in rows if h is wanted]
        for name, wanted in (("low", False), ("high", True))
    }
    if not groups["low"] or not groups["high"]:
        raise InputError(
            f"grouping {by!r} leaves {len(groups['low'])} low and {len(groups['high'])} high "
            "shared scored questions: both groups need some"
        )
    a_values, b_list = [r[2] for r in rows], [r[3] for r in rows]
    flags, clusters = [r[1] for r in rows], [r[0] for r in rows]
    conversations = sorted(set(clusters))
    cluster, loo, note = None, None, ""
    if len(conversations) >= 2:
        cluster = cluster_bootstrap_gap(
            a_values,
            b_list,
            flags,
            clusters,
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
        )
        loo = leave_one_cluster_out_gap(a_values, b_list, flags, clusters)
    else:
        note = "one conversation only: cluster bootstrap and leave-one-out are n/a"
    return GapComparison(
        str(run_a),
        str(run_b),
        metric,
        by,
        list(GROUPINGS[by][1]),
        {name: _group_stats(pairs) for name, pairs in groups.items()},
        gap_difference(a_values, b_list, flags),
        cluster,
        loo,
        conversations,
        note,
    )
