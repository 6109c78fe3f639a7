"""Verifiers: read a topic back three ways and count every record.

* :func:`read_confluent`: confluent-kafka (librdkafka), the peer nobody here wrote;
* :func:`read_ours`: our consumer, assigned every partition from the beginning;
* :func:`read_raw`: Fetch requests on one plain connection, every batch decoded with
  ``protocol.records`` including control batches. :func:`committed_view` then drops the
  records of aborted transactions from the markers themselves, which gives the
  read_committed view even from a broker that does not filter aborted records.

Records are ``(offset, value)`` pairs per partition. :func:`count_sequences` compares
what the log holds with what was sent.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.connection import BrokerConnection, connect
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.protocol import records
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "Counts",
    "RawRecord",
    "committed_view",
    "count_sequences",
    "count_values",
    "read_confluent",
    "read_ours",
    "read_raw",
]

Log = dict[int, list[tuple[int, bytes | None]]]


def read_confluent(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    *,
    isolation: str = "read_uncommitted",
    timeout: float = 120.0,
) -> Log:
    """Every record of ``partitions``, read with confluent-kafka until each reports EOF."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError
    from confluent_kafka import Consumer as CfConsumer
    from confluent_kafka import TopicPartition as CfTopicPartition

    consumer = CfConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-verifier",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.max.bytes": 16 << 20,
        }
    )
    wanted = sorted(partitions)
    out: Log = {p: [] for p in wanted}
    at_eof: set[int] = set()
    try:
        consumer.assign([CfTopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        deadline = time.monotonic() + timeout
        while at_eof != set(wanted):
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent-kafka did not reach the end of {topic}: {at_eof}")
            for msg in consumer.consume(10000, 0.5):
                err = msg.error()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof.add(partition)
                        continue
                    raise RuntimeError(f"confluent-kafka read error: {err}")
                assert offset is not None
                at_eof.discard(partition)
                out[partition].append((offset, msg.value()))
    finally:
        consumer.close()
    return out


async def read_ours(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    *,
    isolation: str = "read_uncommitted",
    timeout: float = 120.0,
) -> Log:
    """Every record of ``partitions``, read with our consumer up to the end offsets."""
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    out: Log = {tp.partition: [] for tp in tps}
    async with Consumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=10000,
    ) as consumer:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"our consumer stopped short of the end: {positions} < {ends}")
            batches = await consumer.getmany(timeout_ms=500)
            for tp, recs in batches.items():
                out[tp.partition].extend((r.offset, r.value) for r in recs)
    return out


@dataclass(frozen=True)
class RawRecord:
    offset: int
    value: bytes | None
    producer_id: int
    transactional: bool
    #: ``"COMMIT"`` / ``"ABORT"`` for a transaction marker, else None.
    control: str | None


