"""Helpers for the producer's integration tests (a peer consumer to check what landed).

The records a test produced are read back with confluent-kafka's consumer, an
independent implementation, so a test cannot pass by our producer and our decoder
agreeing on the same mistake. The module has no tests of its own.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkTopicPartition

__all__ = ["PeerRecord", "read_all"]

PeerRecord = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]], int]


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    *,
    isolation: str = "read_uncommitted",
    timeout: float = 20.0,
    expect: int | None = None,
) -> dict[int, list[PeerRecord]]:
    """Every record of ``topic`` per partition: (partition, offset, key, value, headers, ts).

    Reads until every partition reached its end (and ``expect`` records, if given).
    """
    consumer: Any = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"peer-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[PeerRecord]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            total = sum(len(v) for v in out.values())
            if len(at_end) == partitions and (expect is None or total >= expect):
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise RuntimeError(f"peer consumer error: {err}")
            at_end.discard(msg.partition())
            out[msg.partition()].append(
                (
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    list(msg.headers() or []),
                    msg.timestamp()[1],
                )
            )
        return out
    finally:
        consumer.close()
