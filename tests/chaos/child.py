"""An object served from a spawned child process over a pipe.

The fault proxy and the simulated cluster read every frame in Python; at full size, in
the client's process, they would compete with the client under test for the interpreter
(a slow proxy could not be told from a slow client). So the chaos scenarios run them in
a child: :func:`serve` is the child's side, :class:`ChildProcess` the parent's. Each
call is ``(method, args, kwargs)`` answered by ``("ok", result)`` or ``("error", text)``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import threading
import traceback
from collections.abc import Callable, Collection
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["ChildProcess", "serve"]

_C = TypeVar("_C", bound="ChildProcess")


def serve(
    conn: multiprocessing.connection.Connection,
    lookup: Callable[[str], Any],
    close: Callable[[], None],
    properties: Collection[str] = (),
) -> None:
    """Answer calls until ``"close"`` (or the parent is gone), then ``close()``; a name in
    ``properties`` is read, any other is called with the arguments sent."""
    try:
        while True:
            try:
                method, args, kwargs = conn.recv()
            except EOFError:
                break
            if method == "close":
                break
            try:
                target = lookup(method)
                result = target if method in properties else target(*args, **kwargs)
                conn.send(("ok", result))
            except Exception as exc:
                conn.send(("error", f"{exc!r}\n{traceback.format_exc()}"))
    finally:
        close()
        with contextlib.suppress(OSError):
            conn.send(("ok", None))


class ChildProcess:
    """The parent's side: start the child, call it, close it. ``what`` names the child
    in errors."""

    what = "child"

    def __init__(self) -> None:
        self._conn: multiprocessing.connection.Connection | None = None
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._lock = threading.Lock()

    def start(self: _C) -> _C:
        raise NotImplementedError

    def _spawn(self, target: Callable[..., None], args: tuple[Any, ...], timeout: float) -> Any:
        """Start ``target(conn, *args)`` in a spawned process; the value of its
        ``("ready", value)`` message."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=target, args=(child, *args), daemon=True)
        self._proc.start()
        self._conn = parent
        if not parent.poll(timeout):
            self.close()
            raise RuntimeError(f"{self.what} process did not start")
        status, value = parent.recv()
        if status != "ready":
            self.close()
            raise RuntimeError(f"{self.what} process failed to start: {value}")
        return value

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        conn = self._conn
        assert conn is not None, f"{self.what} not started"
        with self._lock:
            conn.send((method, args, kwargs))
            if not conn.poll(60):
                raise RuntimeError(f"{self.what} did not answer {method}")
            status, result = conn.recv()
        if status != "ok":
            raise RuntimeError(f"{self.what} {method} failed: {result}")
        return result

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError, EOFError):
                conn.send(("close", (), {}))
                if conn.poll(30):
                    conn.recv()
            conn.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()

    def __enter__(self: _C) -> _C:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
