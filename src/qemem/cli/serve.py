"""Serving commands: ``serve`` (HTTP API), ``mcp`` (MCP server) and ``keys`` (API keys)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.table import Table

from qemem.cli.common import (
    EmbedderOpt,
    JsonOpt,
    LLMOpt,
    StoreOpt,
    console,
    err_console,
    existing_store,
    print_json,
)
from qemem.cli.flags import FlagGroup
from qemem.errors import ConfigError
from qemem.keys import create_key, open_key_store, revoke_key, verify_key
from qemem.llm import open_llm
from qemem.memory import IDEMPOTENCY_HOURS, Memory
from qemem.memory.jobs import check_auto_build
from qemem.store import store_exists

keys_app = typer.Typer(
    help="API keys of the HTTP service and MCP server (one namespace each).",
    no_args_is_help=True,
    cls=FlagGroup,
)

HostOpt = Annotated[str, typer.Option("--host", help="Interface to listen on.")]
PortOpt = Annotated[int, typer.Option("--port", help="TCP port.")]


CREATE_HINT = (
    "pass --create to start with a new, empty store (or fill one first with qemem ingest "
    "FILE --store PATH)"
)
"""How ``serve`` and ``mcp`` say to get a store when theirs is missing."""


def _server_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import fastapi_offline  # noqa: F401
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"serving needs the server extra ({exc.name} is missing): pip install 'qemem[server]'"
        ) from None


AutoBuildOpt = Annotated[
    float | None,
    typer.Option(
        "--auto-build",
        metavar="SECONDS",
        help="Build a conversation by itself once it has been quiet for SECONDS after an "
        "append or ingest (a burst of them makes one build job); needs an LLM.",
    ),
]


def _check_auto_build(auto_build: float | None, llm: str | None) -> None:
    """Refuse ``--auto-build`` at once (before a store is created or a worker started) when it
    is no positive number or there is no LLM to build with."""
    if auto_build is None:
        return
    client = open_llm(llm)
    if client is not None:
        client.close()
    check_auto_build(auto_build, lambda: client)


CreateOpt = Annotated[
    bool,
    typer.Option(
        "--create", help="Create the store when it does not exist (default: refuse a typo)."
    ),
]


def serve(
    store: StoreOpt,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8765,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Server processes.")] = 1,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1024, help="Largest request body in bytes (413).")
    ] = 1_000_000,
    job_lease: Annotated[
        float,
        typer.Option(
            "--job-lease",
            min=0.1,
            help="Seconds a background job's lease lasts without a heartbeat; a job whose "
            "worker died is started again after it.",
        ),
    ] = 60.0,
    job_attempts: Annotated[
        int,
        typer.Option("--job-attempts", min=1, help="Starts of a job before it fails for good."),
    ] = 3,
    auto_build: AutoBuildOpt = None,
    embedder: EmbedderOpt = None,
    llm: LLMOpt = None,
    create: CreateOpt = False,
    idempotency_hours: Annotated[
        float,
        typer.Option(
            "--idempotency-hours",
            help="How long an append's Idempotency-Key is remembered (a retry within it is "
            "answered with the first response).",
        ),
    ] = IDEMPOTENCY_HOURS,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs) and MCP (streamable HTTP at /mcp); every /v1
    route and /mcp need an API key. Every process (``--workers``, replicas on one PostgreSQL)
    runs the store's background jobs."""
    _server_extra()
    from qemem.service.listen import serve_app

    if not idempotency_hours > 0:
        raise ConfigError(
            f"--idempotency-hours must be more than 0 (got {idempotency_hours:g}): it is how "
            "long a retried batch's Idempotency-Key is remembered"
        )
    _check_auto_build(auto_build, llm)  # refused here rather than in each worker
    if auto_build is not None:
        os.environ["QEMEM_AUTO_BUILD"] = repr(auto_build)
    store = store if create else existing_store(store, CREATE_HINT)
    os.environ["QEMEM_STORE"] = str(store)
    os.environ["QEMEM_HOST"] = host
    os.environ["QEMEM_MAX_BODY"] = str(max_body)
    os.environ["QEMEM_JOB_LEASE"] = str(job_lease)
    os.environ["QEMEM_JOB_ATTEMPTS"] = str(job_attempts)
    os.environ["QEMEM_IDEMPOTENCY_HOURS"] = repr(idempotency_hours)
    for name, value in (("QEMEM_EMBEDDER", embedder), ("QEMEM_LLM", llm)):
        if value:
            os.environ[name] = value
    open_key_store(store).close()  # fail here, not in each worker, when the store is bad
    with _metrics_folder(workers):
        serve_app("qemem.service.app:app_from_env", host=host, port=port, workers=workers)


