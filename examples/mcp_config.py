"""The MCP configuration of a desktop agent (Claude Desktop and other MCP hosts), checked.

    python examples/mcp_config.py                                # a throwaway store, to try it
    python examples/mcp_config.py --store ~/qemem/memory.db      # your store: prints its entry
    python examples/mcp_config.py --store ~/qemem/memory.db --write claude_desktop_config.json

Needs the server extra (pip install 'qemem[server]'). It creates an API key for the namespace
in the store (or uses --key), prints the host's `mcpServers` entry for `qemem mcp`, and
checks the entry by starting the server exactly as the host will (same command, arguments
and environment, over stdio) and calling its tools: on a throwaway store it remembers two
messages and recalls them; on your store it only lists the conversations. With --write it
merges the entry into that configuration file (kept otherwise as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

MESSAGES = [
    {"session_id": "s1", "timestamp": "2024-06-01T10:00", "speaker": "user", "id": "u1",
     "text": "Please remember that my sister's birthday is on 12 June."},
    {"session_id": "s1", "timestamp": "2024-06-01T10:01", "speaker": "agent", "id": "a1",
     "text": "Noted: your sister's birthday is on 12 June."},
]  # fmt: skip


def qemem_command() -> str:
    """The qemem executable of this environment (hosts start it by absolute path)."""
    beside = Path(sys.executable).with_name("qemem")
    return str(beside) if beside.exists() else shutil.which("qemem") or "qemem"


def create_key(store: Path, namespace: str) -> str:
    argv = ["keys", "create", "--store", str(store), "--namespace", namespace, "--json"]
    done = subprocess.run([qemem_command(), *argv], check=True, capture_output=True, text=True)
    return str(json.loads(done.stdout)["key"])


def server_entry(store: Path, key: str, llm: str | None) -> dict[str, Any]:
    """The `mcpServers` entry that starts `qemem mcp` on the store with the key's namespace."""
    env = {"QEMEM_API_KEY": key} | ({"QEMEM_LLM": llm} if llm else {})
    return {"command": qemem_command(), "args": ["mcp", "--store", str(store)], "env": env}


async def check(entry: dict[str, Any], write: bool) -> None:
    """Start the server as the host will and call its tools."""
    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    params.env = {**os.environ, **entry["env"]}
    async with Client(params) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        print(f"the server starts and offers {len(tools)} tools: {', '.join(tools)}")
        if write:
            args = {"conversation": "assistant", "messages": MESSAGES}
            await client.call_tool("remember", args)
            query = {"conversation": "assistant", "query": "When is the birthday?", "k": 1}
            found = json.loads((await client.call_tool("recall", query)).content[0].text)
            for turn in found["turns"]:
                print(f"recall: [{turn['id']}] {turn['speaker']}: {turn['text']}")
        listed = json.loads((await client.call_tool("list_conversations", {})).content[0].text)
        print("conversations:", [c["id"] for c in listed["conversations"]])


def merge_into(path: Path, entry: dict[str, Any]) -> None:
    config = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    config.setdefault("mcpServers", {})["qemem"] = entry
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote the qemem entry into {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="Your store (default: a throwaway one).")
    parser.add_argument("--namespace", default="default", help="The key's namespace.")
    parser.add_argument("--key", help="An API key of the store (default: create one).")
    parser.add_argument("--llm", default=os.environ.get("QEMEM_LLM"), help="For ask, check.")
    parser.add_argument("--write", type=Path, help="Merge the entry into this config file.")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = (options.store or Path(tmp) / "memory.db").expanduser().resolve()
        key = options.key or create_key(store, options.namespace)
        entry = server_entry(store, key, options.llm)
        print(json.dumps({"mcpServers": {"qemem": entry}}, indent=2))
        anyio.run(check, entry, options.store is None)
        if options.write:
            merge_into(options.write, entry)


if __name__ == "__main__":
    main()
