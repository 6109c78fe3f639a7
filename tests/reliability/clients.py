"""Client-side helpers for the security tests: confluent-kafka as the control, and ours."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "confluent_consume",
    "confluent_errors",
    "confluent_round_trip",
    "ours_consume",
    "ours_produce",
]


def confluent_round_trip(
    conf: dict[str, Any], topic: str, values: Sequence[bytes], timeout: float = 30.0
) -> list[bytes]:
    """Produce ``values`` with confluent-kafka, then read the topic back; return values read."""
    from confluent_kafka import Producer as CfProducer

    errors: list[Any] = []
    producer = CfProducer({**conf, "error_cb": errors.append, "message.timeout.ms": 20000})
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for value in values:
        producer.produce(topic, value, on_delivery=on_delivery)
    remaining = producer.flush(timeout)
    if remaining or failed:
        raise AssertionError(
            f"confluent-kafka could not deliver: {remaining} left, failed={failed}, errors={errors}"
        )
    return confluent_consume(conf, topic, len(values), timeout)


def confluent_consume(
    conf: dict[str, Any], topic: str, count: int, timeout: float = 30.0
) -> list[bytes]:
    """Read up to ``count`` values of ``topic`` from the beginning with confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaException
    from confluent_kafka import Consumer as CfConsumer
    from confluent_kafka import TopicPartition as CfTopicPartition

    consumer = CfConsumer(
        {
            **conf,
            "group.id": f"cf-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[bytes] = []
    try:
        # assign() rather than a group: no group join, just the partitions
        deadline = time.monotonic() + timeout
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        consumer.assign(
            [CfTopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(metadata.partitions)]
        )
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                continue
            value = msg.value()
            assert value is not None
            got.append(value)
    finally:
        consumer.close()
    return got


def confluent_errors(conf: dict[str, Any], timeout: float = 15.0) -> list[Any]:
    """Start a confluent-kafka producer, send one record, return the errors it reports.

    Returns once an error arrives or the record is delivered (then the list is empty).
    """
    from confluent_kafka import Producer as CfProducer

    errors: list[Any] = []
    delivered: list[Any] = []
    producer = CfProducer(
        {**conf, "error_cb": errors.append, "message.timeout.ms": int(timeout * 1000)}
    )
    producer.produce("probe", b"v", on_delivery=lambda err, _m: delivered.append(err))
    deadline = time.monotonic() + timeout
    while not errors and not delivered and time.monotonic() < deadline:
        producer.poll(0.1)
    if not errors and delivered and delivered[0] is not None:
        errors.append(delivered[0])
    return errors


async def ours_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], **options: Any
) -> list[tuple[int, int]]:
    """Produce with our idempotent producer; return ``(partition, offset)`` per value."""
    async with Producer(bootstrap_servers=bootstrap, enable_idempotence=True, **options) as p:
        futures = [await p.send(topic, v, key=v) for v in values]
        return [((md := await f).partition, md.offset) for f in futures]


async def ours_consume(
    bootstrap: str, topic: str, count: int, timeout_ms: int = 30000, **options: Any
) -> list[bytes]:
    """Read ``count`` records of ``topic`` from the beginning (no group); return values."""
    got: list[bytes] = []
    async with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options
    ) as consumer:
        partitions = await consumer.topics()
        assert topic in partitions, f"{topic} not in {partitions}"
        parts = consumer.partitions_for_topic(topic) or set()
        consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        deadline = time.monotonic() + timeout_ms / 1000
        while len(got) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                got.extend(r.value for r in records if r.value is not None)
    return got
