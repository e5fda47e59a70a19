"""What a run ran with: qemem version and commit, data hash, embedder, settings."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from pathlib import Path
from typing import Any

from qemem import __version__


def data_sha256(path: str | Path) -> str:
    """sha256 of a data file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_commit() -> str | None:
    """The commit of the qemem checkout this code runs from, when it is one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_info(data: str | Path, **settings: Any) -> dict[str, Any]:
    """The header every evaluation prints and records."""
    return {
        "qemem": __version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "data": str(data),
        "data_sha256": data_sha256(data),
        **settings,
    }
