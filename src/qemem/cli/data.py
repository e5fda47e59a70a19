"""``qemem data …``: fetch the public datasets qemem is evaluated on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qemem.cli.common import (
    JsonOpt,
    console,
    input_path,
    output_file,
    output_folder,
    print_json,
)
from qemem.cli.flags import FlagGroup
from qemem.datasets import LOCOMO_SHA256, LOCOMO_URL, download_locomo, locomo_subset
from qemem.datasets.beam import SIZES, convert_beam, parse_chat_numbers, write_beam
from qemem.datasets.convert import write_conversion
from qemem.datasets.longmemeval import convert_longmemeval

data_app = typer.Typer(
    help="Download or convert evaluation data.", no_args_is_help=True, cls=FlagGroup
)


@data_app.command()
def locomo(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write into.", callback=output_folder)
    ] = Path("."),
    subset: Annotated[
        str,
        typer.Option(
            "--subset",
            help="Also write these conversations (comma-separated, e.g. conv-26,conv-30,conv-41) "
            "to OUT/locomo-<ids>.json.",
        ),
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Download LoCoMo's locomo10.json (snap-research/locomo, CC BY-NC 4.0) and check its sha256."""
    path, fetched = download_locomo(out)
    written = {"locomo10": str(path), "downloaded": fetched, "sha256": LOCOMO_SHA256}
    ids = [c.strip() for c in subset.split(",") if c.strip()]
    if ids:
        name = "locomo-" + "-".join(c.removeprefix("conv-") for c in ids) + ".json"
        written["subset"] = str(locomo_subset(path, ids, out / name))
    if as_json:
        print_json(written)
        return
    verb = "downloaded from " + LOCOMO_URL if fetched else "already there (sha256 checked)"
    console.print(f"{path}: {verb}; sha256 {LOCOMO_SHA256}")
    if ids:
        console.print(f"{written['subset']}: conversations {', '.join(ids)}")


@data_app.command()
def beam(
    source: Annotated[
        Path,
        typer.Option(
            "--from",
            help="A local copy of the BEAM repository (github.com/mohammadtavakoli78/BEAM), "
            "or its chats folder.",
            callback=input_path,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="LoCoMo-shaped JSON file to write.", callback=output_file),
    ],
    sizes: Annotated[
        str, typer.Option("--sizes", help=f"Comma-separated chat sizes ({', '.join(SIZES)}).")
    ] = "100K",
    chats: Annotated[
        str, typer.Option("--chats", help="Chat numbers, e.g. 1-5,8 (default: all).")
    ] = "",
    skip_incomplete: Annotated[
        bool,
        typer.Option(
            "--skip-incomplete",
            help="Leave out (and record) chats whose chat.json is absent, instead of refusing.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Convert BEAM chats and probing questions to LoCoMo-shaped JSON (OUT) for `qemem eval`,
    with a manifest beside it saying what was cleaned, re-dated or left out."""
    conversion = convert_beam(
        source,
        [s.strip() for s in sizes.split(",") if s.strip()],
        parse_chat_numbers(chats),
        skip_incomplete=skip_incomplete,
    )
    manifest = write_beam(conversion, out)
    totals = conversion.manifest["totals"]
    skipped = [s["id"] for s in conversion.manifest["skipped"]]
    if as_json:
        print_json({"out": str(out), "manifest": str(manifest), **totals, "skipped": skipped})
        return
    console.print(
        f"{out}: {totals['conversations']} conversations, {totals['messages']} messages, "
        f"{totals['probes']} probes ({totals['probes_without_evidence']} without evidence)"
    )
    console.print(
        f"removed {totals['markers_removed']} generator markers; cut "
        f"{totals['runaway_messages']} runaway messages; re-dated "
        f"{totals['redated_sessions']} sessions forward"
    )
    if skipped:
        console.print(f"left out (a chat file is absent): {', '.join(skipped)}")
    console.print(f"manifest: {manifest}")


@data_app.command()
def longmemeval(
    source: Annotated[
        Path,
        typer.Argument(
            help="A LongMemEval file (longmemeval_s.json, longmemeval_m.json or "
            "longmemeval_oracle.json, as published).",
            callback=input_path,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="LoCoMo-shaped JSON file to write.", callback=output_file),
    ],
    limit: Annotated[
        int | None, typer.Option("--limit", help="Only the first N questions.", min=1)
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Convert LongMemEval to LoCoMo-shaped JSON (OUT) for `qemem eval longmemeval`: one
    conversation per question (its history), evidence = the has_answer turns; a manifest
    beside it."""
    conversion = convert_longmemeval(source, limit)
    manifest = write_conversion(conversion.samples, conversion.manifest, out)
    info = conversion.manifest
    if as_json:
        print_json({"out": str(out), "manifest": str(manifest), **info})
        return
    console.print(
        f"{out}: {info['questions']} questions ({info['abstention']} abstention, "
        f"{info['without_evidence']} without evidence); by type {info['by_type']}"
    )
    console.print(f"manifest: {manifest}")
