"""Fetcher internals without a broker: batch scanning, fetch sessions, decoding fetched
data (positions, read_committed filtering, deserializers)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.consumer import ConsumerConfig, ConsumerRecord, RecordDeserializationError
from aiokafka_lite.consumer.fetched import CompletedFetch, scan_next_offset
from aiokafka_lite.consumer.fetcher import Fetcher, FetcherStats, FetchSessionHandler
from aiokafka_lite.consumer.subscription import PartitionState, SubscriptionState
from aiokafka_lite.protocol.records import (
    ControlRecordType,
    RecordBatchBuilder,
    build_batch,
    build_control_batch,
    decode_v2_records,
    iter_batches,
)
from aiokafka_lite.structs import TopicPartition
from tests import reference_codec

TP = TopicPartition("t", 0)


def batch(
    base: int,
    n: int,
    *,
    pid: int = -1,
    txn: bool = False,
    compression: str | None = None,
    epoch: int = 5,
) -> bytes:
    builder = RecordBatchBuilder(
        compression=compression,
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_transactional=txn,
        partition_leader_epoch=epoch,
        max_size=1 << 20,
    )
    for i in range(n):
        builder.append(
            1000 + base + i,
            None if i % 2 else b"k%d" % (base + i),
            b"v%d" % (base + i),
            [("h", b"x")] if i == 0 else None,
        )
    return builder.build()


def marker(kind: int, offset: int, pid: int) -> bytes:
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=0, base_offset=offset, timestamp_ms=1000
    )


def completed(
    data: bytes, start: int = 0, aborted: list[tuple[int, int]] | None = None, **config: object
) -> tuple[CompletedFetch, PartitionState]:
    state = PartitionState()
    state.seek(start)
    cfg = ConsumerConfig.from_kwargs(**config)
    return CompletedFetch(
        TP, state, state.epoch, start, data, aborted, cfg, -1, _raise_corruption
    ), state


def _raise_corruption(cf: CompletedFetch, exc: Exception) -> errors.KafkaError:
    """The corruption handler of these tests: report every corrupt batch."""
    assert isinstance(exc, errors.KafkaError)
    return exc


def test_scan_next_offset() -> None:
    data = batch(0, 3) + batch(3, 4)
    assert scan_next_offset(data) == 7
    assert scan_next_offset(data[:-5]) == 3  # truncated last batch is ignored
    assert scan_next_offset(data[:20]) is None
    assert scan_next_offset(b"") is None


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_take_decodes_and_advances_position(compression: str | None) -> None:
    data = batch(0, 5, compression=compression) + batch(5, 5, compression=compression)
    cf, state = completed(data)
    first = cf.take(3)
    assert [r.offset for r in first] == [0, 1, 2]
    assert state.position == 3
    rest = cf.take(100)
    assert [r.offset for r in rest] == list(range(3, 10))
    assert state.position == 10 and state.leader_epoch == 5
    r0 = first[0]
    assert (r0.topic, r0.partition, r0.key, r0.value, r0.timestamp) == ("t", 0, b"k0", b"v0", 1000)
    assert list(r0.headers) == [("h", b"x")]
    assert first[1].key is None and first[1].serialized_key_size == -1
    assert r0.serialized_value_size == 2 and r0.leader_epoch == 5
    assert cf.take(10) == []


def test_records_before_the_fetch_offset_are_skipped() -> None:
    cf, state = completed(batch(0, 10, compression="lz4"), start=4)
    assert [r.offset for r in cf.take(100)] == list(range(4, 10))
    assert state.position == 10


def test_next_one_matches_take() -> None:
    cf, state = completed(batch(0, 3) + batch(3, 2))
    offsets = []
    while (rec := cf.next_one()) is not None:
        offsets.append(rec.offset)
        assert state.position == rec.offset + 1
    assert offsets == [0, 1, 2, 3, 4]


def transactional_log() -> bytes:
    return (
        batch(0, 3, pid=10, txn=True)  # aborted below
        + marker(ControlRecordType.ABORT, 3, 10)
        + batch(4, 2)  # not transactional
        + batch(6, 2, pid=11, txn=True)  # committed
        + marker(ControlRecordType.COMMIT, 8, 11)
    )


def test_read_committed_skips_aborted_and_control_batches() -> None:
    cf, state = completed(transactional_log(), aborted=[(10, 0)], isolation_level="read_committed")
    assert [r.offset for r in cf.take(100)] == [4, 5, 6, 7]
    assert state.position == 9  # past the last marker


def cleaned_marker(offset: int, pid: int) -> bytes:
    """What Kafka's log cleaner leaves of a marker it removed while the batch holds its
    producer's last sequence (MemoryRecords.filterTo, RETAIN_EMPTY): the header only,
    uncompressed, no record, still a transactional control batch."""
    return build_batch(
        b"",
        0,
        -1,
        1000,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
        base_offset=offset,
        last_offset_delta=0,
    )


@pytest.mark.parametrize("isolation_level", ["read_committed", "read_uncommitted"])
def test_a_control_batch_the_cleaner_emptied_is_skipped(isolation_level: str) -> None:
    data = (
        batch(0, 3, pid=10, txn=True)
        + cleaned_marker(3, 10)
        + batch(4, 2)
        + batch(6, 2, pid=10, txn=True)
        + marker(ControlRecordType.COMMIT, 8, 10)
    )
    cf, state = completed(data, isolation_level=isolation_level)
    assert [r.offset for r in cf.take(100)] == [0, 1, 2, 4, 5, 6, 7]
    assert cf.error is None and cf.finished and state.position == 9


def test_a_batch_past_the_decompression_limit_names_the_option_that_reads_it() -> None:
    # 2 MiB of records in a few KiB of zstd: valid (Kafka bounds the compressed size only)
    builder = RecordBatchBuilder(compression="zstd", max_size=4 << 20)
    for i in range(32):
        builder.append(1000 + i, None, bytes(64 * 1024))
    data = builder.build()
    assert len(data) < 16 * 1024
    cf, state = completed(data, max_decompressed_bytes=1 << 20)
    assert cf.take(100) == [] and state.position == 0
    assert isinstance(cf.error, errors.DecodeError)
    assert "1048576" in str(cf.error) and "max_decompressed_bytes" in str(cf.error)
    cf, state = completed(data, max_decompressed_bytes=3 << 20)
    assert [r.offset for r in cf.take(100)] == list(range(32)) and cf.error is None


def test_read_uncommitted_returns_aborted_data_but_never_markers() -> None:
    cf, state = completed(transactional_log(), aborted=[(10, 0)])
    assert [r.offset for r in cf.take(100)] == [0, 1, 2, 4, 5, 6, 7]
    assert state.position == 9


def test_deserializer_failure_leaves_position_at_the_bad_record() -> None:
    def value_des(raw: bytes) -> str:
        if raw == b"v2":
            raise ValueError("boom")
        return raw.decode()

    cf, state = completed(batch(0, 4), value_deserializer=value_des)
    got = cf.take(10)
    assert [r.value for r in got] == ["v0", "v1"]
    assert state.position == 2
    error = cf.error
    assert isinstance(error, RecordDeserializationError) and error.offset == 2
    assert isinstance(error.__cause__, ValueError)
    assert (error.topic, error.partition, error.value, error.origin) == ("t", 0, b"v2", "value")
    # Asked again, it stops at the same record, with a new error.
    assert cf.take(10) == [] and state.position == 2 and not cf.finished
    assert isinstance(cf.error, RecordDeserializationError) and cf.error is not error
    assert cf.next_one() is None and cf.error is not None and cf.error.offset == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_fetch_is_finished_once_its_last_record_is_taken(cut_short: bool) -> None:
    """max_records used up exactly at the end of the data finishes the fetch then (the
    buffer lets it go), also when a broker cut the response inside a last batch."""
    whole = batch(0, 5) + batch(5, 5)
    cf, state = completed(whole + batch(10, 3)[:30] if cut_short else whole)
    assert [r.offset for r in cf.take(5)] == [0, 1, 2, 3, 4]
    assert not cf.finished  # another batch follows
    assert [r.offset for r in cf.take(5)] == [5, 6, 7, 8, 9]
    assert cf.finished and cf.error is None and state.position == 10
    cf, _ = completed(whole)
    while cf.next_one() is not None:
        pass
    assert cf.finished


def test_seek_invalidates_buffered_fetch() -> None:
    cf, state = completed(batch(0, 4))
    assert cf.valid
    state.seek(1)
    assert not cf.valid
    cf2, state2 = completed(batch(0, 4))
    state2.paused = True
    assert not cf2.valid


def test_fetcher_stats_keep_fetch_round_trips() -> None:
    stats = FetcherStats()
    for seconds in (0.02, 0.5, 0.1):
        stats.round_trip(seconds)
    assert stats.round_trips == 3
    assert stats.round_trip_total == pytest.approx(0.62)
    assert stats.round_trip_max == 0.5


def test_fetch_session_full_then_incremental() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    session = FetchSessionHandler(1)
    send, forget, sid, epoch = session.build({a: (0, 100, -1), b: (0, 100, -1)})
    assert (sid, epoch) == (0, 0) and set(send) == {a, b} and forget == []
    assert session.handle_response(0, 42)
    # Only the partition whose offset moved is sent; the session keeps the other.
    send, forget, sid, epoch = session.build({a: (10, 100, -1), b: (0, 100, -1)})
    assert (sid, epoch) == (42, 1) and set(send) == {a} and forget == []
    assert session.handle_response(0, 42)
    # A partition no longer wanted is forgotten.
    send, forget, sid, epoch = session.build({a: (10, 100, -1)})
    assert (sid, epoch) == (42, 2) and send == {} and forget == [b]
    assert session.handle_response(0, 42)
    # The broker lost the session: start over with a full fetch.
    session.build({a: (20, 100, -1)})
    assert not session.handle_response(70, 0)
    send, forget, sid, epoch = session.build({a: (20, 100, -1)})
    assert (sid, epoch) == (0, 0) and set(send) == {a}


@pytest.mark.parametrize(
    ("error", "closes"),
    [(71, True), (106, True), (1, True), (70, False)],  # 70: FETCH_SESSION_ID_NOT_FOUND
)
def test_a_broken_fetch_session_is_closed_by_the_next_full_fetch(error: int, closes: bool) -> None:
    """After an error (or a reset: a lost connection, a topic created again) the next
    fetch is a full one naming the old session at epoch 0, which the broker takes as
    "close it" (KIP-227); it went out as session 0, and the broker kept the old session
    in its cache until evicted. Not after FETCH_SESSION_ID_NOT_FOUND: there is none."""
    a = TopicPartition("t", 0)
    session = FetchSessionHandler(1)
    session.build({a: (0, 100, -1)})
    assert session.handle_response(0, 42)
    session.build({a: (5, 100, -1)})
    assert not session.handle_response(error, 0)
    send, forget, sid, epoch = session.build({a: (5, 100, -1)})
    assert (sid, epoch) == ((42 if closes else 0), 0) and set(send) == {a} and forget == []
    assert session.handle_response(0, 43)
    assert session.build({a: (9, 100, -1)})[2:] == (43, 1)
    session.reset()
    assert session.build({a: (9, 100, -1)})[2:] == (43, 0)


def test_fetch_session_stays_full_when_broker_makes_none() -> None:
    a = TopicPartition("t", 0)
    session = FetchSessionHandler(1)
    for offset in (0, 5, 9):
        send, _, sid, epoch = session.build({a: (offset, 100, -1)})
        assert (sid, epoch) == (0, 0) and set(send) == {a}
        assert session.handle_response(0, 0)


@pytest.mark.parametrize("in_flight", ["full", "incremental"])
def test_fetch_session_reset_while_a_fetch_is_in_flight_stays_reset(in_flight: str) -> None:
    """A session reset while its fetch is in flight (the topic was created again: the
    session names the old topic id) is not revived by that fetch's answer: the next
    fetch is a full one at epoch 0. Before, after an incremental fetch it went out as
    session 0 at epoch 1 (which Kafka refuses with FETCH_SESSION_ID_NOT_FOUND), and
    after a full one the broker's new session was taken up as empty, so the partitions
    it held were never forgotten."""
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    session = FetchSessionHandler(1)
    session.build({a: (0, 100, -1), b: (0, 100, -1)})
    if in_flight == "incremental":
        assert session.handle_response(0, 42)
        session.build({a: (10, 100, -1), b: (0, 100, -1)})
    session.reset()
    assert session.handle_response(0, 42)  # the answer is still good to read
    send, forget, sid, epoch = session.build({a: (10, 100, -1)})
    # A full fetch that closes session 42 (whichever fetch opened it).
    assert (sid, epoch) == (42, 0) and set(send) == {a} and forget == []
    assert session.handle_response(0, 43)
    send, forget, sid, epoch = session.build({a: (10, 100, -1)})
    assert (sid, epoch) == (43, 1) and send == {} and forget == []


# --- the fused decoder and ConsumerRecord -------------------------------------------------


record_st = st.tuples(
    st.integers(0, 2**40),  # timestamp
    st.none() | st.binary(max_size=300),
    st.none() | st.binary(max_size=3000),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_st, min_size=1, max_size=40),
    base=st.integers(0, 2**40),
    start=st.integers(0, 45),
)
def test_codec_matches_the_reference_codec(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    base: int,
    start: int,
) -> None:
    """Records of every shape: the bytes written are the reference encoder's, and what
    is decoded from them is what the reference decoder reads."""
    builder = RecordBatchBuilder(base_offset=base, max_size=1 << 24, partition_leader_epoch=3)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    data = builder.build()
    first_ts = records[0][0]
    assert data[61:] == b"".join(
        reference_codec.encode(i, ts - first_ts, key, value, headers)
        for i, (ts, key, value, headers) in enumerate(records)
    )
    (rb,) = list(iter_batches(data))
    expected = [
        r
        for r in reference_codec.decode(
            data, 61, len(data), rb.record_count, rb.base_offset, rb.base_timestamp
        )
        if r.offset >= base + start
    ]
    got = decode_v2_records(
        data,
        61,
        len(data),
        rb.record_count,
        rb.base_offset,
        rb.base_timestamp,
        None,
        "t",
        7,
        0,
        3,
        base + start,
    )
    assert [(g.offset, g.timestamp, g.key, g.value, tuple(g.headers)) for g in got] == [
        (e.offset, e.timestamp, e.key, e.value, tuple(e.headers)) for e in expected
    ]
    for g in got:
        assert g.serialized_key_size == (-1 if g.key is None else len(g.key))
        assert g.serialized_value_size == (-1 if g.value is None else len(g.value))
        assert (g.topic, g.partition, g.leader_epoch, g.checksum) == ("t", 7, 3, None)


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=200), count=st.integers(0, 30))
def test_fused_decoder_rejects_garbage_with_corrupt_record_error(
    garbage: bytes, count: int
) -> None:
    try:
        decode_v2_records(garbage, 0, len(garbage), count, 0, 0, None, "t", 0, 0, -1)
    except errors.CorruptRecordError:
        pass


def test_consumer_record_is_a_dataclass_like_aiokafkas() -> None:
    """aiokafka's ConsumerRecord is a dataclass, not a tuple (FastStream tells a single
    record from a batch that way) with assignable fields; ours has its fields and more."""
    rec: ConsumerRecord[str, int] = ConsumerRecord("t", 1, 5, 1000, 0, "k", 9, None, 1, 1, (), 2)
    assert (rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.leader_epoch) == (
        "t",
        1,
        5,
        "k",
        9,
        2,
    )
    assert dataclasses.is_dataclass(rec) and not isinstance(rec, tuple)
    assert dataclasses.replace(rec, value=10).value == 10
    assert dataclasses.asdict(rec)["timestamp"] == 1000
    rec.value = 11  # a framework's test client does this
    assert rec.value == 11
    assert "offset=5" in repr(rec)
    assert rec == ConsumerRecord("t", 1, 5, 1000, 0, "k", 11, None, 1, 1, (), 2)
    assert ConsumerRecord("t", 1, 5, 1000, 0, "k", 9, None, 1, 1, ()).leader_epoch == -1
    import pickle

    assert pickle.loads(pickle.dumps(rec)) == rec


# --- follower fetching (KIP-392): which node a partition is fetched from ----------------


class _Cluster:
    def __init__(self, nodes: set[int]) -> None:
        self.nodes = nodes

    def broker(self, node_id: int) -> object | None:
        return object() if node_id in self.nodes else None


class _Client:
    def __init__(self, nodes: set[int]) -> None:
        self.cluster = _Cluster(nodes)


def test_read_replica_holds_while_its_lease_lasts_and_the_node_is_known() -> None:
    client: Any = _Client({1, 2})
    fetcher = Fetcher(client, SubscriptionState(), ConsumerConfig())
    assert fetcher._read_replica(TP, 1, now=10.0) == 1  # nothing named: the leader
    fetcher._read_replicas[TP] = (2, 20.0)
    assert fetcher._read_replica(TP, 1, now=10.0) == 2
    assert fetcher._read_replica(TP, 1, now=19.9) == 2
    assert fetcher._read_replica(TP, 1, now=20.0) == 1  # lease over: back to the leader
    assert TP not in fetcher._read_replicas
    fetcher._read_replicas[TP] = (3, 20.0)  # a node the metadata does not know
    assert fetcher._read_replica(TP, 1, now=10.0) == 1
    assert TP not in fetcher._read_replicas


# --- fairness (KIP-74): the order partitions are fetched in ----------------------------


class _OrderCluster:
    def leader_for(self, tp: TopicPartition) -> int:
        return 1

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        return -1

    def topic_id(self, topic: str) -> None:
        return None

    def broker(self, node_id: int) -> object:
        return object()


class _FillsInRequestOrder:
    """A broker as KIP-74 describes it: partitions are filled in request order until the
    request's max_bytes is reached (each partition here has one batch per fetch, and the
    limit lets one batch through)."""

    def __init__(self) -> None:
        self.cluster = _OrderCluster()
        self.requests: list[list[int]] = []

    def add_metadata_listener(self, callback: Any) -> None:
        pass

    def remove_metadata_listener(self, callback: Any) -> None:
        pass

    async def send(self, node: int, api: object, body: Any, **kw: Any) -> dict[str, Any]:
        order = [p["partition"] for t in body["topics"] for p in t["partitions"]]
        self.requests.append(order)
        first = body["topics"][0]["partitions"][0]
        parts = [
            {
                "partition_index": p,
                "error_code": 0,
                "high_watermark": 1000,
                "records": batch(first["fetch_offset"], 2) if i == 0 else b"",
            }
            for i, p in enumerate(order)
        ]
        return {
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": "t", "partitions": parts}],
        }


async def test_a_partition_that_got_data_is_fetched_after_the_others() -> None:
    # Without the rotation partition 0 would come first in every request and take the
    # whole response until it runs dry; with it, each partition gets its turn.
    client: Any = _FillsInRequestOrder()
    subs = SubscriptionState()
    tps = [TopicPartition("t", p) for p in range(3)]
    subs.assign_from_user(tps)
    for tp in tps:
        subs.seek(tp, 0)
    fetcher = Fetcher(client, subs, ConsumerConfig(fetch_max_bytes=1))
    fetcher.start()
    try:
        for _ in range(200):
            if len(client.requests) >= 6:
                break
            await asyncio.sleep(0.005)
    finally:
        await fetcher.close()
    assert [order[0] for order in client.requests[:6]] == [0, 1, 2, 0, 1, 2]
    assert all(sorted(order) == [0, 1, 2] for order in client.requests[:6])


# --- the next fetch: out before the records just fetched reach the application ----------


class _LongPollBroker:
    """Answers the first fetch with two records; holds every later one (a long poll)."""

    def __init__(self, events: list[str]) -> None:
        self.cluster = _OrderCluster()
        self.events = events
        self.fetches = 0
        self._never = asyncio.Event()

    def add_metadata_listener(self, callback: Any) -> None:
        pass

    def remove_metadata_listener(self, callback: Any) -> None:
        pass

    async def send(self, node: int, api: object, body: Any, **kw: Any) -> dict[str, Any]:
        self.fetches += 1
        self.events.append(f"fetch {self.fetches}")
        if self.fetches > 1:
            await self._never.wait()
        offset = body["topics"][0]["partitions"][0]["fetch_offset"]
        return {
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 1000,
                            "records": batch(offset, 2),
                        }
                    ],
                }
            ],
        }


async def test_the_next_fetch_is_sent_before_the_application_wakes() -> None:
    # The broker's long poll is what wakes on new data: while none is in flight, a new
    # record waits. So the fetch after an answer goes out in the same step that handles
    # the answer, ahead of the application's wake-up (and of its work on the records).
    events: list[str] = []
    client: Any = _LongPollBroker(events)
    subs = SubscriptionState()
    subs.assign_from_user([TP])
    subs.seek(TP, 0)
    fetcher = Fetcher(client, subs, ConsumerConfig())
    fetcher.start()
    try:
        # (Bounded without a task of its own, which would add a turn of the loop.)
        await wait_for(fetcher.data_ready.wait(), 5)
        events.append("application")
        assert [r.offset for r in fetcher.fetched_records(10)[TP]] == [0, 1]
    finally:
        await fetcher.close()
    assert events == ["fetch 1", "fetch 2", "application"]
    assert subs.state(TP).fetch_offset == 2
