"""Chaos scenarios for the delivery contract: records the application cannot read, bytes
damaged on the way, and a broker that loses what it acknowledged.

* ``poison``: JSON records with some that are not JSON, read by a consumer group with
  auto-commit that dead-letters each bad record and moves past it, stopped halfway and
  followed by a second member. Every good record must reach the application once, each
  bad one must be reported by offset, and no commit may pass a record not handed over.
* ``corruption``: one bit flipped inside a record value in every third Fetch response
  (the TCP proxy in front of Tansu): every record must arrive once, none lost.
* ``lost-writes``: an idempotent acks=all stream to noida-db, killed with SIGKILL and
  restarted on its data directory. noida-db 0.2.3 comes back without some records it had
  acknowledged; the application must be told (``AcknowledgedDataLostError``). "lost" in
  the table counts acknowledged records missing from the log that no error reported.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.consumer import Consumer, RecordDeserializationError
from aiokafka_lite.producer import Producer, RecordFuture
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import EmbeddedBroker, proxied_broker
from tests.chaos.scenarios import ScenarioResult, Size, create_topic

PARTITIONS = 6


def _name(kind: str) -> str:
    return f"chaos-{kind}-{uuid.uuid4().hex[:8]}"


def _consumer(bootstrap: str, **options: Any) -> Consumer:
    return Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10000,
        **options,
    )


# --- poison pills -------------------------------------------------------------------


async def scenario_poison(size: Size, *, bootstrap_servers: str | None = None) -> ScenarioResult:
    if bootstrap_servers is None:
        with EmbeddedBroker("tansu") as broker:
            return await _poison(size, broker.bootstrap_servers)
    return await _poison(size, bootstrap_servers)


async def _poison(size: Size, bootstrap: str) -> ScenarioResult:
    started = time.monotonic()
    rnd = random.Random(size.seed)
    total = size.delivery_records
    topic = _name("poison")
    create_topic(bootstrap, topic, PARTITIONS)
    # About one in a thousand is not JSON, and the very first and very last records.
    poison = {i for i in range(total) if rnd.random() < 0.001} | {0, total - 1}
    where: dict[int, tuple[int, int]] = {}  # record number -> (partition, offset)
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, acks="all") as producer:
        futures = []
        for i in range(total):
            value = b"{not json %d" % i if i in poison else json.dumps({"n": i}).encode()
            futures.append(await producer.send(topic, value, partition=i % PARTITIONS))
        for i, md in enumerate(await asyncio.gather(*futures)):
            where[i] = (md.partition, md.offset)
    by_position = {pos: i for i, pos in where.items()}
    bad_positions = {where[i] for i in poison}

    group = _name("group")
    delivered: list[int] = []
    reported: list[tuple[int, int]] = []
    commit_violations: list[str] = []

    async def member(stop_after: int | None) -> None:
        consumer = _consumer(
            bootstrap,
            group_id=group,
            value_deserializer=json.loads,
            auto_commit_interval_ms=200,
        )
        consumer.subscribe([topic])
        async with consumer:
            deadline = time.monotonic() + 120
            while len(delivered) + len(reported) < total:
                if stop_after is not None and len(delivered) >= stop_after:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"stuck: {consumer.health()}")
                try:
                    batch = await consumer.getmany(timeout_ms=500, max_records=333)
                except RecordDeserializationError as exc:
                    assert exc.topic is not None and exc.partition is not None
                    assert exc.offset is not None
                    reported.append((exc.partition, exc.offset))
                    consumer.seek(TopicPartition(exc.topic, exc.partition), exc.offset + 1)
                    continue
                for records in batch.values():
                    delivered.extend(r.value["n"] for r in records)
        # stop() committed the positions: none may pass a record nobody saw.
        async with _consumer(bootstrap, group_id=group) as check:
            for p in range(PARTITIONS):
                tp = TopicPartition(topic, p)
                committed = await check.committed(tp)
                seen = {o for (pp, o) in (where[i] for i in delivered) if pp == p}
                seen |= {o for (pp, o) in reported if pp == p}
                first_unseen = 0
                while first_unseen in seen:
                    first_unseen += 1
                if committed is not None and committed > first_unseen:
                    commit_violations.append(
                        f"{tp}: committed {committed} past unseen offset {first_unseen}"
                    )

    await member(stop_after=total // 2)  # stopped halfway: a second member goes on
    await member(stop_after=None)

    counts: dict[int, int] = {}
    for n in delivered:
        counts[n] = counts.get(n, 0) + 1
    good = set(range(total)) - poison
    lost = len(good - set(counts))
    duplicated = sum(c - 1 for c in counts.values())
    failures = list(commit_violations)
    wrong = [by_position.get(pos) for pos in reported if pos not in bad_positions]
    if wrong:
        failures.append(f"reported good records as bad: {wrong[:5]}")
    if set(reported) != bad_positions:
        failures.append(f"bad records not reported: {sorted(bad_positions - set(reported))[:5]}")
    if set(counts) & poison:
        failures.append("a bad record was handed over")
    if lost:
        failures.append(f"{lost} good records never delivered")
    if duplicated:
        failures.append(f"{duplicated} records delivered twice")
    return ScenarioResult(
        name="poison pill",
        sent=total,
        verified=len(set(counts) & good) + len(set(reported)),
        lost=lost,
        duplicated=duplicated,
        duplicates_promised_zero=True,
        max_recovery_s=None,
        faults=len(poison),
        seconds=time.monotonic() - started,
        failures=failures,
        details={"bad_records": len(poison), "reported": len(reported)},
    )


# --- corruption in transit ------------------------------------------------------------


class _FlipInValues:
    """A proxy hook: in every ``every``-th response that carries records (the first
    included), one bit of a random record value (inside a batch's CRC) is flipped.
    Frames are reassembled first, so a value split between two reads is found all the
    same."""

    def __init__(self, seed: int, every: int = 3) -> None:
        self._rnd = random.Random(seed)
        self._every = every
        self._pending: dict[int, bytearray] = {}
        self._lock = threading.Lock()
        self._responses = 0
        self.flips = 0

    def __call__(self, link: int, direction: str, data: bytes) -> bytes:
        if direction != "downstream":
            return data
        with self._lock:
            buf = self._pending.setdefault(link, bytearray())
            buf += data
            out = bytearray()
            while len(buf) >= 4:
                size = int.from_bytes(buf[:4], "big")
                if len(buf) < 4 + size:
                    break
                frame = bytearray(buf[: 4 + size])
                del buf[: 4 + size]
                at = frame.find(b"rec-")
                if at >= 0:
                    self._responses += 1
                if at >= 0 and self._responses % self._every == 1:
                    hits = []
                    while at >= 0 and len(hits) < 64:
                        hits.append(at)
                        at = frame.find(b"rec-", at + 1)
                    frame[self._rnd.choice(hits) + 4 + self._rnd.randrange(8)] ^= 1 << (
                        self._rnd.randrange(8)
                    )
                    self.flips += 1
                out += frame
            return bytes(out)


async def scenario_corruption(size: Size) -> ScenarioResult:
    started = time.monotonic()
    total = size.delivery_records
    topic = _name("corrupt")
    with proxied_broker() as (proxy, bootstrap):
        create_topic(bootstrap, topic, PARTITIONS)
        async with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            futures = [
                await producer.send(topic, b"rec-%08d" % i + b"." * (i % 50), partition=i % 6)
                for i in range(total)
            ]
            await asyncio.gather(*futures)
        hook = _FlipInValues(size.seed)
        proxy.set_hook(hook)
        got: list[int] = []
        raised = 0
        consumer = _consumer(bootstrap, max_partition_fetch_bytes=4096, fetch_max_bytes=8192)
        async with consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 180
            while len(got) < total and time.monotonic() < deadline:
                try:
                    batch = await consumer.getmany(timeout_ms=500)
                except errors.CorruptRecordError:
                    raised += 1  # damaged twice in a row at one offset: read on
                    continue
                for records in batch.values():
                    got.extend(int(r.value[4:12]) for r in records)
            corrupt_batches = consumer.health().corrupt_batches
        proxy.set_hook(None)
    counts: dict[int, int] = {}
    for n in got:
        counts[n] = counts.get(n, 0) + 1
    lost = total - len(counts)
    duplicated = sum(c - 1 for c in counts.values())
    failures = []
    if lost:
        failures.append(f"{lost} records never delivered")
    if duplicated:
        failures.append(f"{duplicated} records delivered twice")
    if hook.flips == 0:
        failures.append("no fault was injected")
    return ScenarioResult(
        name="corruption in transit",
        sent=total,
        verified=len(counts),
        lost=lost,
        duplicated=duplicated,
        duplicates_promised_zero=True,
        max_recovery_s=None,
        faults=hook.flips,
        seconds=time.monotonic() - started,
        failures=failures,
        details={
            "bits_flipped": hook.flips,
            "corrupt_batches_seen": corrupt_batches,
            "errors_raised": raised,
        },
    )


# --- a broker that loses acknowledged writes --------------------------------------------


async def scenario_lost_writes(size: Size) -> ScenarioResult:
    started = time.monotonic()
    broker = await EmbeddedBroker("noida").start_async()
    try:
        return await _lost_writes(size, broker, started)
    finally:
        await broker.stop_async()


async def _lost_writes(size: Size, broker: EmbeddedBroker, started: float) -> ScenarioResult:
    bootstrap = broker.bootstrap_servers
    topic = _name("lost")
    create_topic(bootstrap, topic, 2)
    producer = Producer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
    )
    await producer.start()
    sent: list[tuple[bytes, RecordFuture]] = []
    ack_at: dict[bytes, float] = {}
    stop = asyncio.Event()

    def on_ack(value: bytes) -> Callable[[RecordFuture], None]:
        def done(fut: RecordFuture) -> None:
            if not fut.cancelled() and fut.exception() is None:
                ack_at[value] = time.time()

        return done

    async def stream() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(100):
                value = b"%09d" % i
                fut = await producer.send(topic, value, partition=i % 2)
                fut.add_done_callback(on_ack(value))
                sent.append((value, fut))
                i += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(stream())
    try:
        await asyncio.sleep(size.lost_writes_seconds)
        await asyncio.to_thread(broker.kill)  # SIGKILL: no flush, no goodbye
        killed_at = time.time()
        await asyncio.sleep(3.0)
        await broker.start_async()  # on the same data directory
        up_at = time.time()
        await asyncio.sleep(size.lost_writes_seconds)
    finally:
        stop.set()
        await task
    results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
    await producer.stop()

    in_log: dict[bytes, int] = {}
    async with _consumer(bootstrap) as reader:
        tps = [TopicPartition(topic, p) for p in range(2)]
        reader.assign(tps)
        ends = await reader.end_offsets(tps)
        deadline = time.monotonic() + 60
        while [tp for tp in tps if await reader.position(tp) < ends[tp]]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading the log back: {reader.health()}")
            for records in (await reader.getmany(timeout_ms=1000)).values():
                for r in records:
                    in_log[r.value] = in_log.get(r.value, 0) + 1
    acked: dict[bytes, tuple[int, int]] = {}
    reports: dict[int, errors.AcknowledgedDataLostError] = {}
    other_errors: list[BaseException] = []
    for (value, _), result in zip(sent, results, strict=True):
        if isinstance(result, errors.AcknowledgedDataLostError):
            reports[id(result)] = result
        elif isinstance(result, BaseException):
            other_errors.append(result)
        else:
            acked[value] = (result.partition, result.offset)
    covered = {}
    for report in reports.values():
        covered[report.partition] = max(covered.get(report.partition, -1), report.last_acked_offset)
    broker_lost = [v for v in acked if v not in in_log]
    silent = [v for v in broker_lost if acked[v][1] > covered.get(acked[v][0], -1)]
    duplicated = sum(c - 1 for c in in_log.values())
    failed = [v for (v, _), r in zip(sent, results, strict=True) if isinstance(r, BaseException)]
    failed_written = [v for v in failed if v in in_log]
    # The question: what a SIGKILL and a restart on the same disk keep.
    before_kill = [v for v in acked if ack_at.get(v, up_at) < killed_at]
    after_restart = [v for v in acked if ack_at.get(v, 0.0) >= up_at]
    resumed = min((ack_at[v] for v in after_restart), default=None)
    failures = []
    if silent:
        failures.append(f"{len(silent)} acknowledged records lost without an error")
    if duplicated:
        failures.append(f"{duplicated} records in the log twice")
    if other_errors:
        failures.append(f"sends failed otherwise: {other_errors[:2]}")
    if resumed is None:
        failures.append("the producer acknowledged nothing after the restart")
    if failed_written:
        failures.append(f"{len(failed_written)} records reported failed are in the log")
    return ScenarioResult(
        name="broker lost acked writes",
        sent=len(sent),
        # Accounted for: acknowledged and in the log once, failed and not in it, or
        # acknowledged, lost by the broker and covered by a loss report.
        verified=sum(1 for v in acked if in_log.get(v) == 1)
        + len(broker_lost)
        - len(silent)
        + len(failed)
        - len(failed_written),
        lost=len(silent),
        duplicated=duplicated,
        duplicates_promised_zero=True,
        max_recovery_s=None,
        faults=1,
        seconds=time.monotonic() - started,
        failures=failures,
        details={
            "acknowledged": len(acked),
            "acknowledged_before_the_kill": len(before_kill),
            "of_those_in_the_log_after_the_restart": sum(1 for v in before_kill if v in in_log),
            "acknowledged_after_the_restart": len(after_restart),
            "of_those_in_the_log": sum(1 for v in after_restart if v in in_log),
            "producer_acknowledged_again_after_s": (
                None if resumed is None else round(resumed - up_at, 2)
            ),
            "down_s": round(up_at - killed_at, 2),
            "acknowledged_then_lost_by_the_broker": len(broker_lost),
            "loss_reports": len(reports),
            "records_failed_with_the_report": sum(
                1 for r in results if isinstance(r, errors.AcknowledgedDataLostError)
            ),
        },
    )


#: Registered with the others by tests.chaos.run.
DELIVERY_SCENARIOS = {
    "poison": scenario_poison,
    "corruption": scenario_corruption,
    "lost-writes": scenario_lost_writes,
}
#: These need the embedded brokers (a proxy Tansu advertises; noida-db to kill).
DELIVERY_EMBEDDED_ONLY = ("corruption", "lost-writes")
