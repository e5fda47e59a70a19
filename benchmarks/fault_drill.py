"""Fault drill: build and evaluate with a provider that fails on a share of its calls.

python benchmarks/fault_drill.py --data locomo10.json --conversations conv-26 --rate 0.2

The LLM is ``faulty:RATE:fake`` (seeded; see ``qemem.llm.faulty``), the embedder the hash
embedder (speed; no quality is measured). Three parts, each printed as one JSON line:

- build: ingest, then ``build`` with the faulty LLM: faults injected by kind, recovered by the
  client (retries, repair calls), degraded items in the build report, whether every turn is in
  an episode, and the calls a second ``build`` makes;
- eval: ``qemem eval locomo`` with ``--llm faulty:RATE:fake`` into a fresh folder, rerun once
  when questions failed: answered share per run, provider calls of the rerun, degradations by
  kind from the report;
- cache: every exchange the eval recorded is audited; none may be a failed output (empty,
  truncated at max tokens, or without JSON where a schema was asked for).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from qemem.embed import HashEmbedder
from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.eval.manifest import run_info
from qemem.llm import LLMCache, LLMClient, LLMRequest, LLMResponse
from qemem.llm.client import cacheable
from qemem.llm.faulty import FaultyProvider
from qemem.memory import Memory
from qemem.testing import OfflineLLM


def build_drill(data: Path, conversation: str, rate: float, seed: int, tmp: Path) -> dict[str, Any]:
    provider = FaultyProvider(OfflineLLM(), rate, seed=seed)
    llm = LLMClient(provider, cache=LLMCache(tmp / "build-cache.db"))
    with Memory.open(tmp / "build.db", embedder=HashEmbedder(), llm=llm) as memory:
        memory.ingest(data)
        [report] = memory.build(conversation)
        covered = {t for e in memory.episodes(conversation) for t in e.turn_ids}
        complete = covered == {t.id for t in memory.turns(conversation)}
        calls_before = llm.ledger.total().calls
        memory.build(conversation)
        second = llm.ledger.total().calls - calls_before
    return {
        "part": "build",
        "calls": calls_before,
        "injected": sum(provider.injected.values()),
        "injected_by_kind": dict(sorted(provider.injected.items())),
        "recovered_by_client": dict(sorted(llm.faults.items())),
        "degraded_items": len(report.degraded),
        "segmentation_fallbacks": len(report.fallbacks),
        "every_turn_in_an_episode": complete,
        "second_build_calls": second,
    }


def eval_drill(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    config = LocomoRunConfig(
        data=args.data,
        out=out,
        llm=f"faulty:{args.rate}:fake",
        conversations=(args.conversation,),
        embedder="hash",
        plots=False,
    )
    runs = [run_locomo(config)]
    if runs[0].failures:
        runs.append(run_locomo(config))
    summary = json.loads((out / "summary.json").read_text())
    return {
        "part": "eval",
        "questions": runs[0].questions,
        "answered_per_run": [r.answered for r in runs],
        "answered_share": round(sum(r.answered for r in runs) / runs[0].questions, 4),
        "rerun_provider_calls": runs[1].provider_calls if len(runs) > 1 else 0,
        "degraded_questions": summary.get("degraded_questions"),
        "degradations_by_kind": summary.get("degradations_by_kind"),
    }


def cache_audit(path: Path) -> dict[str, Any]:
    bad = 0
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT request, response FROM llm_cache").fetchall()
    conn.close()
    for request_json, response_json in rows:
        request: dict[str, Any] = json.loads(request_json)
        req = LLMRequest(request["system"], [], "audit", schema=request.get("schema"), max_tokens=1)
        bad += not cacheable(req, LLMResponse.from_dict(json.loads(response_json)))
    return {"part": "cache", "entries": len(rows), "failed_outputs_cached": bad}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    info = run_info(args.data, llm=f"faulty:{args.rate}:fake", embedder="hash-256", seed=args.seed)
    print(json.dumps(info, indent=1), flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="qemem-drill-"))
    try:
        print(json.dumps(build_drill(args.data, args.conversation, args.rate, args.seed, tmp)))
        print(json.dumps(eval_drill(args, tmp / "eval")), flush=True)
        print(json.dumps(cache_audit(tmp / "eval" / "llm-cache.db")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
