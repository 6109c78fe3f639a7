"""Ports, addresses and the ApiVersions probe that tells a broker is ready.

Everything here speaks plain sockets (or asyncio streams) and needs nothing from the
rest of :mod:`aiokafka_lite.testing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct

from aiokafka_lite._aio import wait_for


class BrokerError(RuntimeError):
    """A test broker misbehaved (bad probe answer, failed start, ...)."""


class BrokerStartError(BrokerError):
    """A test broker did not start; the message includes the end of its log."""


def find_free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now.

    Another process may take it before you bind it; :class:`EmbeddedBroker`
    retries with a new port when it picked the port itself.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _connect_host(host: str) -> str:
    """The address to connect to for a listener bound on ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _api_versions_request(correlation_id: int, client_id: str) -> bytes:
    """A size-prefixed ApiVersions v0 request (request header v1, empty body)."""
    cid = client_id.encode()
    frame = struct.pack(">hhih", 18, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(frame)) + frame


def _parse_api_versions_response(frame: bytes, correlation_id: int) -> dict[int, tuple[int, int]]:
    """Decode an ApiVersions v0 response frame (without its size prefix)."""
    if len(frame) < 10:
        raise BrokerError(f"ApiVersions response too short ({len(frame)} bytes)")
    got_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    if got_id != correlation_id:
        raise BrokerError(f"ApiVersions correlation id {got_id}, expected {correlation_id}")
    if error_code != 0:
        raise BrokerError(f"ApiVersions v0 answered with error code {error_code}")
    if count < 0 or len(frame) < 10 + 6 * count:
        raise BrokerError(f"ApiVersions response truncated ({count} entries, {len(frame)} bytes)")
    versions: dict[int, tuple[int, int]] = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        versions[key] = (lo, hi)
    if 18 not in versions:
        raise BrokerError("ApiVersions response does not list ApiVersions itself")
    return versions


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed during ApiVersions probe")
        chunks += chunk
    return bytes(chunks)


def probe_api_versions(
    host: str, port: int, timeout: float = 2.0, client_id: str = "aiokafka-lite-probe"
) -> dict[int, tuple[int, int]]:
    """Do one ApiVersions v0 round trip; return ``{api_key: (min, max)}``.

    Raises ``OSError`` (including ``TimeoutError``) when the broker cannot be
    reached or does not answer in time, :class:`BrokerError` on a bad answer.
    """
    correlation_id = random.randint(1, 2**31 - 1)
    with socket.create_connection((_connect_host(host), port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_api_versions_request(correlation_id, client_id))
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        if not 0 < size < 1 << 20:
            raise BrokerError(f"ApiVersions response has implausible size {size}")
        return _parse_api_versions_response(_recv_exactly(sock, size), correlation_id)


async def async_probe_api_versions(
    host: str, port: int, timeout: float = 2.0, client_id: str = "aiokafka-lite-probe"
) -> dict[int, tuple[int, int]]:
    """The asyncio form of :func:`probe_api_versions`."""
    correlation_id = random.randint(1, 2**31 - 1)

    async def round_trip() -> dict[int, tuple[int, int]]:
        reader, writer = await asyncio.open_connection(_connect_host(host), port)
        try:
            writer.write(_api_versions_request(correlation_id, client_id))
            await writer.drain()
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 0 < size < 1 << 20:
                    raise BrokerError(f"ApiVersions response has implausible size {size}")
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise ConnectionError("connection closed during ApiVersions probe") from None
            return _parse_api_versions_response(frame, correlation_id)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await wait_for(round_trip(), timeout)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
