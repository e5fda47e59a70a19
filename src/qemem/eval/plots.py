"""The PNG plots of a LoCoMo run (matplotlib, when installed) and their inlined form for the run
page."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: the plots a run folder may hold, in the order the run page shows them
PLOTS = ("accuracy_by_category.png", "coverage_curve.png", "cost_split.png")


def write_plots(out: Path, summary: Mapping[str, Any]) -> tuple[list[str], str]:
    """accuracy_by_category.png, coverage_curve.png and cost_split.png (cost shares, else token
    shares); ([], a note) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "Plots skipped: matplotlib is not installed (pip install matplotlib)."
    made = []
    cats = [(c, b) for c, b in summary["by_category"].items() if b["accuracy"] is not None]
    if cats:
        names = [f"{c} {b['name']}" for c, b in cats]
        values = [b["accuracy"] for _, b in cats]
        errors = [
            [b["accuracy"] - b["ci95"][0] for _, b in cats],
            [b["ci95"][1] - b["accuracy"] for _, b in cats],
        ]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(names, values, yerr=errors, capsize=4, color="#4c72b0")
        ax.set_ylim(0, 1)
        ax.set_ylabel("judge accuracy")
        ax.set_title("Accuracy by category (Wilson 95%)")
        made.append(_save(fig, out / "accuracy_by_category.png"))
    cov = summary["coverage"]
    if cov["questions"]:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([int(b) for b in cov["coverage"]], list(cov["coverage"].values()), marker="o")
        ax.set_ylim(0, 1)
        ax.set_xlabel("turn budget")
        ax.set_ylabel("complete evidence covered")
        ax.set_title(f"Initial-pool coverage (AUC {cov['auc']})")
        made.append(_save(fig, out / "coverage_curve.png"))
    stages = {k: v for k, v in summary["cost"]["by_stage"].items() if k != "judge"}
    key = "cost_share" if any(v["cost_share"] for v in stages.values()) else "token_share"
    if any(v[key] for v in stages.values()):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(list(stages), [v[key] or 0.0 for v in stages.values()], color="#55a868")
        ax.set_ylabel(key.replace("_", " "))
        ax.set_title("Split of the method's " + ("cost" if key == "cost_share" else "tokens"))
        made.append(_save(fig, out / "cost_split.png"))
    return made, ""


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path.name


def plot_images(out: Path) -> list[dict[str, str]]:
    """The plots present in the run folder ``out``, each as ``{"name", "src"}`` with the PNG
    inlined as a data URI."""
    found = []
    for name in PLOTS:
        path = out / name
        if path.exists():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            found.append({"name": name, "src": f"data:image/png;base64,{data}"})
    return found