@contextmanager
def _metrics_folder(workers: int) -> Iterator[None]:
    """With several workers (and metrics on): a fresh temporary folder for prometheus-client's
    multiprocess mode while the block runs, so that a scrape of any worker sums all of them;
    removed at the end. A ``PROMETHEUS_MULTIPROC_DIR`` already set is used as it is."""
    from qemem.service.metrics import MULTIPROC_ENV

    if workers < 2 or os.environ.get("QEMEM_METRICS") == "0" or os.environ.get(MULTIPROC_ENV):
        yield
        return
    folder = tempfile.mkdtemp(prefix="qemem-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        del os.environ[MULTIPROC_ENV]
        shutil.rmtree(folder, ignore_errors=True)


def mcp(
    store: StoreOpt,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", help="Namespace served on stdio (default: the QEMEM_API_KEY's)."
        ),
    ] = None,
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Streamable HTTP at /mcp instead of stdio: qemem serve, where every request "
            "needs an API key of the store (Authorization: Bearer).",
        ),
    ] = False,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8766,
    auto_build: AutoBuildOpt = None,
    embedder: EmbedderOpt = None,
    llm: LLMOpt = None,
    create: CreateOpt = False,
) -> None:
    """Run the MCP server (stdio by default). With QEMEM_API_KEY set, the key's namespace is
    served (a revoked key is refused) and a read-only key cannot remember or forget. With
    --auto-build, the server also runs the store's build jobs while it is up. With --http it
    is `qemem serve` (MCP at /mcp): each request's own key decides its namespace and access."""
    _server_extra()
    _check_auto_build(auto_build, llm)
    store = store if create else existing_store(store, CREATE_HINT)
    if http:
        _check_http_keys(store, namespace)
        if os.environ.get("QEMEM_API_KEY"):
            err_console.print(
                "[dim]QEMEM_API_KEY is not used over --http: each client sends its own key "
                "('Authorization: Bearer <key>')[/]"
            )
        serve(store, host=host, port=port, auto_build=auto_build, embedder=embedder, llm=llm)
        return
    from qemem.service.mcp_server import create_mcp_server, running_jobs

    read_only = False
    key = os.environ.get("QEMEM_API_KEY")
    if key:
        keys = open_key_store(store)
        try:
            record = verify_key(keys, key)
        finally:
            keys.close()
        if namespace is not None and namespace != record.namespace:
            raise ConfigError(
                f"QEMEM_API_KEY belongs to namespace {record.namespace!r}, not {namespace!r}: "
                "drop --namespace"
            )
        namespace, read_only = record.namespace, record.read_only
    with (
        Memory.open(store, embedder=embedder, llm=llm, namespace=namespace or "default") as memory,
        running_jobs(memory, auto_build),
    ):
        create_mcp_server(memory, read_only=read_only).run()


def _check_http_keys(store: str, namespace: str | None) -> None:
    """Refuse ``qemem mcp --http`` with ``--namespace`` (each client's key decides it), or
    over a store without a usable API key (no client could connect)."""
    if namespace is not None:
        raise ConfigError(
            "over --http each client's API key decides its namespace: drop --namespace"
        )
    usable = False
    if store_exists(store):
        keys = open_key_store(store)
        try:
            usable = any(k.revoked is None for k in keys.list())
        finally:
            keys.close()
    if not usable:
        raise ConfigError(
            "over --http every request needs an API key of the store, and it has none: create "
            "one with `qemem keys create --store STORE --namespace NAME`, and have the MCP "
            "client send it as 'Authorization: Bearer <key>'"
        )


@keys_app.command("create")
def keys_create(
    store: StoreOpt,
    namespace: Annotated[str, typer.Option("--namespace", help="The key's tenant namespace.")],
    read_only: Annotated[
        bool, typer.Option("--read-only", help="May read and ask, never write.")
    ] = False,
    label: Annotated[str, typer.Option("--label", help="A note to recognise the key.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it once (only a salted hash is stored)."""
    keys = open_key_store(store)
    try:
        key, record = create_key(keys, namespace, read_only=read_only, label=label)
    finally:
        keys.close()
    if as_json:
        print_json({"key": key, **vars(record)})
        return
    access = "read-only" if read_only else "read-write"
    console.print(
        f"{key}\n[dim]{access} key {record.id} for namespace {namespace!r}; shown "
        "once: keep it now[/]"
    )


@keys_app.command("list")
def keys_list(
    store: StoreOpt,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Only this one.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List keys (ids, namespaces, access, labels; never the keys themselves)."""
    keys = open_key_store(existing_store(store))
    try:
        records = keys.list(namespace)
    finally:
        keys.close()
    if as_json:
        print_json([vars(r) for r in records])
        return
    table = Table("id", "namespace", "access", "label", "created", "revoked")
    for r in records:
        access = "read-only" if r.read_only else "read-write"
        table.add_row(r.id, r.namespace, access, r.label, r.created[:19], (r.revoked or "")[:19])
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (see `qemem keys list`).")],
    store: StoreOpt,
) -> None:
    """Revoke a key: every later request with it is refused."""
    keys = open_key_store(existing_store(store))
    try:
        revoke_key(keys, key_id)
    finally:
        keys.close()
    console.print(f"revoked {key_id}")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(mcp)
    app.add_typer(keys_app, name="keys")
