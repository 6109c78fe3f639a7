"""Lifecycle hygiene of the producer, the consumer and the admin client: a started one
that is garbage-collected without being stopped warns (ResourceWarning), and one that
was stopped cannot be started again."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition


def _resource_warnings(make: Callable[[], Coroutine[Any, Any, object]]) -> list[str]:
    """The ResourceWarnings of this library raised when the object that ``make`` returns
    (built in a loop of its own, which then ends) is garbage-collected."""
    obj: object = asyncio.run(make())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del obj
        gc.collect()
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, ResourceWarning)
        and "unclosed" in str(w.message)
        and "transport" not in str(w.message)
        and "socket" not in str(w.message)
    ]


def test_unclosed_producer_warns_with_its_buffered_records(
    bootstrap_servers: str, create_topic: Callable[..., str], topic_name: str
) -> None:
    topic = create_topic(topic_name)

    async def left_open() -> Producer:
        # A long linger: the three records are still buffered when the loop ends.
        producer = Producer(bootstrap_servers=bootstrap_servers, linger_ms=60_000)
        await producer.start()
        for value in (b"a", b"b", b"c"):
            await producer.send(topic, value, partition=0)
        return producer

    [message] = _resource_warnings(left_open)
    assert message.startswith("unclosed producer") and "3 record(s) still buffered" in message


def test_stopped_producer_consumer_and_admin_do_not_warn(bootstrap_servers: str) -> None:
    async def stopped() -> list[object]:
        producer = Producer(bootstrap_servers=bootstrap_servers)
        consumer = Consumer(bootstrap_servers=bootstrap_servers)
        admin = AdminClient(bootstrap_servers)
        await producer.start()
        await consumer.start()
        await admin.start()
        await producer.stop()
        await consumer.stop()
        await admin.close()
        return [producer, consumer, admin, Producer(bootstrap_servers=bootstrap_servers)]

    assert _resource_warnings(stopped) == []


def test_unclosed_consumer_warns(bootstrap_servers: str) -> None:
    async def left_open() -> Consumer:
        consumer = Consumer(bootstrap_servers=bootstrap_servers)
        await consumer.start()
        return consumer

    [message] = _resource_warnings(left_open)
    assert message.startswith("unclosed consumer"), message


def test_unclosed_admin_client_warns(bootstrap_servers: str) -> None:
    async def left_open() -> AdminClient:
        admin = AdminClient(bootstrap_servers)
        await admin.start()
        return admin

    [message] = _resource_warnings(left_open)
    assert message.startswith("unclosed admin client"), message


async def test_start_after_stop_raises(bootstrap_servers: str) -> None:
    producer = Producer(bootstrap_servers=bootstrap_servers)
    await producer.start()
    await producer.stop()
    with pytest.raises(errors.IllegalStateError, match="cannot be started again"):
        await producer.start()

    consumer = Consumer(bootstrap_servers=bootstrap_servers)
    consumer.assign([TopicPartition("unused", 0)])
    await consumer.start()
    await consumer.stop()
    with pytest.raises(errors.IllegalStateError, match="cannot be started again"):
        await consumer.start()

    admin = AdminClient(bootstrap_servers)
    await admin.start()
    await admin.close()
    with pytest.raises(errors.IllegalStateError, match="cannot be started again"):
        await admin.start()
    with pytest.raises(errors.IllegalStateError, match="closed"):
        await admin.list_topics()
