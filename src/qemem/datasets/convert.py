"""Writing a converted dataset: the LoCoMo-shaped file and its manifest beside it."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qemem.errors import OutputError


def manifest_path(out: Path) -> Path:
    """Where the manifest of the converted file ``out`` goes: ``<stem>.manifest.json``
    beside it."""
    return out.with_name(out.stem + ".manifest.json")


def write_conversion(
    samples: Sequence[dict[str, Any]], manifest: dict[str, Any], out: Path
) -> Path:
    """Write ``samples`` to ``out`` (compact UTF-8 JSON) and ``manifest``, with the output's
    sha256, beside it; each file is written whole or not at all. Returns the manifest's path."""
    data = json.dumps(list(samples), ensure_ascii=False).encode("utf-8")
    path = manifest_path(out)
    full = {**manifest, "output": str(out), "output_sha256": hashlib.sha256(data).hexdigest()}
    body = (json.dumps(full, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for target, content in ((out, data), (path, body)):
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(content)
            os.replace(partial, target)
    except OSError as exc:
        raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    return path
