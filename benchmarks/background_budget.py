"""How much of the answer's background a run's answers needed: final-context visibility by
background budget, replayed from a run folder's records (no model call).

    python benchmarks/background_budget.py RUN [--budgets 0,250,500,1000,2000,3000] [--json]

``RUN`` is a ``qemem eval locomo`` folder (``results.jsonl`` and ``sources.json``) answered
with the whole rest of the pool as background (``--background-tokens none``, the method's
published answer prompt). For every question with evidence, the answer context is replayed
as ``AskConfig.background_tokens`` would have cut it: the cited-sources section as recorded,
then the background turns best-ranked first as the library ranks them (a turn's exposure
position in the round that first pooled it, a context turn with the hit it widens, ties in
conversation order) while their lines, ``[id] speaker: text`` at characters / 4 tokens (the
session headers the prompt adds are not counted), fit the budget. A question is visible when that
context holds all its evidence turns (or aliases: same speaker, session date and text). Prints
the run's config and, per budget, the visible share, the mean background tokens and the
questions visible with the whole background but not at the budget (``lost``; ``lost_correct``:
of those, the ones the run's answer got right, from the whole background); the "all" row is
the recorded background. Runs whose memory holds episodes or facts are replayed
over their turns only (the background's episodes and facts are not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qemem.eval.coverage import evidence_rank
from qemem.eval.results import run_records
from qemem.eval.sources import load_run_sources

UNRANKED = 1 << 30


def turn_ranks(rounds: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each pooled turn's exposure position, as the merged pool holds it (the first round
    that pooled it; a follow-up round's candidates by their place in that round's order); a
    context or exposed turn takes the best position of the candidates it came with
    (``reasons[].via``)."""
    placed: dict[str, int] = {}
    for rnd in rounds:
        for entry in rnd["pool"]:
            if entry["position"] is not None:
                placed.setdefault(entry["ref"]["id"], entry["position"])
    ranks = dict(placed)
    for rnd in rounds:
        for entry in rnd["pool"]:
            vias = [placed[r["via"]] for r in entry["reasons"] if r.get("via") in placed]
            if entry["ref"]["id"] not in ranks and vias:
                ranks[entry["ref"]["id"]] = min(vias)
    return ranks


def line_tokens(turn: Mapping[str, Any], tid: str) -> int:
    """A background turn line's tokens (characters / 4, as the offline count)."""
    return len(f"[{tid}] {turn['speaker']}: {turn['text']}") // 4


def replay(
    record: Mapping[str, Any], turns: Mapping[str, Any], budget: int | None
) -> tuple[list[str], int]:
    """The turn ids the answer context would show at ``budget`` (None: as recorded) and the
    background's tokens."""
    evidence = record["answer"]["evidence"]
    shown = evidence["shown"]
    ranks = turn_ranks(evidence["rounds"])
    ranked = sorted(shown["background"], key=lambda t: ranks.get(t, UNRANKED))
    kept, used = [], 0
    for tid in ranked:
        cost = line_tokens(turns[tid], tid)
        if budget is not None and used + cost > budget:
            break
        kept.append(tid)
        used += cost
    return [*shown["cited_context"], *kept], used


def aliases(turns: Mapping[str, Any], sessions: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Each turn id's (speaker, session date, text): ids sharing it are aliases."""
    return {
        tid: (t["speaker"], sessions.get(str(t["session"]), ""), t["text"])
        for tid, t in turns.items()
    }


def measure(run: Path, budgets: Sequence[int | None]) -> dict[str, Any]:
    """Visible share and mean background tokens per budget over the run's questions with
    evidence."""
    sources = load_run_sources(run)
    if sources is None:
        raise SystemExit(f"{run} has no sources.json: run qemem eval locomo into it first")
    manifest, records = run_records(run)
    rows: dict[str, dict[str, float]] = {}
    scored = [r for r in records if r.get("evidence") and r["answer"]["evidence"]["shown"]]
    seen: dict[int | None, list[bool]] = {}
    for budget in [None, *budgets]:
        seen[budget], used = [], []
        for record in scored:
            conv = sources[record["conversation"]]
            ids, tokens = replay(record, conv["turns"], budget)
            keys = aliases(conv["turns"], conv["sessions"])
            seen[budget].append(evidence_rank(ids, record["evidence"], keys) is not None)
            used.append(tokens)
        lost = [r for r, a, b in zip(scored, seen[None], seen[budget], strict=True) if a and not b]
        rows["all" if budget is None else str(budget)] = {
            "visible": round(sum(seen[budget]) / len(scored), 4) if scored else 0.0,
            "background_tokens": round(statistics.fmean(used), 1) if used else 0.0,
            "lost": len(lost),
            "lost_correct": sum(1 for r in lost if r.get("score") == 1.0),
        }
    run_info = {k: manifest.get(k) for k in ("data_sha256", "config", "models")}
    return {"run": str(run), **run_info, "questions": len(scored), "by_budget": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path, help="a qemem eval locomo run folder")
    parser.add_argument("--budgets", default="0,250,500,1000,1500,2000,3000")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    budgets: list[int | None] = [int(b) for b in args.budgets.split(",")]
    result = measure(args.run, budgets)
    print(json.dumps({k: result[k] for k in ("data_sha256", "config", "models")}, indent=1))
    print(f"questions with evidence: {result['questions']}")
    for budget, row in result["by_budget"].items():
        print(
            f"background {budget:>5}: visible {row['visible']}, tokens "
            f"{row['background_tokens']}, lost {row['lost']} ({row['lost_correct']} answered right)"
        )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
