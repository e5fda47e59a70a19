"""``qemem eval …``: evaluation commands (thin wrappers over qemem.eval)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from qemem.cli.common import (
    EmbedderOpt,
    JsonOpt,
    OptionalStoreOpt,
    console,
    open_memory,
    print_json,
    progress_bar,
)
from qemem.eval.coverage import evaluate_coverage
from qemem.eval.manifest import run_info

eval_app = typer.Typer(help="Evaluate on LoCoMo-format data.", no_args_is_help=True)

DataOpt = Annotated[Path, typer.Option("--data", "-d", help="LoCoMo JSON file.")]
CategoriesOpt = Annotated[str, typer.Option("--categories", help="Comma-separated QA categories.")]


def parse_categories(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(c) for c in value.split(",") if c.strip())
    except ValueError:
        raise typer.BadParameter("use numbers such as 1,2,3,4", param_hint="--categories") from None


@eval_app.command()
def coverage(
    data: DataOpt,
    store: OptionalStoreOpt = None,
    embedder: EmbedderOpt = None,
    categories: CategoriesOpt = "1,2,3,4",
    as_json: JsonOpt = False,
) -> None:
    """Share of questions whose annotated evidence turns all rank within B turns (B=10..120)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = store or Path(tmp) / "coverage.db"
        with open_memory(path, embedder) as memory, progress_bar("questions", as_json) as p:
            report = evaluate_coverage(
                memory, data, categories=parse_categories(categories), progress=p
            )
    result = {
        "run": run_info(
            data,
            embedder=memory.embedder.id,
            categories=categories,
            ranking="hybrid turns, question only (dense + BM25, RRF k=60)",
        ),
        **report.to_dict(),
    }
    if as_json:
        print_json(result)
        return
    table = Table("budget (turns)", "coverage", title=f"coverage on {data}")
    for budget, share in report.coverage.items():
        table.add_row(str(budget), f"{share:.3f}")
    console.print(table)
    console.print(f"questions: {report.questions}   AUC: {report.auc:.4f}")
    console.print_json(data=result["run"])
