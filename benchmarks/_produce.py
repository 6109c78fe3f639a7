"""Produce workers: one client, one path, one workload, timed in a fresh process.

Paths (``client:path``):

* ``aiokafka_lite:send`` and ``aiokafka:send``: one ``await producer.send(...)`` per
  record, keyword arguments as an application writes them, then ``flush()``;
* ``aiokafka_lite:many``: ``send_many()``, 1,000 records per call (only where the
  records carry no headers of their own: ``send_many`` takes one headers list for all);
* ``aiokafka_lite:batch`` and ``aiokafka:batch``: caller-built batches. The caller keeps
  one open batch per partition (``create_batch()``), picks the partition from the key
  with the client's own murmur2 function (Kafka's default placement), appends, and
  hands a full batch to ``send_batch()``; what is left is sent at the end;
* ``confluent_kafka:produce``: the ``produce()`` loop (``poll`` only when its queue is
  full), then ``flush()``; delivery reports for errors only
  (``delivery.report.only.error``), so no Python callback runs per record;
* ``kafka_python:send``: ``send()`` per record, then ``flush()`` (not in the default set).

Every client gets the same settings: acks=1, linger 5 ms, the case's batch size and
codec, the client's default partitioner with Kafka's murmur2 placement (confluent-kafka
is set to ``murmur2_random``, librdkafka's default being CRC32-based), 32 MiB of buffer
where the client has such a bound (ours: ``buffer_memory``; confluent-kafka:
``queue.buffering.max.kbytes``; aiokafka and kafka-python 3 have none).

The clock runs from the first record handed to the client until ``flush()`` returns
(every record acknowledged), after one warm-up record (partition 0) that connects and
loads metadata, and after the workload's records were generated and a ``gc.collect()``.
CPU is the process's CPU time (all threads: librdkafka's too) over the same interval,
divided by the records.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import _harness as h
import _workloads as w

LINGER_MS = 5
ACKS = 1
BUFFER_MEMORY = 32 * 1024 * 1024
MANY_CHUNK = 1000

#: (client, path) in table order; kafka-python only when asked for.
RUNNERS = (
    ("aiokafka_lite", "send"),
    ("aiokafka_lite", "many"),
    ("aiokafka_lite", "batch"),
    ("aiokafka", "send"),
    ("aiokafka", "batch"),
    ("confluent_kafka", "produce"),
    ("kafka_python", "send"),
)
DEFAULT_CLIENTS = ("aiokafka_lite", "aiokafka", "confluent_kafka")
LABELS = {
    "aiokafka_lite:send": "ours await send()",
    "aiokafka_lite:many": "ours send_many()",
    "aiokafka_lite:batch": "ours caller-built batches",
    "aiokafka:send": "aiokafka await send()",
    "aiokafka:batch": "aiokafka caller-built batches",
    "confluent_kafka:produce": "confluent-kafka produce() loop",
    "kafka_python:send": "kafka-python send()",
}


def not_applicable(client: str, path: str, wl: w.Workload) -> str | None:
    """Why a path cannot send this workload as it is (None: it can)."""
    if path == "many" and wl.headers:
        return "send_many takes one headers list for all records; these carry their own"
    return None


def _finish(
    total: int, start: h.Stamp, end: h.Stamp, rss_start: float, **extra: Any
) -> dict[str, Any]:
    result = h.throughput(total, start, end)
    result["rss_start_mib"] = round(rss_start, 1)
    result["rss_peak_mib"] = round(h.peak_rss_mib(), 1)
    # What the client added while sending (the records were made before): the peak is
    # the process's high-water mark, so this is exact only if the peak came after the
    # start, which the records' generation before it makes likely, not certain.
    result["rss_growth_mib"] = round(result["rss_peak_mib"] - rss_start, 1)
    result.update(extra)
    return result


async def _asyncio_client(spec: dict[str, Any]) -> dict[str, Any]:
    client, path, topic = spec["client"], spec["path"], spec["topic"]
    wl = w.workload(spec["workload"])
    total = spec["records"]
    records = w.records(wl.name, total)
    partitions = wl.partitions
    fixed = 0 if wl.fixed_partition else None
    compiled = None
    if client == "aiokafka_lite":
        from aiokafka_lite import accel
        from aiokafka_lite.producer import Producer as producer_class
        from aiokafka_lite.producer.partitioner import murmur2_partition

        compiled = accel.COMPILED
        extra: dict[str, Any] = {"buffer_memory": BUFFER_MEMORY}

        def partition_of(key: bytes) -> int:
            return murmur2_partition(key, partitions)

        partition_for = partition_of
    else:
        from aiokafka import AIOKafkaProducer as producer_class  # type: ignore[assignment]
        from aiokafka.partitioner import murmur2

        extra = {}

        def partition_of_aiokafka(key: bytes) -> int:
            return int((murmur2(key) & 0x7FFFFFFF) % partitions)

        partition_for = partition_of_aiokafka
    codec = spec["codec"]
    producer: Any = producer_class(
        bootstrap_servers=spec["bootstrap"],
        acks=ACKS,
        linger_ms=LINGER_MS,
        max_batch_size=spec["batch_size"],
        compression_type=None if codec == "none" else codec,
        **extra,
    )
    await producer.start()
    try:
        k0, v0, h0 = records[0]
        await producer.send_and_wait(topic, v0, key=k0, partition=0, headers=h0)
        if path == "many":
            values = [v for _, v, _ in records]
            keys = [k for k, _, _ in records] if wl.keyed else None
            chunks = [
                (values[i : i + MANY_CHUNK], keys[i : i + MANY_CHUNK] if keys else None)
                for i in range(0, total, MANY_CHUNK)
            ]
        gc.collect()
        rss_start = h.rss_mib()
        start = h.stamp()
        if path == "send":
            send = producer.send
            for key, value, headers in records:
                fut = await send(topic, value, key=key, partition=fixed, headers=headers)
            await producer.flush()
            last: Any = fut.result()
        elif path == "many":
            send_many = producer.send_many
            for chunk_values, chunk_keys in chunks:
                if chunk_keys is None:
                    futures = await send_many(topic, chunk_values, partition=fixed)
                else:
                    futures = await send_many(topic, chunk_values, keys=chunk_keys)
            await producer.flush()
            last = futures[-1].result()
        elif path == "batch":
            create_batch = producer.create_batch
            send_batch = producer.send_batch
            open_batches: dict[int, Any] = {}
            pending = []
            for key, value, headers in records:
                p = 0 if key is None else partition_for(key)
                batch = open_batches.get(p)
                if batch is None:
                    batch = open_batches[p] = create_batch()
                if headers is None:
                    appended = batch.append(key=key, value=value, timestamp=None)
                else:
                    appended = batch.append(key=key, value=value, timestamp=None, headers=headers)
                if appended is None:
                    batch.close()
                    pending.append(await send_batch(batch, topic, partition=p))
                    batch = open_batches[p] = create_batch()
                    if headers is None:
                        batch.append(key=key, value=value, timestamp=None)
                    else:
                        batch.append(key=key, value=value, timestamp=None, headers=headers)
            for p, batch in open_batches.items():
                if batch.record_count():
                    batch.close()
                    pending.append(await send_batch(batch, topic, partition=p))
            await producer.flush()
            last = await pending[-1]
        else:
            raise SystemExit(f"unknown path {path}")
        end = h.stamp()
        return _finish(total, start, end, rss_start, compiled=compiled, last_offset=last.offset)
    finally:
        await producer.stop()


def _confluent(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    wl = w.workload(spec["workload"])
    total = spec["records"]
    records = w.records(wl.name, total)
    topic = spec["topic"]
    failures: list[Any] = []

    def on_error(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer: Any = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "acks": ACKS,
            "linger.ms": LINGER_MS,
            "batch.size": spec["batch_size"],
            "compression.type": spec["codec"],
            "queue.buffering.max.kbytes": BUFFER_MEMORY // 1024,
            "partitioner": "murmur2_random",
            "on_delivery": on_error,
            "delivery.report.only.error": True,
        }
    )
    k0, v0, h0 = records[0]
    producer.produce(topic, v0, k0, partition=0, headers=h0)
    producer.flush(30)
    produce = producer.produce
    poll = producer.poll
    gc.collect()
    rss_start = h.rss_mib()
    start = h.stamp()
    if wl.fixed_partition:
        for key, value, headers in records:
            while True:
                try:
                    produce(topic, value, key, partition=0, headers=headers)
                    break
                except BufferError:
                    poll(0.001)
    else:
        for key, value, headers in records:
            while True:
                try:
                    produce(topic, value, key, headers=headers)
                    break
                except BufferError:
                    poll(0.001)
    remaining = producer.flush(300)
    end = h.stamp()
    if remaining or failures:
        return {"error": f"{remaining} undelivered, {len(failures)} failed: {failures[:1]}"}
    return _finish(total, start, end, rss_start)


def _kafka_python(spec: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaProducer

    wl = w.workload(spec["workload"])
    total = spec["records"]
    records = w.records(wl.name, total)
    topic = spec["topic"]
    codec = spec["codec"]
    producer = KafkaProducer(
        bootstrap_servers=spec["bootstrap"],
        acks=ACKS,
        linger_ms=LINGER_MS,
        batch_size=spec["batch_size"],
        compression_type=None if codec == "none" else codec,
    )
    fixed = 0 if wl.fixed_partition else None
    try:
        k0, v0, h0 = records[0]
        producer.send(topic, v0, key=k0, partition=0, headers=h0).get(timeout=30)
        send = producer.send
        gc.collect()
        rss_start = h.rss_mib()
        start = h.stamp()
        for key, value, headers in records:
            fut = send(topic, value, key=key, partition=fixed, headers=headers)
        producer.flush(300)
        end = h.stamp()
        return _finish(total, start, end, rss_start, last_offset=fut.get(timeout=1).offset)
    finally:
        producer.close(10)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    client = spec["client"]
    if client in ("aiokafka_lite", "aiokafka"):
        return asyncio.run(_asyncio_client(spec))
    if client == "confluent_kafka":
        return _confluent(spec)
    if client == "kafka_python":
        return _kafka_python(spec)
    raise SystemExit(f"unknown client {client}")
