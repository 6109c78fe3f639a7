"""asyncio helpers that behave the same on every supported Python (3.10+).

``asyncio.wait_for`` before Python 3.12 can swallow a cancellation: when the task
running it is cancelled in the same loop iteration in which the awaited future
completes, it returns the result instead of raising `CancelledError` (CPython
gh-86296). A background loop that waits with it then goes round once more, and
its owner's ``task.cancel(); await task`` waits for the loop's next wake-up: up to
``metadata_max_age_ms`` (five minutes) for the cluster client's metadata loop, which
is how a test hung to its 300 s timeout under load.

* `wait_for` bounds an await with ``asyncio.timeout`` (3.11+) or ``async_timeout``
  (3.10); neither turns an outside cancellation into a result. It also runs a
  coroutine in the calling task instead of wrapping it in a new one.
* `cancel_and_wait` stops tasks with a bound, so no close() waits without limit
  for a task that does not stop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from asyncio import timeout as _timeout
else:  # pragma: no cover - exercised on 3.10 only
    from async_timeout import timeout as _timeout

log = logging.getLogger(__name__)

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw``, raising `asyncio.TimeoutError` after ``timeout`` seconds.

    Like ``asyncio.wait_for`` (``aw`` is cancelled on timeout; wrap it in
    ``asyncio.shield`` to keep it running), except that a cancellation of the
    calling task always propagates.
    """
    if timeout is None:
        return await aw
    async with _timeout(max(timeout, 0.0)):
        return await aw


async def cancel_and_wait(
    tasks: Iterable[asyncio.Future[Any] | None], timeout: float = 5.0
) -> None:
    """Cancel ``tasks`` and wait until they finish, for ``timeout`` seconds at most.

    Their results and exceptions are discarded (and marked retrieved). A task still
    running at the deadline is cancelled once more and left behind with a warning:
    close() must not hang on a task that ignores its cancellation.
    """
    todo = [t for t in tasks if t is not None]
    for task in todo:
        task.cancel()
    pending = {t for t in todo if not t.done()}
    if pending:
        _, pending = await asyncio.wait(pending, timeout=timeout)
    for task in todo:
        if task.done():
            if not task.cancelled():
                task.exception()
        else:
            task.cancel()
            log.warning("%r did not stop within %.1f s of its cancellation", task, timeout)
