"""Real ``qemem serve`` processes for tests: ``Server`` (its own process group, killed whole at
the end), a store with the sample conversation and a key (``prepared``), ``wait_for``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from qemem.cli import app

QEMEM = [sys.executable, "-c", "from qemem.cli import main; main()"]
SRC = str(Path(__file__).resolve().parents[1] / "src")
SLOW_LLM = "cmd:sleep 4"
"""Every call takes 4 s (then fails): a build stays running until its server is killed."""
CONV = "demo-1"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def prepared(store: str, sample_path: Path) -> dict[str, str]:
    """The sample conversation ingested into ``store``; auth headers of a key for it."""
    cli("ingest", str(sample_path), "--store", store, "--quiet")
    out = cli("keys", "create", "--store", store, "--namespace", "default", "--json")
    return {"Authorization": f"Bearer {json.loads(out.splitlines()[-1])['key']}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``qemem serve`` (its own process group, killed whole at the end); ``env``: more
    environment variables of it."""

    def __init__(
        self, store: str, llm: str, *extra: str, env: dict[str, str] | None = None
    ) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        env = {
            **os.environ,
            "PYTHONPATH": SRC,
            "QEMEM_EMBEDDER": "hash",
            "QEMEM_LLM": llm,
            **(env or {}),
        }
        port = self.base.rsplit(":", 1)[1]
        self.process = subprocess.Popen(
            [*QEMEM, "serve", "--store", store, "--port", port, "--job-lease", "1", *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for(self._up, 60)
        except BaseException:  # nobody holds a server that never came up: kill it here
            self.kill()
            raise

    def _up(self) -> bool:
        assert self.process.poll() is None, "the server exited"
        try:
            return httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def call(self, method: str, path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        return httpx.request(method, self.base + path, headers=headers, timeout=10, **kw)

    def job(self, job_id: str, headers: dict[str, str]) -> dict[str, Any]:
        r = self.call("GET", f"/v1/jobs/{job_id}", headers)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class Postgres:
    """A throwaway PostgreSQL server of one test (``pgserver``), which it may stop and start
    again (``pg_ctl``), unlike the session's shared one."""

    def __init__(self, server: Any, folder: str) -> None:
        self.server, self.folder = server, folder
        self.uri: str = server.get_uri()

    @classmethod
    def start(cls) -> Postgres:
        """A new server in a new temporary folder (which the server's own user can enter)."""
        import tempfile
        import warnings

        folder = tempfile.mkdtemp(prefix="qemem-pg-")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pgserver

            return cls(pgserver.get_server(folder, cleanup_mode="delete"), folder)

    def database(self, name: str) -> str:
        """The URL of a new database ``name`` of this server."""
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        head, _, tail = self.uri.partition("?")
        return f"{head.rsplit('/', 1)[0]}/{name}?{tail}"

    def _ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=30)

    def stop(self) -> None:
        """Stop the server at once (``pg_ctl stop -m fast``: sessions are cut)."""
        self._ctl("-w", "-m", "fast", "stop")

    def start_again(self) -> None:
        """Start the stopped server again, on the same socket."""
        socket_dir = self.uri.split("host=", 1)[1]
        log = str(self.server.log)
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", log, "start")

    def remove(self) -> None:
        import shutil
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)
