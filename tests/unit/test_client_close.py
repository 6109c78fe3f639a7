"""Stopping background tasks: a cancellation is never swallowed, close() is bounded.

Before Python 3.12 ``asyncio.wait_for`` returns the awaited result instead of raising
`CancelledError` when its task is cancelled in the loop iteration in which that result
arrives (CPython gh-86296). The cluster client's metadata loop waited on its request
with it, so a ``close()`` that came while a Metadata response was arriving left the
loop running and waiting for its next refresh: ``close()`` hung for
``metadata_max_age_ms`` (seen as a 300 s test timeout under load). No broker needed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest

from aiokafka_lite import _aio
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.protocol.api import ApiKey

from .test_client_config import _metadata_body


async def _cancel_as_result_arrives(wait: Any) -> str:
    """Run ``wait(inner, 30)`` in a task; resolve ``inner`` and cancel it at once."""
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def inner() -> int:
        return await gate

    async def outer() -> str:
        result = await wait(inner(), 30)
        return f"returned {result}"

    task = asyncio.get_running_loop().create_task(outer())
    for _ in range(3):  # let outer() and inner() start waiting
        await asyncio.sleep(0)
    gate.set_result(1)
    task.cancel()
    try:
        return await asyncio.wait_for(task, 5)
    except asyncio.CancelledError:
        return "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="fixed in CPython 3.12")
async def test_asyncio_wait_for_swallows_this_cancellation() -> None:
    # The scenario below is the one that used to hang: stdlib wait_for loses it.
    assert await _cancel_as_result_arrives(asyncio.wait_for) == "returned 1"


async def test_our_wait_for_never_swallows_a_cancellation() -> None:
    assert await _cancel_as_result_arrives(_aio.wait_for) == "cancelled"


async def test_our_wait_for_times_out_and_cancels_the_awaitable() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    fut = asyncio.ensure_future(slow())
    with pytest.raises(asyncio.TimeoutError):
        await _aio.wait_for(fut, 0.05)
    assert started.is_set() and fut.cancelled()
    with pytest.raises(asyncio.TimeoutError):
        await _aio.wait_for(asyncio.sleep(30), 0)

    async def at_once() -> str:
        return "done"

    assert await _aio.wait_for(at_once(), 0) == "done"


async def test_cancel_and_wait_is_bounded_for_a_task_that_ignores_cancellation() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                continue

    task = asyncio.get_running_loop().create_task(stubborn())
    await asyncio.sleep(0)
    started = time.monotonic()
    await _aio.cancel_and_wait([task, None], timeout=0.2)
    assert time.monotonic() - started < 2
    release.set()
    await _aio.cancel_and_wait([task], timeout=2)
    assert task.done()


class _FakeConnection:
    """Answers Metadata when the test opens ``gate``."""

    host, port, closed = "b1", 9092, False

    def __init__(self) -> None:
        self.gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.requests = 0
        self.waiting = asyncio.Event()

    def version_for(self, api_key: int) -> int:
        assert api_key == ApiKey.METADATA
        return 12

    async def send(self, api_key: int, body: Any, *, version: int | None = None) -> Any:
        self.requests += 1
        if self.requests > 1:  # the bootstrap answers at once, refreshes wait
            self.waiting.set()
            await self.gate
        return _metadata_body()


async def test_close_while_a_metadata_response_arrives_does_not_hang() -> None:
    client = KafkaClient("b1:9092", metadata_max_age_ms=300_000)
    conn = _FakeConnection()

    async def connection_before(node_id: int, deadline: float) -> Any:
        return conn

    client._connection_before = connection_before  # type: ignore[method-assign]
    await client.start()
    client.request_metadata_update()
    await asyncio.wait_for(conn.waiting.wait(), 5)
    await asyncio.sleep(0.01)  # the loop's request is now waiting for its answer

    async def close_as_the_answer_arrives() -> None:
        conn.gate.set_result(None)
        await client.close()  # cancels the loop before it sees the answer

    started = time.monotonic()
    try:
        await _aio.wait_for(close_as_the_answer_arrives(), 10)
    except asyncio.TimeoutError:
        pytest.fail("KafkaClient.close() hung: the metadata loop swallowed its cancellation")
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"KafkaClient.close() took {elapsed:.1f}s"
    assert client._metadata_task is None
