"""The fault proxy: a TCP proxy that breaks the network on command, and a broker behind one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Literal, TypeVar

from aiokafka_lite._aio import wait_for
from aiokafka_lite.errors import ConfigurationError
from aiokafka_lite.testing._served import LoopServer, Relay, listen_socket
from aiokafka_lite.testing.broker import EmbeddedBroker
from aiokafka_lite.testing.probe import _connect_host, _host_port, find_free_port

logger = logging.getLogger("aiokafka_lite.testing")

_T = TypeVar("_T")

Direction = Literal["upstream", "downstream"]
#: ``hook(connection_id, direction, data)`` returns the bytes to forward
#: (possibly changed or empty), or ``None`` to cut the connection right there.
ProxyHook = Callable[[int, Direction, bytes], "bytes | None"]


@dataclass
class ProxyStats:
    """Counters of a :class:`FaultProxy` (a snapshot when read from ``proxy.stats``)."""

    connections_accepted: int = 0
    connections_active: int = 0
    #: Connections closed by a fault: drop_connections, drop_after_bytes, a hook.
    connections_cut: int = 0
    #: Connections that could not reach the upstream broker.
    upstream_failures: int = 0
    #: Bytes forwarded client -> broker.
    bytes_upstream: int = 0
    #: Bytes forwarded broker -> client.
    bytes_downstream: int = 0


class _Link(Relay):
    """One client connection and its upstream connection."""

    def __init__(self, link_id: int, client: asyncio.StreamWriter) -> None:
        super().__init__(link_id, client)
        self.cut = False


_EOF = object()


class FaultProxy(LoopServer):
    """An asyncio TCP proxy from ``host:port`` to ``upstream_host:upstream_port``
    with controls to inject network faults.

    Run it on the current event loop (``async with FaultProxy(...)`` or
    ``await proxy.start()``), or on its own loop in a background thread (``with
    FaultProxy(...)`` or ``proxy.start_in_thread()``), which suits synchronous
    clients. The controls may be called from any thread.

    Faults (all off initially; :meth:`reset` clears them):

    * :meth:`drop_connections`: abort every open connection now (clients see a reset).
    * :meth:`set_latency`: delay every chunk by ``ms`` (+/- ``jitter_ms``) in each
      direction, keeping byte order; a request/response round trip gains ~2 * ms.
    * :meth:`blackhole`: accept connections but forward nothing, for ``seconds``
      or until :meth:`clear_blackhole`. Held data is delivered afterwards, as TCP
      would after a network partition heals.
    * :meth:`refuse`: stop listening, so new connections are refused; existing
      connections carry on.
    * :meth:`drop_after_bytes`: let N more bytes through in one direction, then cut
      that connection mid-stream (once).
    * :meth:`set_hook`: see or change every chunk, or cut the connection.
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_size: int = 65536,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        self.chunk_size = chunk_size
        self._stats = ProxyStats()
        self._links: dict[int, _Link] = {}
        self._ids = itertools.count(1)
        self._latency = (0.0, 0.0)
        self._blackholed = False
        self._blackhole_timer: asyncio.TimerHandle | None = None
        self._refusing = False
        self._cut_after: dict[Direction, int] = {}
        self._hook: ProxyHook | None = None
        super().__init__()
        self._server: asyncio.Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._flowing: asyncio.Event | None = None

    # -- addresses and counters --

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return _host_port(_connect_host(self.host), self.port)

    @property
    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        return replace(self._stats)

    @property
    def connections_accepted(self) -> int:
        return self._stats.connections_accepted

    @property
    def active_connections(self) -> int:
        return self._stats.connections_active

    @property
    def bytes_upstream(self) -> int:
        return self._stats.bytes_upstream

    @property
    def bytes_downstream(self) -> int:
        return self._stats.bytes_downstream

    def __repr__(self) -> str:
        return (
            f"<FaultProxy {self.address} -> "
            f"{_host_port(self.upstream_host, self.upstream_port)} {self._stats}>"
        )

    # -- running --

    def _listen_socket(self) -> socket.socket:
        sock = listen_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        server = await asyncio.start_server(self._on_client, sock=sock)
        if self._refusing:  # refuse(True) came while the server was starting
            server.close()
        else:
            self._server = server

    async def start(self) -> FaultProxy:
        """Start on the running event loop."""
        self._bind_loop()
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._serve(self._listen_socket())
        logger.info("fault proxy %s -> %s:%d", self.address, self.upstream_host, self.upstream_port)
        return self

    def _close_now(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._blackhole_timer is not None:
            self._blackhole_timer.cancel()
            self._blackhole_timer = None
        for link in list(self._links.values()):
            link.abort()

    async def _shutdown(self) -> None:
        self._close_now()
        await self._cancel_handlers()

    def _close_from_sync(self) -> None:
        self._call(self._close_now)
        self._loop = None

    # -- controls --

    def drop_connections(self) -> int:
        """Abort every open connection now; return how many there were."""

        def drop() -> int:
            links = list(self._links.values())
            for link in links:
                self._cut(link, "drop_connections")
            return len(links)

        return self._call(drop)

    def set_latency(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Delay each forwarded chunk by ``ms`` +/- ``jitter_ms`` milliseconds, each way."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("latency and jitter must be >= 0")
        self._latency = (ms / 1000.0, jitter_ms / 1000.0)

    def blackhole(self, seconds: float | None = None) -> None:
        """Forward nothing (connections stay open) for ``seconds``, or until cleared."""

        def start() -> None:
            assert self._flowing is not None and self._loop is not None
            self._blackholed = True
            self._flowing.clear()
            if self._blackhole_timer is not None:
                self._blackhole_timer.cancel()
                self._blackhole_timer = None
            if seconds is not None:
                self._blackhole_timer = self._loop.call_later(seconds, self._end_blackhole)

        self._call(start)

    def _end_blackhole(self) -> None:
        self._blackholed = False
        self._blackhole_timer = None
        if self._flowing is not None:
            self._flowing.set()

    def clear_blackhole(self) -> None:
        """End a :meth:`blackhole`; held data flows again."""

        def clear() -> None:
            if self._blackhole_timer is not None:
                self._blackhole_timer.cancel()
            self._end_blackhole()

        self._call(clear)

    @property
    def blackholed(self) -> bool:
        return self._blackholed

    def refuse(self, on: bool = True) -> None:
        """Refuse new connections (stop listening) while ``on``; existing ones carry on.

        Connections the kernel queued but the proxy had not accepted yet are reset.
        """

        def apply() -> None:
            assert self._loop is not None
            if on == self._refusing:
                return
            self._refusing = on
            if on:
                if self._serve_task is not None:
                    self._serve_task.cancel()
                    self._serve_task = None
                if self._server is not None:
                    self._server.close()
                    self._server = None
            else:
                # Listening starts now; connections queue until the server task runs.
                sock = self._listen_socket()
                self._serve_task = self._loop.create_task(self._serve(sock))

        self._call(apply)

    @property
    def refusing(self) -> bool:
        return self._refusing

    def drop_after_bytes(self, n: int, direction: Direction = "downstream") -> None:
        """Forward ``n`` more bytes in ``direction``, then cut that connection (once).

        ``"downstream"`` is broker -> client (cut a response midway), ``"upstream"``
        is client -> broker. Bytes count across connections from the moment of the call.
        """
        if n < 0:
            raise ValueError("n must be >= 0")
        if direction not in ("upstream", "downstream"):
            raise ValueError(f"direction must be 'upstream' or 'downstream', not {direction!r}")

        def arm() -> None:
            self._cut_after[direction] = n

        self._call(arm)

    def set_hook(self, hook: ProxyHook | None) -> None:
        """Call ``hook(connection_id, direction, data)`` for every chunk (``None`` removes it)."""
        self._hook = hook

    def reset(self) -> None:
        """Clear every fault: latency, black hole, refusal, pending cuts and the hook."""
        self.set_latency(0)
        self.clear_blackhole()
        self.refuse(False)
        self._call(self._cut_after.clear)
        self._hook = None

    # -- forwarding --

    def _cut(self, link: _Link, why: str) -> None:
        if not link.cut:
            link.cut = True
            self._stats.connections_cut += 1
            logger.debug("proxy %s: cutting connection %d (%s)", self.address, link.id, why)
        link.abort()

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._spawn_handler(self._handle(reader, writer))

    async def _handle(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        assert self._flowing is not None
        link = _Link(next(self._ids), client_writer)
        self._links[link.id] = link
        self._stats.connections_accepted += 1
        self._stats.connections_active += 1
        try:
            await self._flowing.wait()  # a black hole accepts, but does not connect
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError as exc:
                self._stats.upstream_failures += 1
                logger.debug("proxy %s: upstream connect failed: %s", self.address, exc)
                link.abort()
                return
            link.upstream = up_writer
            if link.cut:  # dropped while connecting
                link.abort()
                return
            pumps = [
                asyncio.create_task(self._pump(link, client_reader, up_writer, "upstream")),
                asyncio.create_task(self._pump(link, up_reader, client_writer, "downstream")),
            ]
            link.tasks = list(pumps)
            done, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
            if pending or any(t.cancelled() or t.exception() is not None for t in done):
                link.abort()
                await asyncio.gather(*pending, return_exceptions=True)
            else:
                client_writer.close()
                up_writer.close()
        except asyncio.CancelledError:
            link.abort()
        finally:
            del self._links[link.id]
            self._stats.connections_active -= 1

    async def _pump(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        """Read chunks and hand them to a writer task that applies the faults."""
        assert self._flowing is not None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | object] = asyncio.Queue()
        deliver = asyncio.create_task(self._deliver(link, queue, writer, direction))
        link.tasks.append(deliver)
        last_due = 0.0
        try:
            while True:
                await self._flowing.wait()
                data = await reader.read(self.chunk_size)
                if not data:
                    queue.put_nowait(_EOF)
                    break
                base, jitter = self._latency
                delay = max(0.0, base + random.uniform(-jitter, jitter)) if base or jitter else 0.0
                last_due = max(loop.time() + delay, last_due)
                queue.put_nowait((last_due, data))
        except ConnectionError:
            queue.put_nowait(_EOF)
        await deliver

    async def _deliver(
        self,
        link: _Link,
        queue: asyncio.Queue[tuple[float, bytes] | object],
        writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        assert self._flowing is not None
        loop = asyncio.get_running_loop()
        while True:
            item = await queue.get()
            if item is _EOF:
                if writer.can_write_eof() and not writer.is_closing():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                return
            assert isinstance(item, tuple)
            due, data = item
            await self._flowing.wait()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                await self._flowing.wait()
            hook = self._hook
            if hook is not None:
                changed = hook(link.id, direction, data)
                if changed is None:
                    self._cut(link, "hook")
                    return
                data = changed
            budget = self._cut_after.get(direction)
            cut_now = budget is not None and len(data) >= budget
            if cut_now:
                assert budget is not None
                del self._cut_after[direction]
                data = data[:budget]
            elif budget is not None:
                self._cut_after[direction] = budget - len(data)
            if data:
                writer.write(data)
                if direction == "upstream":
                    self._stats.bytes_upstream += len(data)
                else:
                    self._stats.bytes_downstream += len(data)
            if cut_now:
                # Give the partial data a moment to leave before the reset.
                with contextlib.suppress(ConnectionError):
                    await wait_for(writer.drain(), 1.0)
                self._cut(link, f"drop_after_bytes ({direction})")
                return
            await writer.drain()


# --- a broker behind a proxy -----------------------------------------------------


class ProxiedBroker:
    """An :class:`EmbeddedBroker` (Tansu) that advertises a :class:`FaultProxy`.

    Entering it (``with`` or ``async with``) starts both and gives
    ``(proxy, bootstrap_servers)``; the metadata the broker returns points at the
    proxy, so every client connection goes through it. With ``with`` the proxy
    runs in a background thread; with ``async with`` on the current event loop.
    """

    def __init__(self, kind: str = "tansu", **broker_kwargs: Any) -> None:
        if kind != "tansu":
            raise ConfigurationError(
                f"a proxied broker must advertise the proxy's port; {kind!r} cannot (use tansu)"
            )
        host = str(broker_kwargs.pop("host", "127.0.0.1"))
        proxy_port = find_free_port(host)
        self.broker = EmbeddedBroker(
            kind, host=host, port=find_free_port(host), advertised_port=proxy_port, **broker_kwargs
        )
        self.proxy = FaultProxy(host, self.broker.port, host=host, port=proxy_port)

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address

    def __enter__(self) -> tuple[FaultProxy, str]:
        self.broker.start()
        try:
            self.proxy.start_in_thread()
        except BaseException:
            self.broker.stop()
            raise
        return self.proxy, self.bootstrap_servers

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.proxy.close()
        finally:
            self.broker.stop()

    async def __aenter__(self) -> tuple[FaultProxy, str]:
        await self.broker.start_async()
        try:
            await self.proxy.start()
        except BaseException:
            await self.broker.stop_async()
            raise
        return self.proxy, self.bootstrap_servers

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.proxy.aclose()
        finally:
            await self.broker.stop_async()


def proxied_broker(kind: str = "tansu", **broker_kwargs: Any) -> ProxiedBroker:
    """A Tansu broker behind a :class:`FaultProxy`; use with ``with`` or ``async with``::

    with proxied_broker() as (proxy, bootstrap):
        ...
    """
    return ProxiedBroker(kind, **broker_kwargs)
