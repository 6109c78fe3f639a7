"""The producer tells the application when a broker lost records it had acknowledged.

Each test runs its own broker, since each stops it: Tansu, whose memory storage comes
back empty from a restart (it then answers ``UNKNOWN_PRODUCER_ID``), and noida-db, which
keeps its data directory across a clean restart but, killed with SIGKILL, comes back
without the last records it had acknowledged (noida-db 0.2.3: it answers
``OUT_OF_ORDER_SEQUENCE_NUMBER`` to the next batch).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from aiokafka_lite import errors
from aiokafka_lite.producer import Producer, RecordFuture
from aiokafka_lite.testing import BrokerStartError, EmbeddedBroker, noida_binary, tansu_binary

from ..conftest import create_topic_with_admin
from .test_producer_helpers import read_all

log = logging.getLogger(__name__)

pytestmark = pytest.mark.timeout(120)


def _topic() -> str:
    return f"t-loss-{uuid.uuid4().hex[:10]}"


async def _broker(kind: str) -> EmbeddedBroker:
    try:
        tansu_binary() if kind == "tansu" else noida_binary()
    except BrokerStartError as exc:
        pytest.skip(f"no {kind} broker: {exc}")
    return await EmbeddedBroker(kind).start_async()


@pytest.fixture
async def tansu() -> AsyncIterator[EmbeddedBroker]:
    broker = await _broker("tansu")
    try:
        yield broker
    finally:
        await broker.stop_async()


@pytest.fixture
async def noida() -> AsyncIterator[EmbeddedBroker]:
    broker = await _broker("noida")
    try:
        yield broker
    finally:
        await broker.stop_async()


async def test_broker_back_empty_the_next_send_reports_the_lost_records(
    tansu: EmbeddedBroker,
) -> None:
    bootstrap = tansu.bootstrap_servers
    topic = await asyncio.to_thread(create_topic_with_admin, bootstrap, _topic())
    async with Producer(bootstrap_servers=bootstrap, request_timeout_ms=5000) as producer:
        acked = [await producer.send_and_wait(topic, b"a%d" % i, partition=0) for i in range(5)]
        assert [md.offset for md in acked] == [0, 1, 2, 3, 4]
        await asyncio.to_thread(tansu.restart)  # memory storage: the log is gone
        await asyncio.to_thread(create_topic_with_admin, bootstrap, topic)
        with pytest.raises(errors.AcknowledgedDataLostError) as info:
            await producer.send_and_wait(topic, b"b", partition=0)
        lost = info.value
        assert (lost.topic, lost.partition) == (topic, 0)
        assert (lost.last_acked_offset, lost.last_acked_sequence) == (4, 4)
        assert isinstance(lost.broker_error, errors.UnknownProducerIdError)
        # The producer goes on under a new epoch.
        after = await producer.send_and_wait(topic, b"c", partition=0)
        assert producer.metrics()["acknowledged_data_lost"] == 1
    log_now = await asyncio.to_thread(read_all, bootstrap, topic)
    assert [r[3] for r in log_now[0]] == [b"c"] and after.offset == log_now[0][0][1]


async def test_clean_restart_keeps_the_records_and_reports_nothing(noida: EmbeddedBroker) -> None:
    bootstrap = noida.bootstrap_servers
    topic = await asyncio.to_thread(create_topic_with_admin, bootstrap, _topic())
    async with Producer(bootstrap_servers=bootstrap, request_timeout_ms=5000) as producer:
        for i in range(5):
            await producer.send_and_wait(topic, b"a%d" % i, partition=0)
        await asyncio.to_thread(noida.restart)  # SIGTERM: noida-db keeps its data
        after = [await producer.send_and_wait(topic, b"b%d" % i, partition=0) for i in range(3)]
        assert [md.offset for md in after] == [5, 6, 7]
        assert producer.metrics()["acknowledged_data_lost"] == 0
    log_now = await asyncio.to_thread(read_all, bootstrap, topic)
    assert [r[3] for r in log_now[0]] == [b"a0", b"a1", b"a2", b"a3", b"a4", b"b0", b"b1", b"b2"]


async def test_crash_mid_stream_loss_is_reported_iff_acknowledged_records_were_lost(
    noida: EmbeddedBroker,
) -> None:
    # An idempotent acks=all stream; the broker is killed (SIGKILL) mid-stream and
    # started again on its data directory a second later. Whatever the broker kept,
    # the application's futures must say so: some send fails with
    # AcknowledgedDataLostError exactly when acknowledged records are missing from the
    # log, and that error covers them (their offsets are at most its last acknowledged
    # offset). Every other send is acknowledged and in the log.
    bootstrap = noida.bootstrap_servers
    topic = await asyncio.to_thread(create_topic_with_admin, bootstrap, _topic())
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
    stop = asyncio.Event()

    async def stream() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(100):
                value = b"%08d" % i
                sent.append((value, await producer.send(topic, value, partition=0)))
                i += 1
            await asyncio.sleep(0.02)

    task = asyncio.create_task(stream())
    try:
        await asyncio.sleep(1.0)
        await asyncio.to_thread(noida.kill)
        killed_at = len(sent)
        await asyncio.sleep(1.0)
        await noida.start_async()
        await asyncio.sleep(1.5)
    finally:
        stop.set()
        await task
    results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
    await producer.stop()
    log_now = await asyncio.to_thread(read_all, bootstrap, topic)
    in_log = {r[3] for r in log_now[0]}
    outcomes = list(zip([v for v, _ in sent], results, strict=True))
    acked = {v: r.offset for v, r in outcomes if not isinstance(r, BaseException)}
    failed = [(v, r) for v, r in outcomes if isinstance(r, BaseException)]
    others = [r for _, r in failed if not isinstance(r, errors.AcknowledgedDataLostError)]
    reported = [r for _, r in failed if isinstance(r, errors.AcknowledgedDataLostError)]
    lost = sorted(v for v in acked if v not in in_log)
    log.info(
        "sent %d (%d before the kill), acknowledged %d, lost after acknowledgement %d, "
        "failed as lost %d record(s) in %d report(s), in the log %d",
        len(sent),
        killed_at,
        len(acked),
        len(lost),
        len(failed),
        len({id(r) for r in reported}),
        len(in_log),
    )
    assert others == [], others[:3]
    assert bool(lost) == bool(reported), (len(lost), reported[:1])
    if reported:
        covered = max(r.last_acked_offset for r in reported)
        assert all(acked[v] <= covered for v in lost), (lost[:3], covered)
    assert not [v for v, _ in failed if v in in_log]  # the failed batches were not written
    assert producer.metrics()["acknowledged_data_lost"] == len({id(r) for r in reported})
