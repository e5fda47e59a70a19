"""``qemem data …``: fetch the public datasets qemem is evaluated on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qemem.cli.common import JsonOpt, console, output_folder, print_json
from qemem.cli.flags import FlagGroup
from qemem.datasets import LOCOMO_SHA256, LOCOMO_URL, download_locomo, locomo_subset

data_app = typer.Typer(help="Download evaluation data.", no_args_is_help=True, cls=FlagGroup)


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
