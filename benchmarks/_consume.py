"""Consume workers: one client, one loop, one topic read from the start in a fresh process.

Loops (``client:path``):

* ``aiokafka_lite:getmany`` and ``aiokafka:getmany``: ``await consumer.getmany(
  timeout_ms=1000, max_records=10000)`` and a loop over each partition's records;
* ``aiokafka_lite:iter`` and ``aiokafka:iter``: ``async for record in consumer``;
* ``confluent_kafka:consume``: ``consumer.consume(num_messages=..., timeout=1.0)``
  (asking for at most the records still missing: it waits until it has that many);
* ``confluent_kafka:poll``: ``consumer.poll(1.0)``, one message per call;
* ``kafka_python:poll``: ``consumer.poll(timeout_ms=1000, max_records=10000)``.

Each consumer is assigned every partition of the topic (``assign``; no group: Tansu
holds a new group's first join for half the session timeout, 22.5 s with ours and
confluent-kafka's default of 45 s, which would dominate the run's wall time, not its
measurement; bench_group.py times group joins), reads from the earliest offset, commits
nothing, and for every record reads its key, value and every header's value (adding up
their lengths, so nothing is left unread), as an application does. The topic holds
more records than are read (bench_workloads.FILL_FACTOR), so no partition runs dry.

confluent-kafka runs with ``fetch.queue.backoff.ms=10``: its default of 1000 ms pauses
fetching for a second whenever its prefetch queue is full, a stall no other client has;
and it is connected (``list_topics``) before ``assign()``, as the asyncio clients are by
``start()`` (without it, its first record comes ~0.5 s later).

The clock (and the CPU time, all threads of the process) runs from just before the
first poll, with the consumer started and assigned, to the end of the last record's
handling: the fetching a client does in background threads before handing out its first
record is inside it (librdkafka starts fetching at ``assign()``, just before the clock
starts). Connecting to the bootstrap broker is not; the first fetch round trips and the
offset lookup for ``earliest`` are (tens of ms on Tansu). The time to the first record
is reported on the side (``first_record_s``).
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from typing import Any

import _harness as h

MAX_RECORDS = 10_000
DEADLINE_S = 600

RUNNERS = (
    ("aiokafka_lite", "getmany"),
    ("aiokafka_lite", "iter"),
    ("aiokafka", "getmany"),
    ("aiokafka", "iter"),
    ("confluent_kafka", "consume"),
    ("confluent_kafka", "poll"),
    ("kafka_python", "poll"),
)
#: The batch loops, measured on every workload; the per-record loops (iter, poll) on
#: the workloads named in bench_workloads.PER_RECORD_LOOPS only.
BATCH_LOOPS = ("getmany", "consume")
DEFAULT_CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka")
LABELS = {
    "aiokafka_lite:getmany": "ours getmany()",
    "aiokafka_lite:iter": "ours async for",
    "aiokafka:getmany": "aiokafka getmany()",
    "aiokafka:iter": "aiokafka async for",
    "confluent_kafka:consume": "confluent-kafka consume()",
    "confluent_kafka:poll": "confluent-kafka poll()",
    "kafka_python:poll": "kafka-python poll()",
}


def read_records(records: Any) -> int:
    """Read every record's key, value and header values, as an application does; the
    bytes read (so that nothing is left unread)."""
    touched = 0
    for record in records:
        key = record.key
        touched += len(record.value)
        if key is not None:
            touched += len(key)
        for _name, value in record.headers:
            touched += len(value)
    return touched


class _Tally:
    """Records read and bytes touched, timed from the first poll to the last record."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.touched = 0
        self.start = h.stamp()
        self.first: h.Stamp | None = None
        self.last: h.Stamp | None = None
        self.deadline = time.monotonic() + DEADLINE_S

    def wanted(self) -> bool:
        return self.count < self.total and time.monotonic() < self.deadline

    def result(self, rss_start: float) -> dict[str, Any]:
        if self.first is None or self.last is None or self.count < self.total:
            return {"error": f"read {self.count}/{self.total} records"}
        result = h.throughput(self.count, self.start, self.last)
        result["first_record_s"] = self.first.wall - self.start.wall
        result["bytes_touched"] = self.touched
        result["rss_start_mib"] = round(rss_start, 1)
        result["rss_peak_mib"] = round(h.peak_rss_mib(), 1)
        result["rss_growth_mib"] = round(result["rss_peak_mib"] - rss_start, 1)
        return result


