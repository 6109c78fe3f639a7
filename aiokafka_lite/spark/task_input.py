"""Whether a writer task's input really ended, or Spark stopped sending it.

A Python writer gets its task's rows as an Arrow stream on the Python worker's
connection to the executor JVM. When the task fails upstream of the writer (a UDF
raises, a shuffle fetch fails) the JVM shuts its sending side; when the executor dies
the kernel closes the connection. Arrow's reader takes either for the stream's end, so
the writer's input just ends, short, and looks complete.

The connection tells the two apart. After a real end it stays open (the JVM waits for
the writer's commit message), so nothing can be read from it yet; after a cut it is at
end-of-file, and stays there. :class:`TaskInput` remembers the connections the worker
holds when the task starts, before the writer opens any of its own, and looks at them
without reading when the input has ended.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["TaskInput"]

_FD_DIRS = ("/proc/self/fd", "/dev/fd")


@dataclass(frozen=True)
class _Connection:
    fd: int
    inode: int


def _open_fds() -> list[int]:
    for path in _FD_DIRS:
        try:
            return sorted(int(name) for name in os.listdir(path))
        except (OSError, ValueError):
            continue
    return []


def _socket_for(fd: int) -> socket.socket | None:
    """A socket object on a duplicate of ``fd`` (the caller closes it), or None."""
    try:
        dup = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return None
    if socket.getdefaulttimeout() is not None:
        # A default timeout made the new object switch the shared file description to
        # non-blocking; the worker reads it blocking.
        sock.settimeout(None)
    return sock


class TaskInput:
    """The task's connections to Spark, watched for a cut (see the module's text)."""

    def __init__(self, fds: list[int]) -> None:
        self._connections: list[_Connection] = []
        if not hasattr(socket, "MSG_DONTWAIT"):  # (not on Windows: nothing to watch there)
            return
        for fd in fds:
            try:
                info = os.fstat(fd)
            except OSError:
                continue
            if not stat.S_ISSOCK(info.st_mode):
                continue
            sock = _socket_for(fd)
            if sock is None:
                continue
            try:
                if sock.type != socket.SOCK_STREAM:
                    continue
                sock.getpeername()  # (a listening socket has no peer)
            except OSError:
                continue
            finally:
                sock.close()
            self._connections.append(_Connection(fd, info.st_ino))
        log.debug("watching %d connection(s) to Spark", len(self._connections))

    @classmethod
    def of_this_process(cls) -> TaskInput:
        """The connected stream sockets this process holds now: call it before the task
        opens connections of its own."""
        return cls(_open_fds())

    @property
    def watched(self) -> int:
        return len(self._connections)

    def cut_short(self) -> bool:
        """True when a watched connection is at end-of-file or broken: Spark stopped
        sending, so the input that just ended is not the task's whole input."""
        for conn in self._connections:
            try:
                if os.fstat(conn.fd).st_ino != conn.inode:
                    continue  # (closed by the worker, the number reused)
            except OSError:
                continue
            sock = _socket_for(conn.fd)
            if sock is None:
                continue
            try:
                peeked = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue  # open, nothing to read: what a real end looks like
            except OSError as exc:
                if exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                    return True
                continue
            finally:
                sock.close()
            if peeked == b"":
                return True
        return False
