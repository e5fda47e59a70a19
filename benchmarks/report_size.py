"""Size of report.html for a full LoCoMo run (1,540 questions), from real run records.

    python benchmarks/report_size.py --data locomo10.json --out /tmp/report-size

Answers and judges ``--questions`` questions of the first conversation with the offline fake
LLM and the hash embedder (real pools, cards and source records of a LoCoMo-size
conversation), then repeats those records under ``--conversations`` conversation ids until
there are ``--total`` of them (each id with its own copy of the conversation's source records,
as distinct conversations would have) and writes report.html for them. Prints the run info,
the size of one record's evidence, of the page and of its parts.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from pathlib import Path

from qemem.eval.locomo import LocomoRunConfig, run_locomo
from qemem.eval.manifest import run_info
from qemem.eval.report import load_records, record_key, summarise
from qemem.eval.sources import SOURCES_FILE
from qemem.view.report import report_html, view_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--total", type=int, default=1540)
    parser.add_argument("--conversations", type=int, default=10)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text("utf-8"))
    first = str(samples[0]["sample_id"])
    settings = {k: str(v) for k, v in vars(args).items() if k != "data"}
    info = run_info(args.data, llm="fake", embedder="hash", conversation=first, **settings)
    print(json.dumps(info, indent=2))
    config = LocomoRunConfig(
        args.data,
        args.out,
        llm="fake",
        judge="fake",
        embedder="hash",
        conversations=(first,),
        limit=args.questions,
        plots=False,
    )
    run_locomo(config)
    base = load_records(args.out / "results.jsonl")
    records = []
    for n in range(args.total):
        record = copy.deepcopy(base[n % len(base)])
        record["conversation"] = f"{first}-{n % args.conversations}"
        record["index"] = n
        records.append(record)
    stored = json.loads((args.out / SOURCES_FILE).read_text("utf-8"))[first]
    sources = {f"{first}-{n}": stored for n in range(args.conversations)}
    records.sort(key=record_key)
    html = report_html(records, summarise(records, {"mode": "full"}), sources=sources)
    path = args.out / "report-synthetic.html"
    path.write_text(html, "utf-8")
    views = [view_record(r) or {"pool": []} for r in base]
    view = [len(json.dumps(v, separators=(",", ":"))) for v in views]
    pools = [len(v["pool"]) for v in views]
    details = sum(
        len(m) for m in re.findall(r'<script type="application/json" id="d-.*?</script>', html)
    )
    sources = len(re.search(r'id="conversations">.*?</script>', html, re.S).group(0))  # type: ignore[union-attr]
    size = len(html.encode("utf-8"))
    print(f"records: {len(records)} ({len(base)} real, repeated over {args.conversations} ids)")
    print(
        f"evidence record per question (results.jsonl): mean {sum(view) / len(view) / 1024:.1f} KiB"
    )
    print(f"pool candidates per question: mean {sum(pools) / len(pools):.0f}")
    print(f"report.html: {size / 2**20:.1f} MiB ({size} bytes) -> {path}")
    print(f"  per-question detail JSON: {details / 2**20:.1f} MiB")
    print(f"  source records (once per conversation): {sources / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
