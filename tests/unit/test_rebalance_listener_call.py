"""call_listener: a CancelledError a rebalance callback raises of its own is the
callback's failure; a cancellation of the task running it goes through. No broker."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.consumer.coordinator import call_listener
from aiokafka_lite.structs import TopicPartition

TP = TopicPartition("t", 0)


class _RaisesCancelled:
    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        raise asyncio.CancelledError()


class _PlainRaisesCancelled:
    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        raise asyncio.CancelledError()


class _Slow:
    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.started.set()
        await asyncio.sleep(30)


@pytest.mark.parametrize(
    ("listener", "name"),
    [
        (_RaisesCancelled(), "on_partitions_assigned"),
        (_PlainRaisesCancelled(), "on_partitions_revoked"),
    ],
)
async def test_a_callbacks_own_cancelled_error_is_a_runtime_error(
    listener: object, name: str
) -> None:
    with pytest.raises(RuntimeError, match=f"{name} raised CancelledError") as caught:
        await call_listener(listener, name, {TP}, lambda: False)
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)


async def test_while_stopping_a_cancelled_error_goes_through() -> None:
    with pytest.raises(asyncio.CancelledError):
        await call_listener(_RaisesCancelled(), "on_partitions_assigned", {TP}, lambda: True)


@pytest.mark.parametrize("flagged", [True, False])
async def test_cancelling_the_task_running_a_callback_cancels_it(flagged: bool) -> None:
    """As the coordinator stops (the flag set, then the task cancelled); where Python
    tells a task is being cancelled (3.11+), without the flag too."""
    if not flagged and not hasattr(asyncio.Task, "cancelling"):
        pytest.skip("Python < 3.11 cannot tell a task is being cancelled")
    stopping = False
    listener = _Slow()
    task = asyncio.create_task(
        call_listener(listener, "on_partitions_assigned", {TP}, lambda: stopping)
    )
    await listener.started.wait()
    stopping = flagged
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
