"""LoCoMo: fetching its ``locomo10.json`` and cutting subsets.

``download_locomo`` fetches ``data/locomo10.json`` of the dataset's public repository
(snap-research/locomo on GitHub; Maharana et al., ACL 2024, licence CC BY-NC 4.0), checks its
sha256 against the canonical file's and writes it only when it matches. The HTTP transport is a
parameter, so tests serve the bytes with ``httpx.MockTransport`` and never touch the network.
``locomo_subset`` writes some of its conversations in the same format (as the figures of the
README use conv-26, conv-30 and conv-41).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import httpx

from qemem.errors import DownloadError, InputError

LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
LOCOMO_FILE = "locomo10.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download_locomo(
    out: Path,
    *,
    url: str = LOCOMO_URL,
    sha256: str = LOCOMO_SHA256,
    transport: httpx.BaseTransport | None = None,
    timeout: float = 60.0,
) -> tuple[Path, bool]:
    """Download ``locomo10.json`` into the folder ``out``; return (its path, whether it was
    downloaded). A file already there with the expected sha256 is kept as it is. Raises
    ``DownloadError`` when the download fails or its sha256 differs (nothing is written)."""
    target = out / LOCOMO_FILE
    if target.exists() and _sha256(target.read_bytes()) == sha256:
        return target, False
    try:
        with httpx.Client(transport=transport, timeout=timeout, follow_redirects=True) as client:
            response = client.get(url)
            response.raise_for_status()
            data = response.content
    except httpx.HTTPError as exc:
        reason = (
            f"HTTP {exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError) else exc
        )
        raise DownloadError(
            f"cannot download {url}: {reason}; check the network, or fetch the file by hand "
            "and pass its path to the command that reads it (qemem eval ... --data FILE)"
        ) from exc
    got = _sha256(data)
    if got != sha256:
        raise DownloadError(
            f"{url} has sha256 {got}, not the canonical {sha256}; the file was not written "
            "(the repository may have changed it: compare before using it)"
        )
    out.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.part")
    partial.write_bytes(data)
    os.replace(partial, target)
    return target, True


def locomo_subset(source: Path, conversations: Sequence[str], out: Path) -> Path:
    """Write the samples of ``conversations`` (in the source's order) of a ``locomo10.json``
    to ``out``, in the same JSON format (compact, UTF-8, as the file itself)."""
    samples = json.loads(source.read_text("utf-8"))
    wanted = set(conversations)
    chosen = [s for s in samples if s.get("sample_id") in wanted]
    missing = sorted(wanted - {s.get("sample_id") for s in chosen})
    if missing:
        known = ", ".join(str(s.get("sample_id")) for s in samples)
        raise InputError(f"{source} has no conversation {', '.join(missing)}; it has {known}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(chosen, ensure_ascii=False), "utf-8")
    return out