async def read_raw(
    bootstrap: str, topic: str, partitions: Iterable[int], *, timeout: float = 120.0
) -> dict[int, list[RawRecord]]:
    """Every batch of ``partitions`` (control batches included), decoded one by one, each
    partition fetched from its leader (as the metadata names it)."""
    host, _, port = bootstrap.rpartition(":")
    conns: dict[tuple[str, int], BrokerConnection] = {}
    out: dict[int, list[RawRecord]] = {p: [] for p in partitions}

    async def conn_to(address: tuple[str, int]) -> BrokerConnection:
        if address not in conns:
            conns[address] = await connect(*address, client_id="chaos-raw-verifier")
        return conns[address]

    try:
        meta = await (await conn_to((host, int(port)))).send(
            int(ApiKey.METADATA),
            {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
            version=9,
        )
        nodes = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
        [t] = meta["topics"]
        leaders = {p["partition_index"]: nodes[p["leader_id"]] for p in t["partitions"]}
        deadline = time.monotonic() + timeout
        for partition in out:
            conn = await conn_to(leaders[partition])
            offset = 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError("raw read did not finish")
                response = await conn.send(
                    int(ApiKey.FETCH), _fetch_body(topic, partition, offset), version=12
                )
                [t] = response["responses"]
                [p] = t["partitions"]
                if p["error_code"]:
                    raise RuntimeError(f"fetch {topic}/{partition}: error {p['error_code']}")
                blob = p["records"] or b""
                for batch in records.iter_batches(blob):
                    for rec in _raw_records(batch):
                        if rec.offset >= offset:
                            out[partition].append(rec)
                    offset = max(offset, batch.next_offset)
                if offset >= p["high_watermark"]:
                    break
                if not blob:
                    await asyncio.sleep(0.05)
    finally:
        for conn in conns.values():
            conn.close()
            await conn.wait_closed()
    return out


def _fetch_body(topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 100,
        "min_bytes": 1,
        "max_bytes": 8 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 4 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


def _raw_records(batch: records.Batch) -> list[RawRecord]:
    if not isinstance(batch, records.RecordBatch):
        return [RawRecord(r.offset, r.value, -1, False, None) for r in batch.records()]
    if batch.is_control:
        marker = batch.control_record()
        assert marker is not None
        kind = records.ControlRecordType(marker.type).name
        return [RawRecord(batch.base_offset, None, batch.producer_id, True, kind)]
    return [
        RawRecord(r.offset, r.value, batch.producer_id, batch.is_transactional, None)
        for r in batch.records()
    ]


def committed_view(raw: Mapping[int, Sequence[RawRecord]]) -> Log:
    """The read_committed view, computed from the markers: aborted records dropped.

    A transactional record belongs to its producer's transaction that the next marker
    of that producer in the partition ends; records with no marker yet are not visible.
    """
    out: Log = {}
    for partition, recs in raw.items():
        visible: list[tuple[int, bytes | None]] = []
        open_txn: dict[int, list[tuple[int, bytes | None]]] = {}
        for rec in recs:
            if rec.control is not None:
                pending = open_txn.pop(rec.producer_id, [])
                if rec.control == "COMMIT":
                    visible.extend(pending)
            elif rec.transactional:
                open_txn.setdefault(rec.producer_id, []).append((rec.offset, rec.value))
            else:
                visible.append((rec.offset, rec.value))
        out[partition] = sorted(visible)
    return out


@dataclass
class Counts:
    expected: int
    found: int = 0
    verified: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    unexpected: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def count_sequences(
    log: Mapping[int, Sequence[tuple[int, bytes | None]]], sent: Mapping[int, Sequence[bytes]]
) -> Counts:
    """Compare a log with the values sent to each partition, in send order.

    ``verified``: distinct sent values found; ``lost``: sent values missing;
    ``duplicated``: extra copies; ``out_of_order``: values found after a value sent later.
    """
    counts = Counts(expected=sum(len(v) for v in sent.values()))
    for partition, values in sent.items():
        order = {v: i for i, v in enumerate(values)}
        found = [value for _, value in log.get(partition, [])]
        counts.found += len(found)
        seen: Counter[bytes] = Counter()
        last = -1
        for value in found:
            if value is None or value not in order:
                counts.unexpected += 1
                counts.note(f"p{partition}: unexpected value {value!r}")
                continue
            seen[value] += 1
            if seen[value] > 1:
                counts.duplicated += 1
                counts.note(f"p{partition}: duplicate {value!r}")
                continue
            if order[value] < last:
                counts.out_of_order += 1
                counts.note(f"p{partition}: {value!r} after a later record")
            last = max(last, order[value])
        counts.verified += len(seen)
        missing = [v for v in values if v not in seen]
        counts.lost += len(missing)
        for value in missing[:3]:
            counts.note(f"p{partition}: lost {value!r}")
    return counts


def count_values(found: Iterable[bytes | None], expected: Iterable[bytes]) -> Counts:
    """Like :func:`count_sequences` without an order: each expected value exactly once."""
    wanted = set(expected)
    counts = Counts(expected=len(wanted))
    seen: Counter[bytes] = Counter()
    for value in found:
        counts.found += 1
        if value is None or value not in wanted:
            counts.unexpected += 1
            counts.note(f"unexpected value {value!r}")
            continue
        seen[value] += 1
        if seen[value] > 1:
            counts.duplicated += 1
            counts.note(f"duplicate {value!r}")
    counts.verified = len(seen)
    counts.lost = len(wanted - set(seen))
    for value in sorted(wanted - set(seen))[:3]:
        counts.note(f"lost {value!r}")
    return counts