async def _asyncio_client(spec: dict[str, Any]) -> dict[str, Any]:
    client, path = spec["client"], spec["path"]
    compiled = None
    if client == "aiokafka_lite":
        from aiokafka_lite import accel
        from aiokafka_lite.consumer import Consumer as consumer_class
        from aiokafka_lite.structs import TopicPartition

        compiled = accel.COMPILED
    else:
        from aiokafka import AIOKafkaConsumer as consumer_class  # type: ignore[assignment]
        from aiokafka import TopicPartition  # type: ignore[assignment]
    consumer: Any = consumer_class(
        bootstrap_servers=spec["bootstrap"],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=MAX_RECORDS,
    )
    await consumer.start()
    tps = [TopicPartition(spec["topic"], p) for p in range(spec["partitions"])]
    consumer.assign(tps)
    if client == "aiokafka":
        await consumer.seek_to_beginning(*tps)
    gc.collect()
    rss_start = h.rss_mib()
    tally = _Tally(spec["records"])
    try:
        if path == "getmany":
            getmany = consumer.getmany
            while tally.wanted():
                batch = await getmany(timeout_ms=1000, max_records=MAX_RECORDS)
                if not batch:
                    continue
                if tally.first is None:
                    tally.first = h.stamp()
                touched = 0
                count = 0
                for records in batch.values():
                    touched += read_records(records)
                    count += len(records)
                tally.count += count
                tally.touched += touched
                tally.last = h.stamp()
        elif path == "iter":

            async def read_all() -> None:
                touched = 0
                count = 0
                total = tally.total
                async for record in consumer:
                    if count == 0:
                        tally.first = h.stamp()
                    # read_records' reading, inline: a call per record would be measured
                    key = record.key
                    touched += len(record.value)
                    if key is not None:
                        touched += len(key)
                    for _name, value in record.headers:
                        touched += len(value)
                    count += 1
                    if count >= total:
                        break
                tally.last = h.stamp()
                tally.count = count
                tally.touched = touched

            try:
                await asyncio.wait_for(read_all(), DEADLINE_S)
            except asyncio.TimeoutError:
                pass
        else:
            raise SystemExit(f"unknown path {path}")
    finally:
        await consumer.stop()
    result = tally.result(rss_start)
    if compiled is not None and "error" not in result:
        result["compiled"] = compiled
    return result


def _confluent(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": f"bench-confluent-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    # Connected, with the topic's metadata, before the clock starts, as the asyncio
    # clients are once start() returns (without it, the first record comes ~0.5 s later).
    consumer.list_topics(spec["topic"], timeout=30)
    consumer.assign(
        [TopicPartition(spec["topic"], p, OFFSET_BEGINNING) for p in range(spec["partitions"])]
    )
    gc.collect()
    rss_start = h.rss_mib()
    tally = _Tally(spec["records"])
    try:
        if spec["path"] == "consume":
            consume = consumer.consume
            while tally.wanted():
                messages = consume(
                    num_messages=min(MAX_RECORDS, tally.total - tally.count), timeout=1.0
                )
                if not messages:
                    continue
                if tally.first is None:
                    tally.first = h.stamp()
                touched = 0
                count = 0
                for message in messages:
                    if message.error():
                        continue
                    key = message.key()
                    touched += len(message.value())
                    if key is not None:
                        touched += len(key)
                    headers = message.headers()
                    if headers:
                        for _name, value in headers:
                            touched += len(value)
                    count += 1
                tally.count += count
                tally.touched += touched
                tally.last = h.stamp()
        else:
            poll = consumer.poll
            touched = 0
            count = 0
            total = tally.total
            deadline = tally.deadline
            while count < total:
                message = poll(1.0)
                if message is None:
                    if time.monotonic() > deadline:
                        break
                    continue
                if message.error():
                    continue
                if count == 0:
                    tally.first = h.stamp()
                key = message.key()
                touched += len(message.value())
                if key is not None:
                    touched += len(key)
                headers = message.headers()
                if headers:
                    for _name, value in headers:
                        touched += len(value)
                count += 1
            tally.last = h.stamp()
            tally.count = count
            tally.touched = touched
    finally:
        consumer.close()
    return tally.result(rss_start)


def _kafka_python(spec: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=MAX_RECORDS,
    )
    tps = [TopicPartition(spec["topic"], p) for p in range(spec["partitions"])]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    gc.collect()
    rss_start = h.rss_mib()
    tally = _Tally(spec["records"])
    try:
        while tally.wanted():
            batch = consumer.poll(timeout_ms=1000, max_records=MAX_RECORDS)
            if not batch:
                continue
            if tally.first is None:
                tally.first = h.stamp()
            for records in batch.values():
                for record in records:
                    key = record.key
                    tally.touched += len(record.value)
                    if key is not None:
                        tally.touched += len(key)
                    for _name, value in record.headers:
                        tally.touched += len(value)
                tally.count += len(records)
            tally.last = h.stamp()
    finally:
        consumer.close()
    return tally.result(rss_start)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    client = spec["client"]
    if client in ("aiokafka_lite", "aiokafka"):
        return asyncio.run(_asyncio_client(spec))
    if client == "confluent_kafka":
        return _confluent(spec)
    if client == "kafka_python":
        return _kafka_python(spec)
    raise SystemExit(f"unknown client {client}")
