"""Driving our asyncio client from Spark's synchronous, pickling world.

Spark calls data sources from plain threads: the driver-side planning workers and one
Python worker per task. Each of those gets its own private event loop here; nothing
about it (loop, client, sockets) is ever pickled, and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["PrivateLoop", "iterate_async", "run_async"]


class PrivateLoop:
    """An event loop owned by one synchronous caller, run only inside :meth:`run`."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = asyncio.new_event_loop()

    @property
    def closed(self) -> bool:
        return self._loop is None

    def run(self, awaitable: Awaitable[T], timeout: float, what: str) -> T:
        """Run ``awaitable`` to completion; :class:`KafkaTimeoutError` after ``timeout`` s."""
        loop = self._loop
        if loop is None:
            raise errors.IllegalStateError("the event loop is closed")

        # A timeout the work raises itself (KafkaTimeoutError is a TimeoutError too: a
        # read task's kafkaConsumer.pollTimeoutMs, a flush, a metadata wait) says what
        # timed out, and where: it goes up as it is. Only this bound's own expiry (the
        # work is cancelled, so it raises no TimeoutError of its own) is reported here.
        raised_itself = False

        async def tracked() -> T:
            nonlocal raised_itself
            try:
                return await awaitable
            except asyncio.TimeoutError:
                raised_itself = True
                raise

        async def bounded() -> T:
            try:
                return await wait_for(tracked(), timeout)
            except asyncio.TimeoutError:
                if raised_itself:
                    raise
                raise errors.KafkaTimeoutError(
                    f"aiokafka_lite data source: {what} did not finish within {timeout:.0f} s"
                ) from None

        return loop.run_until_complete(bounded())

    def close(self) -> None:
        """Cancel what is left on the loop and close it (idempotent)."""
        loop = self._loop
        if loop is None:
            return
        self._loop = None
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=5))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception:  # closing must not mask the real outcome of a task
            log.debug("error while closing a private event loop", exc_info=True)
        finally:
            loop.close()


def run_async(coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
    """Run one coroutine on a fresh private loop, bounded by ``timeout`` seconds."""
    loop = PrivateLoop()
    try:
        return loop.run(coro, timeout, what)
    finally:
        loop.close()


def iterate_async(
    agen: AsyncIterator[T], step_timeout: float, what: str, close_timeout: float = 30.0
) -> Iterator[T]:
    """Iterate an async iterator from synchronous code on a private loop.

    Each step is bounded by ``step_timeout`` seconds. When the caller stops early
    (Spark closes the generator, e.g. after a ``limit``), the async iterator is closed on
    the same loop so its ``finally`` blocks (closing the consumer) still run.
    """
    loop = PrivateLoop()
    finished = False
    try:
        while True:
            try:
                item = loop.run(agen.__anext__(), step_timeout, what)
            except StopAsyncIteration:
                finished = True
                return
            yield item
    finally:
        try:
            if not finished:
                aclose = getattr(agen, "aclose", None)
                if aclose is not None:
                    loop.run(aclose(), close_timeout, f"closing {what}")
        finally:
            loop.close()
