"""The listening socket of ``qemem serve --workers N``: the connections it accepts get
``TCP_NODELAY`` from asyncio (uvicorn's own listener has ``proto`` 0, so they did not, and
every keep-alive request waited about 40 ms for the client's delayed ACK)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from qemem.service.listen import _Config, tcp_listener


def nodelay_of_accepted(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection that asyncio accepted through ``listener``."""

    async def accept_one() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listener)
        async with server:
            port = listener.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            result = await asyncio.wait_for(seen, 10)
            writer.close()
            return result

    return asyncio.run(accept_one())


def bound(sock: socket.socket) -> socket.socket:
    sock.bind(("127.0.0.1", 0))
    return sock


def test_tcp_listener_keeps_tcp_nodelay_on_accepted_connections() -> None:
    fixed = tcp_listener(bound(socket.socket(socket.AF_INET)))
    assert fixed.proto == socket.IPPROTO_TCP and fixed.get_inheritable()
    assert nodelay_of_accepted(fixed) != 0


def test_uvicorns_config_binds_the_fixed_listener() -> None:
    config = _Config("qemem.service.app:app_from_env", factory=True, host="127.0.0.1", port=0)
    sock = config.bind_socket()
    assert sock.proto == socket.IPPROTO_TCP
    assert nodelay_of_accepted(sock) != 0


@pytest.mark.parametrize("family", [socket.AF_UNIX])
def test_other_sockets_are_left_as_they_are(family: socket.AddressFamily) -> None:
    sock = socket.socket(family, socket.SOCK_STREAM)
    assert tcp_listener(sock) is sock
    sock.close()
