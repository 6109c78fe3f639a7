"""What the testing servers (FaultProxy, SimulatedCluster) share: a listening socket, and
running either on the caller's event loop or on a private one in a daemon thread.

A server started in a thread is driven from any thread: controls hop onto its loop
through :meth:`LoopServer._call`, so tests can flip faults from synchronous code while
clients run elsewhere.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from aiokafka_lite.testing.probe import BrokerError

_T = TypeVar("_T")
_S = TypeVar("_S", bound="LoopServer")


def listen_socket(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on ``host:port`` (port 0: any free one): bound
    now, so the port is known and connections queue in the kernel until served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class Relay:
    """One client connection a server accepted and its connection to the real broker:
    the tasks moving bytes between them and the handler that owns both."""

    def __init__(self, relay_id: int, client: asyncio.StreamWriter) -> None:
        self.id = relay_id
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.handler = asyncio.current_task()

    def abort(self) -> None:
        """Reset both connections and cancel the tasks (not the one calling)."""
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()
        current = asyncio.current_task()
        for task in (*self.tasks, self.handler):
            if task is not None and task is not current:
                task.cancel()


class LoopServer:
    """Base of a server with an async :meth:`start` (which calls :meth:`_bind_loop`
    first) and an async :meth:`_shutdown`; this adds the thread, the cross-thread
    calls, closing and both kinds of context manager."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._thread: threading.Thread | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self: _S) -> _S:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError

    def _close_from_sync(self) -> None:
        """``close()`` of a server started on a caller's loop (not in a thread)."""
        raise NotImplementedError

    def _spawn_handler(self, handler: Coroutine[Any, Any, None]) -> None:
        """Run a connection's handler as a task that :meth:`_cancel_handlers` ends."""
        task = asyncio.get_running_loop().create_task(handler)
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _cancel_handlers(self) -> None:
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """Called first by :meth:`start`: the running loop (and thread) become the
        server's; returns the loop."""
        if self._loop is not None:
            raise BrokerError(f"{type(self).__name__} already started")
        self._loop = loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        return loop

    def start_in_thread(self: _S) -> _S:
        """Start on a private event loop in a daemon thread."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._thread_main,
            args=(started,),
            name=f"{type(self).__name__}-{id(self):x}",
            daemon=True,
        )
        self._thread.start()
        started.result()
        return self

    def _thread_main(self, started: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        try:
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                started.set_exception(exc)
                return
            started.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
        finally:
            loop.close()

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the server's loop thread and return its result."""
        loop = self._loop
        if loop is None or self._loop_thread == threading.get_ident() or loop.is_closed():
            return fn()
        result: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(fn())
            except BaseException as exc:
                result.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return result.result(timeout=30)

    async def aclose(self) -> None:
        """Stop: close the listeners and abort every connection."""
        if self._thread is not None:
            await asyncio.to_thread(self.close)
        elif self._loop is not None:
            await self._shutdown()
            self._loop = None

    def close(self) -> None:
        """Stop from synchronous code."""
        thread, loop = self._thread, self._loop
        if thread is not None and loop is not None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            self._thread = None
            self._loop = None
        elif loop is not None:
            self._close_from_sync()

    def __enter__(self: _S) -> _S:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self: _S) -> _S:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
