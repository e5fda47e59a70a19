"""The guard that keeps every test off the real LLM providers (installed by conftest.py).

While it is installed, resolving or connecting to any host but this machine's loopback fails the
test: that covers every provider SDK whatever its HTTP client (anthropic and openai on ``httpx2``,
bedrock on botocore's urllib3), since all of them go through Python's ``socket`` module. Loading
a real GGUF model (``llamacpp:``) fails the same way. Unix sockets and loopback stay open for the
PostgreSQL, service and browser tests and for ``tests/replay_server.py``. The environment
variables that could send an SDK elsewhere (proxies, base-URL overrides, ``QEMEM_LLM``) are
removed for the test.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any, NoReturn

import pytest

LOCAL_NAMES = frozenset({"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
SCRUBBED_ENV = (
    "QEMEM_LLM",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    *(f"{name}_proxy" for name in ("http", "https", "all")),
    *(f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL")),
)


def is_local(host: object) -> bool:
    """Whether ``host`` (a name or address, as given to getaddrinfo or connect) is loopback."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower()
    if name in LOCAL_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or ip.is_unspecified or bool(mapped and mapped.is_loopback)


class ProviderGuard:
    """Refuses non-loopback name lookups and connections, and real GGUF loads, while installed;
    ``blocked`` lists what it refused (conftest fails a test whose code swallowed the refusal)."""

    def __init__(self) -> None:
        self.blocked: list[str] = []

    def refuse(self, what: str) -> NoReturn:
        """Record ``what`` and fail the test at once."""
        self.blocked.append(what)
        pytest.fail(
            f"real provider call blocked: {what}. Tests must not reach an LLM provider or any "
            "host but loopback; point the provider at tests/replay_server.py instead",
            pytrace=False,
        )

    def finish(self, failed_already: bool) -> None:
        """At teardown: fail a test that refused something unless it failed already (the code
        under test swallowed the refusal)."""
        if self.blocked and not failed_already:
            pytest.fail(
                f"the code under test swallowed a blocked real provider call: {self.blocked}",
                pytrace=False,
            )

    def install(self, patch: pytest.MonkeyPatch) -> None:
        """Patch ``socket``, the GGUF loader and the environment through ``patch``."""
        real_getaddrinfo = socket.getaddrinfo
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        own_name = socket.gethostname()

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_local(host) and host != own_name:
                self.refuse(f"name lookup of {host}:{port}")
            return real_getaddrinfo(host, port, *args, **kwargs)

        def check(sock: socket.socket, address: Any) -> None:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_local(address[0]):
                self.refuse(f"connection to {address[0]}:{address[1]}")

        def connect(sock: socket.socket, address: Any) -> None:
            check(sock, address)
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            check(sock, address)
            return real_connect_ex(sock, address)

        def load_model(llama_cpp: Any, model_path: str) -> NoReturn:
            self.refuse(f"load of the GGUF model {model_path}")

        from qemem.llm.providers import llamacpp

        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(llamacpp, "load_model", load_model)
        for name in SCRUBBED_ENV:
            patch.delenv(name, raising=False)
