"""The TypeScript client's generated modules (clients/typescript/src/generated) are what its
generator writes from docs/openapi.json and the operation table, so that a declared operation
reaches the client (its build and its tests against a live server: scripts/ts-client-check)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

GENERATOR = Path(__file__).resolve().parents[1] / "clients/typescript/scripts/generate.py"


def test_the_typescript_clients_generated_modules_are_current() -> None:
    """Run ``python clients/typescript/scripts/generate.py`` after declaring an operation."""
    spec = importlib.util.spec_from_file_location("ts_generate", GENERATOR)
    assert spec and spec.loader
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    sources = generate.sources()
    assert {path.name for path in sources} == {"types.ts", "methods.ts"}
    for path, text in sources.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale"
