"""Print the service's OpenAPI schema (committed as docs/openapi.json; a test diffs them):
``python -m qemem.service.openapi > docs/openapi.json``."""

from __future__ import annotations

import json

from qemem.keys import SQLiteKeyStore
from qemem.service.app import create_app
from qemem.store import SQLiteStore


def schema_json() -> str:
    """The OpenAPI document of the app, as stable, indented JSON."""
    store, keys = SQLiteStore(":memory:"), SQLiteKeyStore(":memory:")
    try:
        schema = create_app(store, keys=keys, embedder="hash").openapi()
    finally:
        store.close()
        keys.close()
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(schema_json(), end="")
