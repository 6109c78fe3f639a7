"""The sender's retry, re-routing and idempotence rules, against a scripted cluster.

A fake client stands in for the network: every Produce request is recorded and answered
by the test, so the situations that are hard to provoke on a real broker (a leader
moving, out-of-order sequence errors, a real sequence gap) are played exactly.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.cluster import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata
from aiokafka_lite.producer import Producer, StickyPartitioner
from aiokafka_lite.producer.accumulator import ProducerBatch
from aiokafka_lite.producer.producer import _BATCHES_PER_TURN
from aiokafka_lite.protocol import records
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.timeout(30)

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)


def cluster(leader: int) -> ClusterMetadata:
    part = PartitionMetadata(TOPIC, 0, leader, (1, 2), (1, 2))
    return ClusterMetadata(
        {1: BrokerMetadata(1, "h1", 1), 2: BrokerMetadata(2, "h2", 2)},
        {TOPIC: TopicMetadata(TOPIC, None, False, {0: part}, 0)},
    )


class Request:
    def __init__(self, node: int, body: dict[str, Any], fut: asyncio.Future[dict[str, Any]]):
        self.node = node
        self.body = body
        self.future = fut
        data = body["topic_data"][0]["partition_data"][0]["records"]
        if isinstance(data, tuple):  # (the batch's header and records, as the encoder takes them)
            data = b"".join(data)
        self.batch = next(iter(records.iter_batches(data)))
        assert isinstance(self.batch, records.RecordBatch)

    @property
    def values(self) -> list[bytes | None]:
        return [r.value for r in self.batch.records()]

    def fail(self, exc: BaseException) -> None:
        self.future.set_exception(exc)

    def answer(self, code: int = 0, base_offset: int = 0, log_start_offset: int = 0) -> None:
        self.future.set_result(
            {
                "responses": [
                    {
                        "name": TOPIC,
                        "partition_responses": [
                            {
                                "index": 0,
                                "error_code": code,
                                "base_offset": base_offset,
                                "log_append_time_ms": -1,
                                "log_start_offset": log_start_offset,
                            }
                        ],
                    }
                ]
            }
        )


class FakeConnection:
    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node
        self.closed = False
        self.corked = False

    def cork(self) -> None:
        self.corked = True

    def uncork(self) -> None:
        self.corked = False

    def request(
        self,
        api_key: int,
        body: Any,
        *,
        timeout_ms: int | None = None,
        expect_response: bool = True,
        on_response: Callable[[asyncio.Future[dict[str, Any]]], None] | None = None,
    ) -> asyncio.Future[dict[str, Any]]:
        assert api_key == ApiKey.PRODUCE
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if on_response is not None:
            fut.add_done_callback(on_response)  # (a loop round later: fine here)
        self.client.produce_requests.append(Request(self.node, body, fut))
        self.client.on_request()
        return fut


class FakeClient:
    def __init__(self) -> None:
        self.cluster = cluster(leader=1)
        self.produce_requests: list[Request] = []
        self.init_requests: list[dict[str, Any]] = []
        self.metadata_updates = 0
        self.on_metadata_update: Callable[[], None] = lambda: None
        self.on_request: Callable[[], None] = lambda: None
        self.listeners: list[Callable[[ClusterMetadata], None]] = []
        self.next_epoch = 0
        self.next_pid = 77
        #: Error codes for the next InitProducerId requests, in order.
        self.init_errors: list[int] = []
        #: When set, InitProducerId cannot reach the broker (connection refused).
        self.init_unreachable = False

    def answer_every_request(self) -> None:
        """Answer each Produce request (soon) with success, its records placed after those
        of the requests before it: offsets are record positions in send order."""

        def answer() -> None:
            req = self.produce_requests[-1]
            base = sum(len(r.values) for r in self.produce_requests[:-1])
            asyncio.get_running_loop().call_soon(req.answer, 0, base)

        self.on_request = answer

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def add_metadata_listener(self, cb: Callable[[ClusterMetadata], None]) -> None:
        self.listeners.append(cb)

    def remove_metadata_listener(self, cb: Callable[[ClusterMetadata], None]) -> None:
        self.listeners.remove(cb)

    def add_topics(self, topics: Iterable[str]) -> None:
        return None

    async def wait_for_metadata(self, topic: str, timeout_ms: int) -> set[int]:
        return {0}

    def request_metadata_update(self) -> asyncio.Future[ClusterMetadata]:
        self.metadata_updates += 1
        self.on_metadata_update()
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        fut.set_result(self.cluster)
        return fut

    def is_connected(self, node: int) -> bool:
        return True

    def connection_delay(self, node: int) -> float:
        return 0.0

    async def get_connection(self, node: int) -> FakeConnection:
        return FakeConnection(self, node)

    def api_version(self, api_key: int) -> int:
        return 4

    async def send_to_any(self, api_key: int, body: Any, **kw: Any) -> dict[str, Any]:
        assert api_key == ApiKey.INIT_PRODUCER_ID
        self.init_requests.append(dict(body))
        if self.init_unreachable:
            raise errors.KafkaConnectionError("connection refused (scripted)")
        if self.init_errors:
            return {"error_code": self.init_errors.pop(0), "producer_id": -1, "producer_epoch": -1}
        if body["producer_id"] < 0 and self.init_requests[:-1]:
            self.next_pid += 1  # a new producer id (not the first one): a new epoch 0
            self.next_epoch = 0
        epoch = self.next_epoch
        self.next_epoch += 1
        return {"error_code": 0, "producer_id": self.next_pid, "producer_epoch": epoch}


async def start(**options: Any) -> tuple[Producer, FakeClient]:
    settings: dict[str, Any] = {
        "linger_ms": 0,
        "retry_backoff_ms": 1,
        "retry_backoff_max_ms": 5,
        "request_timeout_ms": 1000,
    }
    settings.update(options)
    producer = Producer(bootstrap_servers="fake:9092", **settings)
    client = FakeClient()
    producer.client = client  # type: ignore[assignment]
    await producer.start()
    return producer, client


def requests_sent(client: FakeClient, count: int) -> Callable[[], bool]:
    """A predicate for :func:`until`: at least ``count`` Produce requests were sent."""
    return lambda: len(client.produce_requests) >= count


def first_byte(request: Request) -> bytes:
    """The first byte of the request's first value (which record it carries)."""
    value = request.values[0]
    assert value is not None
    return value[:1]


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.001)


async def test_not_leader_refreshes_metadata_and_reroutes() -> None:
    producer, client = await start()

    def leader_moves() -> None:
        client.cluster = cluster(leader=2)

    client.on_metadata_update = leader_moves
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    assert client.produce_requests[0].node == 1
    client.produce_requests[0].answer(errors.NotLeaderOrFollowerError.errno)
    await until(lambda: len(client.produce_requests) == 2)
    assert client.metadata_updates >= 1
    retry = client.produce_requests[1]
    assert retry.node == 2  # re-routed to the new leader
    assert retry.batch.base_sequence == client.produce_requests[0].batch.base_sequence
    retry.answer(0, base_offset=41)
    meta = await fut
    assert meta.offset == 41
    assert producer.metrics()["records_retried"] == 1
    await producer.stop(timeout=1)


async def test_retries_keep_sequence_order_without_epoch_bump() -> None:
    # Small batches: three requests in flight at once for the partition.
    producer, client = await start(max_batch_size=60)
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(3)]
    await until(lambda: len(client.produce_requests) == 3)
    first, second, third = client.produce_requests
    sequences = [r.batch.base_sequence for r in (first, second, third)]
    assert sequences == [0, 1, 2]
    # The first failed (leader hiccup); the broker refuses the later ones as out of order.
    first.answer(errors.NotLeaderOrFollowerError.errno)
    second.answer(errors.OutOfOrderSequenceNumberError.errno)
    third.answer(errors.OutOfOrderSequenceNumberError.errno)
    # They go again one at a time, in sequence order, with the same sequences and epoch.
    for expected in range(3):
        await until(lambda n=expected: len(client.produce_requests) == 4 + n)
        resent = client.produce_requests[3 + expected]
        assert resent.batch.base_sequence == expected
        assert resent.batch.producer_epoch == first.batch.producer_epoch
        assert len(client.produce_requests) == 4 + expected  # nothing else in flight
        resent.answer(0, base_offset=10 + expected)
    assert [(await f).offset for f in futures] == [10, 11, 12]
    assert len(client.init_requests) == 1  # no epoch bump
    await producer.stop(timeout=1)


async def test_real_sequence_gap_bumps_the_epoch_and_resends() -> None:
    producer, client = await start()
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    first = client.produce_requests[0]
    assert (first.batch.producer_id, first.batch.producer_epoch) == (77, 0)
    # Nothing earlier is pending: the broker lost the producer's state.
    first.answer(errors.OutOfOrderSequenceNumberError.errno)
    await until(lambda: len(client.produce_requests) == 2)
    assert len(client.init_requests) == 2
    bump = client.init_requests[1]
    assert (bump["producer_id"], bump["producer_epoch"]) == (77, 0)  # KIP-360 bump
    resent = client.produce_requests[1]
    assert (resent.batch.producer_epoch, resent.batch.base_sequence) == (1, 0)
    resent.answer(0, base_offset=5)
    assert (await fut).offset == 5
    await producer.stop(timeout=1)


async def test_duplicate_is_success_with_unknown_offset() -> None:
    producer, client = await start()
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.produce_requests[0].answer(errors.DuplicateSequenceNumberError.errno, base_offset=-1)
    assert (await fut).offset == -1
    assert producer.metrics()["duplicate_batches"] == 1
    await producer.stop(timeout=1)


async def test_non_retriable_error_fails_the_records() -> None:
    producer, client = await start()
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.produce_requests[0].answer(errors.TopicAuthorizationFailedError.errno)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        await fut
    assert producer.metrics()["records_failed"] == 1
    await producer.stop(timeout=1)


async def test_retriable_errors_stop_at_delivery_timeout() -> None:
    producer, client = await start(delivery_timeout_ms=1200)

    def always_fail() -> None:
        req = client.produce_requests[-1]
        asyncio.get_running_loop().call_soon(req.answer, errors.NotEnoughReplicasError.errno)

    client.on_request = always_fail
    fut = await producer.send(TOPIC, b"v", partition=0)
    with pytest.raises(errors.KafkaTimeoutError, match="delivery_timeout_ms"):
        await asyncio.wait_for(fut, 10)
    assert len(client.produce_requests) > 3  # it kept retrying until then
    await producer.stop(timeout=1)


async def test_in_flight_limit_per_connection() -> None:
    producer, client = await start(
        max_batch_size=60, enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=2
    )
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(5)]
    await until(lambda: len(client.produce_requests) == 2)
    await asyncio.sleep(0.05)
    assert len(client.produce_requests) == 2  # capped
    client.produce_requests[0].answer(0, 0)
    await until(lambda: len(client.produce_requests) == 3)
    for req in client.produce_requests[1:]:
        req.answer(0, 0)
    await until(lambda: len(client.produce_requests) == 5)
    for req in client.produce_requests[3:]:
        req.answer(0, 0)
    await asyncio.gather(*futures)
    await producer.stop(timeout=1)


async def test_a_batch_left_lingering_behind_a_full_one_goes_at_its_linger() -> None:
    # The full batch goes at once; the one behind it, still filling, goes when its linger
    # ends, while the first request is still unanswered (nothing else wakes the sender).
    producer, client = await start(
        max_batch_size=60,
        linger_ms=100,
        request_timeout_ms=30_000,
        max_in_flight_requests_per_connection=2,
    )
    full = await producer.send(TOPIC, b"0" + b"." * 40, partition=0)
    lingering = await producer.send(TOPIC, b"1" + b"." * 40, partition=0)
    await until(requests_sent(client, 1))
    await until(requests_sent(client, 2), timeout=3.0)
    assert [first_byte(r) for r in client.produce_requests] == [b"0", b"1"]
    for request in client.produce_requests:
        request.answer(0, request.batch.base_sequence)
    assert [(await f).offset for f in (full, lingering)] == [0, 1]
    await producer.stop(timeout=1)


async def test_a_retry_behind_a_retry_goes_at_its_own_backoff() -> None:
    # A real gap refuses two batches; after the epoch bump both go again with fresh
    # sequences, each when its own backoff ends: the second's ends after the first
    # went, and it goes then, not when the first is answered.
    producer, client = await start(
        max_batch_size=60, request_timeout_ms=30_000, max_in_flight_requests_per_connection=2
    )
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(2)]
    await until(requests_sent(client, 2))
    with mock.patch("aiokafka_lite.producer.sender.backoff_delay", side_effect=[0.01, 0.2]):
        for request in client.produce_requests:
            request.answer(errors.OutOfOrderSequenceNumberError.errno)
        await until(requests_sent(client, 3))
        await until(requests_sent(client, 4), timeout=3.0)
    resent = client.produce_requests[2:]
    assert [(r.batch.producer_epoch, r.batch.base_sequence) for r in resent] == [(1, 0), (1, 1)]
    assert [first_byte(r) for r in resent] == [b"0", b"1"]
    for request in resent:
        request.answer(0, request.batch.base_sequence)
    assert [(await f).offset for f in futures] == [0, 1]
    await producer.stop(timeout=1)


async def test_a_tight_loop_yields_to_the_sender_every_few_filled_batches() -> None:
    # The caller gives the sender a turn once per _BATCHES_PER_TURN batches it fills (in
    # any partitions), and at every filled batch while nothing is in flight.
    producer, client = await start(enable_idempotence=False, acks=1)
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(requests_sent(client, 1))
    assert producer._sender is not None and producer._sender.in_flight_requests == 1
    turns = [producer._sender_turn_due() for _ in range(2 * _BATCHES_PER_TURN)]
    assert turns == ([False] * (_BATCHES_PER_TURN - 1) + [True]) * 2
    client.produce_requests[0].answer(0, 0)
    await fut
    assert producer._sender.in_flight_requests == 0
    assert all(producer._sender_turn_due() for _ in range(3))
    await producer.stop(timeout=1)


async def test_refused_epoch_bump_falls_back_to_a_new_producer_id() -> None:
    producer, client = await start()
    first = await producer.send(TOPIC, b"a", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.produce_requests[0].answer(0, base_offset=0)
    await first
    fut = await producer.send(TOPIC, b"b", partition=0)
    await until(lambda: len(client.produce_requests) == 2)
    # The broker dropped the producer's state with its records (retention: the log now
    # starts after them) and refuses the KIP-360 bump with a non-retriable error, as
    # Tansu does.
    client.init_errors = [errors.UnknownServerError.errno]
    client.produce_requests[1].answer(errors.UnknownProducerIdError.errno, log_start_offset=1)
    await until(lambda: len(client.produce_requests) == 3)
    assert [(r["producer_id"], r["producer_epoch"]) for r in client.init_requests] == [
        (-1, -1),
        (77, 0),  # the bump, refused
        (-1, -1),  # then a new producer id, asked for once
    ]
    resent = client.produce_requests[2]
    assert (resent.batch.producer_id, resent.batch.producer_epoch) == (78, 0)
    assert resent.batch.base_sequence == 0 and resent.values == [b"b"]
    resent.answer(0, base_offset=1)
    assert (await fut).offset == 1
    # And it goes on under the new id.
    more = await producer.send(TOPIC, b"c", partition=0)
    await until(lambda: len(client.produce_requests) == 4)
    assert client.produce_requests[3].batch.base_sequence == 1
    client.produce_requests[3].answer(0, base_offset=2)
    assert (await more).offset == 2
    await producer.stop(timeout=1)


async def test_non_retriable_init_producer_id_error_fails_records_at_once() -> None:
    producer, client = await start(delivery_timeout_ms=60_000)
    fut = await producer.send(TOPIC, b"a", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    # The bump and the request for a new id are both refused, for good.
    client.init_errors = [errors.ClusterAuthorizationFailedError.errno] * 2
    client.produce_requests[0].answer(errors.UnknownProducerIdError.errno)
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        await asyncio.wait_for(fut, 5)  # long before delivery_timeout_ms
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        await producer.send(TOPIC, b"b", partition=0)
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        await producer.send_many(TOPIC, [b"c"], partition=0)
    await asyncio.sleep(0.05)
    assert len(client.init_requests) == 3  # not asked again and again
    await asyncio.wait_for(producer.stop(timeout=1), 5)


async def test_retriable_init_producer_id_errors_are_retried() -> None:
    producer, client = await start()
    fut = await producer.send(TOPIC, b"a", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.init_errors = [errors.CoordinatorLoadInProgressError.errno] * 3
    client.produce_requests[0].answer(errors.UnknownProducerIdError.errno)
    await until(lambda: len(client.produce_requests) == 2)
    assert len(client.init_requests) == 5
    assert client.init_requests[-1]["producer_id"] == 77  # still a bump
    client.produce_requests[1].answer(0, base_offset=0)
    assert (await fut).offset == 0
    await producer.stop(timeout=1)


async def test_delivery_timeout_bounds_records_whose_request_is_unanswered() -> None:
    # The broker stopped answering (the fake connection never times a request out): the
    # records fail at delivery_timeout_ms all the same, not when the request gives up.
    producer, client = await start(request_timeout_ms=1000, delivery_timeout_ms=1000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    fut = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    with pytest.raises(errors.KafkaTimeoutError, match="delivery_timeout_ms") as info:
        await asyncio.wait_for(fut, 5)
    assert 0.9 < loop.time() - started < 1.8
    assert "no answer yet" in str(info.value)
    assert producer.metrics()["requests_in_flight"] == 1  # the request itself is still out
    # Its late answer only frees the slot; the sequence hole bumps the epoch.
    client.produce_requests[0].answer(0, base_offset=0)
    await until(lambda: producer.metrics()["requests_in_flight"] == 0)
    assert producer.metrics()["records_failed"] == 1
    assert producer.metrics()["records_sent"] == 0
    after = await producer.send(TOPIC, b"w", partition=0)
    await until(lambda: len(client.produce_requests) == 2)
    assert len(client.init_requests) == 2
    assert client.produce_requests[1].batch.producer_epoch == 1
    client.produce_requests[1].answer(0, base_offset=1)
    assert (await after).offset == 1
    await producer.stop(timeout=1)


_TOO_LARGE = errors.RecordTooLargeError.errno  # MESSAGE_TOO_LARGE


async def test_too_large_batch_is_split_and_resent_in_order() -> None:
    producer, client = await start()
    futures = await producer.send_many(TOPIC, [b"a", b"b", b"c", b"d"], partition=0)
    waiting = asyncio.ensure_future(asyncio.gather(*futures))  # asyncio futures too
    await until(lambda: len(client.produce_requests) == 1)
    whole = client.produce_requests[0]
    assert whole.values == [b"a", b"b", b"c", b"d"] and whole.batch.base_sequence == 0
    # A later batch of the partition goes out meanwhile.
    later = await producer.send(TOPIC, b"e", partition=0)
    await until(lambda: len(client.produce_requests) == 2)
    assert client.produce_requests[1].batch.base_sequence == 4
    whole.answer(_TOO_LARGE)
    client.produce_requests[1].answer(errors.OutOfOrderSequenceNumberError.errno)
    # The halves take the batch's sequences and go first, one request at a time.
    await until(lambda: len(client.produce_requests) == 3)
    first = client.produce_requests[2]
    assert first.values == [b"a", b"b"]
    assert (first.batch.base_sequence, first.batch.producer_epoch) == (0, 0)
    await asyncio.sleep(0.02)
    assert len(client.produce_requests) == 3
    first.answer(0, base_offset=10)
    await until(lambda: len(client.produce_requests) == 4)
    second = client.produce_requests[3]
    assert second.values == [b"c", b"d"] and second.batch.base_sequence == 2
    second.answer(0, base_offset=12)
    await until(lambda: len(client.produce_requests) == 5)
    resent = client.produce_requests[4]
    assert resent.values == [b"e"] and resent.batch.base_sequence == 4
    resent.answer(0, base_offset=14)
    assert [m.offset for m in await waiting] == [10, 11, 12, 13]
    assert [(await f).offset for f in futures] == [10, 11, 12, 13]
    assert (await later).offset == 14
    assert len(client.init_requests) == 1  # no epoch bump: nothing was lost
    assert producer.metrics()["records_sent"] == 5
    await producer.stop(timeout=1)


async def test_split_again_until_a_single_record_is_too_large() -> None:
    producer, client = await start()
    values = [b"small-1", b"x" * 500, b"small-2"]
    futures = await producer.send_many(TOPIC, values, partition=0)
    pending = asyncio.ensure_future(asyncio.gather(*futures, return_exceptions=True))

    def answer(request: Request) -> None:
        if b"x" * 500 in request.values and len(request.values) >= 1:
            request.answer(_TOO_LARGE)
        else:
            request.answer(0, base_offset=100 + len(client.produce_requests))

    client.on_request = lambda: asyncio.get_running_loop().call_soon(
        answer, client.produce_requests[-1]
    )
    outcomes = await asyncio.wait_for(pending, 5)
    sent = [r.values for r in client.produce_requests]
    # [s1, x, s2] -> [s1, x] + [s2]; [s1, x] -> [s1] + [x]; [x] alone fails.
    assert sent[0] == values
    assert [b"small-1"] in sent and [b"small-2"] in sent and [b"x" * 500] in sent
    assert isinstance(outcomes[1], errors.RecordTooLargeError)
    assert futures[0].result().offset >= 100 and futures[2].result().offset >= 100
    assert futures[0].exception() is None and futures[2].exception() is None
    assert isinstance(futures[1].exception(), errors.RecordTooLargeError)
    assert "exception=" in repr(futures[1]) and "result=" in repr(futures[0])
    # Records keep their order: small-1 was written before small-2, which went under a
    # new epoch (the refused record may have left a hole in the sequence).
    assert futures[0].result().offset < futures[2].result().offset
    last = client.produce_requests[-1]
    assert last.values == [b"small-2"]
    assert (last.batch.producer_epoch, last.batch.base_sequence) == (1, 0)
    assert producer.metrics()["records_failed"] == 1
    await producer.stop(timeout=1)


async def test_split_parts_fail_with_the_batch_at_stop() -> None:
    producer, client = await start(enable_idempotence=False, acks=1)
    futures = await producer.send_many(TOPIC, [b"a", b"b", b"c"], partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.produce_requests[0].answer(_TOO_LARGE)
    await until(lambda: len(client.produce_requests) == 3)  # the halves, unanswered
    await producer.stop(timeout=0.2)
    for fut in futures:
        assert fut.done() and isinstance(fut.exception(), errors.KafkaTimeoutError)
    assert producer.metrics()["batches_incomplete"] == 0


async def test_send_many_fast_path_encodes_like_send() -> None:
    # Batches of ~300 bytes: runs fill and close them, send() opens the next ones.
    producer, client = await start(max_batch_size=300, enable_idempotence=False, acks=1)

    client.answer_every_request()
    values: list[Any] = [b"v%d" % i * (i % 7) for i in range(200)]
    values[50] = bytearray(b"a bytearray")  # another type: through send()
    values[120] = b"x" * 400  # larger than a batch: a batch of its own
    keys = [None if i % 3 else b"k%d" % i for i in range(200)]
    keyed = await producer.send_many(TOPIC, values, keys=keys, partition=0)
    tail = await producer.send_many(TOPIC, [b"tail-%d" % i for i in range(30)], partition=0)
    results = await asyncio.wait_for(asyncio.gather(*keyed, *tail), 5)
    sent_values = [v for r in client.produce_requests for v in r.values]
    sent_keys = [r.key for req in client.produce_requests for r in req.batch.records()]
    expected = [bytes(v) for v in values] + [b"tail-%d" % i for i in range(30)]
    assert sent_values == expected
    assert sent_keys == keys + [None] * 30
    assert [m.offset for m in results] == list(range(230))
    stamps = [r.timestamp for req in client.produce_requests for r in req.batch.records()]
    assert [m.timestamp for m in results] == stamps
    with pytest.raises(ValueError, match="fewer keys"):
        await producer.send_many(TOPIC, [b"a", b"b"], keys=[b"k"], partition=0)
    await producer.stop(timeout=1)


async def test_send_many_keyless_runs_encode_like_send() -> None:
    # Keyless values go in runs (one loop per open batch); anything a run cannot take
    # goes through send(), and every record reads back as sent, with its metadata.
    producer, client = await start(max_batch_size=300, enable_idempotence=False, acks=1)

    client.answer_every_request()
    values: list[Any] = [b"v%d" % i * (i % 9) for i in range(300)]
    values[40] = bytearray(b"a bytearray")
    values[41] = memoryview(b"a memoryview")
    values[150] = b"x" * 400  # larger than a batch
    values[151] = None  # a tombstone
    futures = await producer.send_many(TOPIC, values, partition=0)
    stamped = await producer.send_many(TOPIC, [b"s1", b"s2"], partition=0, timestamp_ms=12345)
    assert len(futures) == 300 and len(stamped) == 2
    results = await asyncio.wait_for(asyncio.gather(*futures, *stamped), 5)
    sent = [r for req in client.produce_requests for r in req.batch.records()]
    expected = [None if v is None else bytes(v) for v in values] + [b"s1", b"s2"]
    assert [r.value for r in sent] == expected
    assert all(r.key is None and not r.headers for r in sent)
    assert [m.offset for m in results] == list(range(302))
    assert [m.timestamp for m in results] == [r.timestamp for r in sent]
    assert [m.timestamp for m in results[-2:]] == [12345, 12345]
    await producer.stop(timeout=1)


async def test_send_many_runs_stop_where_the_offset_delta_table_ends() -> None:
    # A batch takes more records than the varint table covers (SMALL): the records past
    # it are encoded by the general path, still one batch.
    from aiokafka_lite.protocol.records.varint import SMALL

    producer, client = await start(
        max_batch_size=400_000, linger_ms=10_000, enable_idempotence=False, acks=1
    )
    client.on_request = lambda: asyncio.get_running_loop().call_soon(
        client.produce_requests[-1].answer, 0, 0
    )
    count = SMALL + 50
    futures = await producer.send_many(TOPIC, [b""] * (count - 1) + [b"end"], partition=0)
    await producer.flush(timeout=5)
    assert len(client.produce_requests) == 1
    sent = client.produce_requests[0].batch.records()
    assert len(sent) == count and sent[-1].value == b"end"
    assert [r.offset for r in sent] == list(range(count))
    assert futures[-1].result().offset == count - 1
    assert futures[SMALL - 2].result().offset == SMALL - 2
    await producer.stop(timeout=1)


class _NoSendingClient(FakeClient):
    """Four partitions, and a broker the sender never reaches: batches stay queued, so
    the partitions chosen depend only on the records appended."""

    def __init__(self) -> None:
        super().__init__()
        parts = {p: PartitionMetadata(TOPIC, p, 1, (1,), (1,)) for p in range(4)}
        self.cluster = ClusterMetadata(
            {1: BrokerMetadata(1, "h1", 1)}, {TOPIC: TopicMetadata(TOPIC, None, False, parts, 0)}
        )

    async def wait_for_metadata(self, topic: str, timeout_ms: int) -> set[int]:
        return {0, 1, 2, 3}

    def is_connected(self, node: int) -> bool:
        return False


async def _unsent_producer(**options: Any) -> Producer:
    """A started producer whose sender never reaches the broker (_NoSendingClient)."""
    settings: dict[str, Any] = {"linger_ms": 60_000, "enable_idempotence": False, "acks": 1}
    settings.update(options)
    producer = Producer(bootstrap_servers="fake:9092", **settings)
    producer.client = _NoSendingClient()  # type: ignore[assignment]
    await producer.start()
    return producer


def _queued(producer: Producer) -> dict[int, list[bytes | None]]:
    """The values waiting in each partition's batches, in order."""
    out: dict[int, list[bytes | None]] = {}
    for tp, dq in producer._batches.items():
        for batch in dq:
            data = records.decode_records(batch.build())
            out.setdefault(tp.partition, []).extend(r.value for r in data)
    return out


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=700), min_size=1, max_size=400),
    batch_size=st.integers(min_value=100, max_value=3000),
    sticky_size=st.one_of(st.none(), st.integers(min_value=1, max_value=3000)),
    chunk=st.integers(min_value=1, max_value=200),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_send_many_spreads_keyless_records_as_send_does(
    sizes: list[int], batch_size: int, sticky_size: int | None, chunk: int, seed: int
) -> None:
    # The sticky partitioner (KIP-794) decides per record for send(); send_many asks it
    # once per run and appends up to the bytes it has left (StickyPartitioner.room).
    # Same records, same random choices: the same records in the same partitions, and
    # the same partitioner state. The partitioner's own batch size (``sticky_size``)
    # may differ from the producer's.
    values = [b"%d:" % i + b"v" * size for i, size in enumerate(sizes)]

    async def fill(use_many: bool) -> tuple[dict[int, list[bytes | None]], list[int], Any]:
        producer = await _unsent_producer(
            partitioner=None if sticky_size is None else StickyPartitioner(sticky_size),
            max_batch_size=batch_size,
        )
        random.seed(seed)
        offsets: list[int] = []
        if use_many:
            for first in range(0, len(values), chunk):
                futures = await producer.send_many(TOPIC, values[first : first + chunk])
                offsets += [f._index for f in futures]
        else:
            for value in values:
                offsets.append((await producer.send(TOPIC, value))._index)
        state = dict(producer._partitioner._current)  # type: ignore[attr-defined]
        queued = _queued(producer)
        await producer.stop(timeout=0)
        return queued, offsets, state

    async def both() -> None:
        assert await fill(True) == await fill(False)

    asyncio.run(both())


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=60),
    probes=st.lists(st.integers(min_value=-3, max_value=3), min_size=1, max_size=40),
    batch_size=st.integers(min_value=60, max_value=2000),
)
def test_send_fills_batches_exactly_as_the_general_encoder(
    sizes: list[int], probes: list[int], batch_size: int
) -> None:
    # send() encodes the common record in place with a cautious size check (the length
    # prefix counted as 3 bytes); a record that fits only by the exact count goes to
    # ProducerBatch.append. Either way each batch takes exactly the records the general
    # encoder alone puts in it, byte for byte. After random records come probes sized
    # to the room left in the batch, give or take a few bytes (the boundary cases).
    stamp = int(time.time() * 1000)
    values: list[bytes] = []
    expected: list[bytes] = []
    batch: ProducerBatch | None = None

    def add(value: bytes) -> None:
        nonlocal batch
        values.append(value)
        if batch is None or not batch.append(stamp, None, value, None):
            if batch is not None:
                expected.append(bytes(batch.buf))
            batch = ProducerBatch(
                TopicPartition(TOPIC, 0),
                max_size=max(batch_size - records.V2_HEADER_SIZE, 1),  # header included
                compression=0,
                transactional=False,
            )
            assert batch.append(stamp, None, value, None)

    for size in sizes:
        add(b"v" * size)
    for delta in probes:
        assert batch is not None
        room = batch.max_size - len(batch.buf) + delta
        n = batch.record_count
        vlen = max(0, room - 8)
        while vlen > 0 and len(records.encode_record(n, 0, None, b"p" * vlen, None)) > room:
            vlen -= 1
        add(b"p" * vlen)
    assert batch is not None
    expected.append(bytes(batch.buf))

    async def fill() -> list[bytes]:
        producer = await _unsent_producer(max_batch_size=batch_size)
        for value in values:
            await producer.send(TOPIC, value, partition=0, timestamp_ms=stamp)
        got = [bytes(b.buf) for b in producer._batches[TopicPartition(TOPIC, 0)]]
        await producer.stop(timeout=0)
        return got

    assert asyncio.run(fill()) == expected


async def test_records_sent_after_a_caller_built_batch_follow_it() -> None:
    # send() appends to the batch it last used while that batch is open; a batch queued
    # by send_batch() closes it, so what is sent next goes after the caller's records.
    producer = await _unsent_producer()
    await producer.send(TOPIC, b"before", partition=0)
    built = producer.create_batch()
    built.append(key=None, value=b"built", timestamp=None)
    await producer.send_batch(built, TOPIC, partition=0)
    after = await producer.send(TOPIC, b"after", partition=0)
    await producer.send_many(TOPIC, [b"many"], partition=0)
    assert _queued(producer)[0] == [b"before", b"built", b"after", b"many"]
    assert after._index == 0  # the first record of a batch of its own
    await producer.stop(timeout=0)


async def test_a_record_sent_after_its_batch_expired_goes_in_a_new_batch() -> None:
    # The open batch expires (the broker is unreachable): the next record must not be
    # appended to it (its records have already failed), and is delivered once the
    # broker is back.
    producer = await _unsent_producer(linger_ms=0, delivery_timeout_ms=300, request_timeout_ms=300)
    first = await producer.send(TOPIC, b"first", partition=0)
    with pytest.raises(errors.KafkaTimeoutError):
        await asyncio.wait_for(first, 5)
    second = await producer.send(TOPIC, b"second", partition=0)
    assert second._batch is not first._batch and not second.done()
    assert _queued(producer)[0] == [b"second"]
    await producer.stop(timeout=0)


async def test_a_batch_that_cannot_be_encoded_fails_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever slipped past send()'s checks: the batch's records get the error, and the
    # sender goes on (later records are delivered, under a new epoch: a sequence hole).
    producer, client = await start()
    client.on_request = lambda: asyncio.get_running_loop().call_soon(
        client.produce_requests[-1].answer, 0, 7
    )
    real_build = records.batch_parts
    calls = 0

    def build_once_broken(*args: Any, **kwargs: Any) -> tuple[bytes, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OverflowError("scripted")
        return real_build(*args, **kwargs)

    monkeypatch.setattr("aiokafka_lite.producer.accumulator.batch_parts", build_once_broken)
    first = await producer.send(TOPIC, b"a", partition=0)
    with pytest.raises(errors.SerializationError, match=r"cannot be encoded.*scripted"):
        await asyncio.wait_for(first, 5)
    second = await producer.send(TOPIC, b"b", partition=0)
    assert (await asyncio.wait_for(second, 5)).offset == 7
    assert client.produce_requests[0].batch.producer_epoch == 1
    assert producer.metrics()["records_failed"] == 1
    await producer.stop(timeout=1)


async def test_send_encodes_every_record_shape() -> None:
    """send() encodes the common record (no key, no headers, small) in place and hands
    everything else to the batch's general encoder: whatever the mix, each record reads
    back as sent, with its own timestamp, in order."""
    producer, client = await start(max_batch_size=64 * 1024, enable_idempotence=False, acks=1)

    client.answer_every_request()
    now = int(time.time() * 1000)
    sizes = [0, 1, 63, 64, 127, 128, 8191, 8192, 16363, 16364, 16365, 16384, 20000]
    sent: list[tuple[bytes | None, bytes | None, int | None, list[tuple[str, bytes]]]] = []
    for i in range(120):
        value: bytes | None = b"%03d" % i + b"v" * sizes[i % len(sizes)]
        key = b"k%d" % i if i % 5 == 1 else None
        stamp = (None, now - 1000, now + 20_000, None, None)[i % 5]  # before / far after
        headers = [("h", b"%d" % i)] if i % 7 == 3 else []
        if i % 11 == 10:
            value = None
        sent.append((key, value, stamp, headers))
    futures = [
        await producer.send(TOPIC, value, key, partition=0, timestamp_ms=stamp, headers=headers)
        for key, value, stamp, headers in sent
    ]
    results = await asyncio.wait_for(asyncio.gather(*futures), 5)
    got = [r for req in client.produce_requests for r in req.batch.records()]
    assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _, _ in sent]
    assert [list(r.headers) for r in got] == [h for _, _, _, h in sent]
    for (_, _, stamp, _), record, meta in zip(sent, got, results, strict=True):
        assert record.timestamp == meta.timestamp
        if stamp is not None:
            assert record.timestamp == stamp
    assert [m.offset for m in results] == list(range(len(sent)))
    await producer.stop(timeout=1)


async def test_delivery_timeout_holds_while_the_epoch_bump_cannot_reach_the_broker() -> None:
    # A bump is due (a real sequence gap) and the broker is unreachable: each attempt
    # to get the new epoch keeps retrying for up to request_timeout_ms. The records
    # waiting meanwhile must still fail at their delivery_timeout_ms, not when the
    # attempt gives up (which, starting just before their deadline, is up to a whole
    # request_timeout_ms later).
    producer, client = await start(request_timeout_ms=2000, delivery_timeout_ms=2000)
    loop = asyncio.get_running_loop()
    first = await producer.send(TOPIC, b"v", partition=0)
    await until(lambda: len(client.produce_requests) == 1)
    client.init_unreachable = True
    client.produce_requests[0].answer(errors.OutOfOrderSequenceNumberError.errno)
    await until(lambda: len(client.init_requests) >= 2)  # the bump is being tried
    await asyncio.sleep(0.3)
    started = loop.time()
    later = await producer.send(TOPIC, b"w", partition=0)
    for fut in (first, later):
        with pytest.raises(errors.KafkaTimeoutError, match="delivery_timeout_ms"):
            await asyncio.wait_for(fut, 10)
    assert loop.time() - started < 2.0 + 0.5
    # Once the broker is back, the bump completes and records flow again.
    client.init_unreachable = False
    ok = await producer.send(TOPIC, b"x", partition=0)
    await until(lambda: len(client.produce_requests) == 2, timeout=8)
    resent = client.produce_requests[1]
    assert resent.values == [b"x"] and resent.batch.producer_epoch == 1
    resent.answer(0, base_offset=3)
    assert (await ok).offset == 3
    await asyncio.wait_for(producer.stop(timeout=1), 5)


async def test_lost_responses_resent_in_order_and_acknowledged_as_duplicates() -> None:
    # The outage scenario: three requests in flight when the broker goes silent. It had
    # written the first two; their answers are lost. The first request times out, which
    # closes the connection and fails the other two. The batches go again one at a
    # time, in send order, with their sequences and epoch; the broker answers
    # DUPLICATE_SEQUENCE_NUMBER for the two it has (offset unknown: -1, as in Java).
    producer, client = await start(max_batch_size=60)
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(3)]
    await until(lambda: len(client.produce_requests) == 3)
    first, second, third = client.produce_requests
    assert [r.batch.base_sequence for r in (first, second, third)] == [0, 1, 2]
    first.fail(errors.KafkaTimeoutError("Produce request timed out"))
    second.fail(errors.KafkaConnectionError("connection closed"))
    third.fail(errors.KafkaConnectionError("connection closed"))
    answers = [(errors.DuplicateSequenceNumberError.errno, -1)] * 2 + [(0, 2)]
    for n, (code, offset) in enumerate(answers):
        await until(requests_sent(client, 4 + n))
        await asyncio.sleep(0.02)
        assert len(client.produce_requests) == 4 + n  # one at a time
        request = client.produce_requests[-1]
        assert request.batch.base_sequence == n
        assert request.batch.producer_epoch == first.batch.producer_epoch
        assert first_byte(request) == b"%d" % n
        request.answer(code, offset)
    assert [(await f).offset for f in futures] == [-1, -1, 2]
    assert producer.metrics()["duplicate_batches"] == 2
    # Nothing was lost: no epoch bump, the next record follows in sequence.
    later = await producer.send(TOPIC, b"later", partition=0)
    await until(lambda: len(client.produce_requests) == 7)
    request = client.produce_requests[-1]
    assert (request.batch.base_sequence, request.values) == (3, [b"later"])
    request.answer(0, base_offset=3)
    assert (await later).offset == 3
    assert len(client.init_requests) == 1
    await producer.stop(timeout=1)


class _KafkaPartition:
    """A partition's log as Kafka keeps it for one producer: a batch is written only if
    its sequence follows the last one of its epoch (0 for a new epoch), and a batch
    sent again is recognised as a duplicate only among the last five written."""

    def __init__(self) -> None:
        self.values: list[bytes | None] = []
        #: The last five batches written: (epoch, first sequence, last sequence, offset).
        self.batches: list[tuple[int, int, int, int]] = []

    def append(self, request: Request) -> tuple[int, int]:
        """Write the request's batch; (error code, base offset) as Kafka answers."""
        batch = request.batch
        epoch, first = batch.producer_epoch, batch.base_sequence
        for known_epoch, known_first, _, offset in self.batches:
            if (known_epoch, known_first) == (epoch, first):
                return 0, offset  # a duplicate: its offset, nothing written
        last = self.batches[-1] if self.batches else None
        expected = last[2] + 1 if last is not None and last[0] == epoch else 0
        if first != expected:
            return errors.OutOfOrderSequenceNumberError.errno, -1
        offset = len(self.values)
        self.values += request.values
        self.batches = [*self.batches, (epoch, first, first + len(request.values) - 1, offset)]
        del self.batches[:-5]
        return 0, offset


async def test_a_retry_in_flight_holds_back_new_batches_of_its_partition() -> None:
    # Five batches are written, the first answered REQUEST_TIMED_OUT. Its retry (alone:
    # the other four were answered) is written as a duplicate, but the connection drops
    # before the answer. Had new batches gone out behind the retry, the broker would
    # have written them too, and the first batch would have left its window of five:
    # each further retry refused as out of order until delivery_timeout_ms, and every
    # batch behind it stuck. Held back while the retry is unanswered, nothing passes it.
    producer, client = await start(max_batch_size=60, delivery_timeout_ms=3000)
    log = _KafkaPartition()
    held: list[Request] = []
    first_five: list[tuple[Request, int, int]] = []
    holding = True

    def broker() -> None:
        request = client.produce_requests[-1]
        code, offset = log.append(request)
        sent = len(client.produce_requests)
        if sent == 1:
            code = errors.RequestTimedOutError.errno  # (written all the same)
        if holding and (held or (sent > 1 and first_byte(request) == b"0")):
            held.append(request)  # from the first retry on: lost with the connection
            return
        if sent <= 5:  # the five written before any answer comes back
            first_five.append((request, code, offset))
            if sent == 5:
                for answered in first_five:
                    asyncio.get_running_loop().call_soon(answered[0].answer, *answered[1:])
            return
        asyncio.get_running_loop().call_soon(request.answer, code, offset)

    client.on_request = broker
    first = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(5)]
    await until(requests_sent(client, 5))
    later = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(5, 9)]
    await until(lambda: bool(held))  # the retry went out (when is the sender's choice)
    await asyncio.sleep(0.05)
    assert first_byte(held[0]) == b"0"  # the retry
    sent_meanwhile = len(held) - 1
    holding = False
    for request in held:
        request.fail(errors.KafkaConnectionError("connection closed"))
    held.clear()
    results = await asyncio.wait_for(asyncio.gather(*first, *later, return_exceptions=True), 10)
    outcomes = [r if isinstance(r, BaseException) else r.offset for r in results]
    assert outcomes == list(range(9)), outcomes
    assert sent_meanwhile == 0
    assert [int(v[:1]) for v in log.values if v is not None] == list(range(9))
    assert len(client.init_requests) == 1  # no epoch bump
    await producer.stop(timeout=1)


async def test_after_an_epoch_bump_batches_go_again_in_send_order() -> None:
    # A real gap bumps the epoch with batches to resend and one never sent; they get
    # fresh sequences under the new epoch, in send order. When those requests fail too
    # (the connection drops), the batches go again in send order: the retries one at a
    # time, the one never sent only behind them.
    producer, client = await start(max_batch_size=60, max_in_flight_requests_per_connection=2)
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(3)]
    await until(lambda: len(client.produce_requests) == 2)
    client.produce_requests[0].answer(errors.OutOfOrderSequenceNumberError.errno)  # real gap
    client.produce_requests[1].answer(errors.OutOfOrderSequenceNumberError.errno)
    # The bump; then the first two go under epoch 1 (two in flight), the third waits.
    await until(lambda: len(client.produce_requests) == 4)
    bumped = client.produce_requests[2:4]
    assert len(client.init_requests) == 2
    assert [(r.batch.producer_epoch, r.batch.base_sequence) for r in bumped] == [(1, 0), (1, 1)]
    assert [first_byte(r) for r in bumped] == [b"0", b"1"]

    # From now on every request is answered as it comes: the first two batches are
    # retries (one at a time), the third follows with its first epoch-1 sequence,
    # never ahead of them.
    def answer_it() -> None:
        request = client.produce_requests[-1]
        asyncio.get_running_loop().call_soon(request.answer, 0, request.batch.base_sequence)

    client.on_request = answer_it
    for r in bumped:
        r.fail(errors.KafkaConnectionError("connection closed"))
    await asyncio.wait_for(asyncio.gather(*futures), 5)
    resent = client.produce_requests[4:]
    assert [first_byte(r) for r in resent] == [b"0", b"1", b"2"]
    assert [(r.batch.producer_epoch, r.batch.base_sequence) for r in resent] == [
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert [(await f).offset for f in futures] == [0, 1, 2]
    assert len(client.init_requests) == 2
    await producer.stop(timeout=1)


# --- the broker lost acknowledged records ------------------------------------------------


async def _acked_first(client: FakeClient, producer: Producer, offset: int) -> None:
    """Send one record and have the broker acknowledge it at ``offset`` (sequence 0)."""
    fut = await producer.send(TOPIC, b"acked", partition=0)
    await until(requests_sent(client, 1))
    client.produce_requests[0].answer(0, base_offset=offset)
    assert (await fut).offset == offset


async def test_out_of_order_after_acks_reports_acknowledged_data_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The broker acknowledged offset 10 (sequence 0), then crashed and came back without
    # it: it refuses the next batch (sequence 1) as out of order, and the two in flight
    # behind it as well. The next batch fails with AcknowledgedDataLostError (typed,
    # with the partition and the last acknowledged offset and sequence), an ERROR line
    # and a counter; the producer bumps its epoch and the two behind it are written.
    producer, client = await start(max_batch_size=60)
    await _acked_first(client, producer, offset=10)
    futures = [await producer.send(TOPIC, b"%d" % i + b"." * 40, partition=0) for i in range(3)]
    await until(requests_sent(client, 4))
    gap, *behind = client.produce_requests[1:4]
    assert [r.batch.base_sequence for r in (gap, *behind)] == [1, 2, 3]
    with caplog.at_level("ERROR", logger="aiokafka_lite.producer.sender"):
        for request in (gap, *behind):
            request.answer(errors.OutOfOrderSequenceNumberError.errno)
        with pytest.raises(errors.AcknowledgedDataLostError) as info:
            await asyncio.wait_for(futures[0], 5)
    lost = info.value
    assert (lost.topic, lost.partition) == (TOPIC, 0)
    assert (lost.last_acked_offset, lost.last_acked_sequence) == (10, 0)
    assert isinstance(lost.broker_error, errors.OutOfOrderSequenceNumberError)
    assert lost.__cause__ is lost.broker_error
    assert "t-0" in str(lost) and "offset 10" in str(lost), lost
    [line] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "lost acknowledged records of t-0" in line.getMessage()
    metrics = producer.metrics()
    assert metrics["acknowledged_data_lost"] == 1 and metrics["records_failed"] == 1
    # The epoch bump (KIP-360), then the two behind it go again, in order, from sequence 0.
    await until(requests_sent(client, 6))
    assert [(r["producer_id"], r["producer_epoch"]) for r in client.init_requests] == [
        (-1, -1),
        (77, 0),
    ]
    resent = client.produce_requests[4:6]
    assert [first_byte(r) for r in resent] == [b"1", b"2"]
    assert [(r.batch.producer_epoch, r.batch.base_sequence) for r in resent] == [(1, 0), (1, 1)]
    for n, request in enumerate(resent):
        request.answer(0, base_offset=20 + n)
    assert [(await f).offset for f in futures[1:]] == [20, 21]
    # And the producer goes on: no further error, the next record follows in sequence.
    client.answer_every_request()
    later = await producer.send(TOPIC, b"later", partition=0)
    await asyncio.wait_for(later, 5)
    assert client.produce_requests[-1].batch.base_sequence == 2
    assert producer.metrics()["acknowledged_data_lost"] == 1
    await producer.stop(timeout=1)


async def test_unknown_producer_id_with_acked_records_in_the_log_is_data_lost() -> None:
    # UNKNOWN_PRODUCER_ID while the log still starts at or before the last acknowledged
    # offset: the broker forgot the producer along with records it had acknowledged.
    producer, client = await start()
    await _acked_first(client, producer, offset=10)
    fut = await producer.send(TOPIC, b"b", partition=0)
    await until(requests_sent(client, 2))
    client.produce_requests[1].answer(errors.UnknownProducerIdError.errno, log_start_offset=10)
    with pytest.raises(errors.AcknowledgedDataLostError) as info:
        await asyncio.wait_for(fut, 5)
    assert isinstance(info.value.broker_error, errors.UnknownProducerIdError)
    assert info.value.last_acked_offset == 10
    client.answer_every_request()
    later = await producer.send(TOPIC, b"c", partition=0)
    await asyncio.wait_for(later, 5)
    last = client.produce_requests[-1].batch
    assert (last.producer_epoch, last.base_sequence) == (1, 0)  # under the new epoch
    assert producer.metrics()["acknowledged_data_lost"] == 1
    await producer.stop(timeout=1)


async def test_unknown_producer_id_after_retention_resends_under_a_new_epoch() -> None:
    # The log now starts after the last acknowledged offset: retention removed the
    # producer's records and its state with them. Nothing acknowledged was lost: the
    # batch goes again under a new epoch and succeeds.
    producer, client = await start()
    await _acked_first(client, producer, offset=10)
    fut = await producer.send(TOPIC, b"b", partition=0)
    await until(requests_sent(client, 2))
    client.produce_requests[1].answer(errors.UnknownProducerIdError.errno, log_start_offset=11)
    await until(requests_sent(client, 3))
    resent = client.produce_requests[2]
    assert (resent.batch.producer_epoch, resent.batch.base_sequence) == (1, 0)
    resent.answer(0, base_offset=11)
    assert (await fut).offset == 11
    assert producer.metrics()["acknowledged_data_lost"] == 0
    await producer.stop(timeout=1)


async def test_unknown_producer_id_without_a_log_start_offset_is_asked_again() -> None:
    # Without the log start offset retention and loss cannot be told apart: the batch
    # goes again as it was (same epoch and sequence) until an answer carries it.
    producer, client = await start()
    await _acked_first(client, producer, offset=10)
    fut = await producer.send(TOPIC, b"b", partition=0)
    await until(requests_sent(client, 2))
    client.produce_requests[1].answer(errors.UnknownProducerIdError.errno, log_start_offset=-1)
    await until(requests_sent(client, 3))
    again = client.produce_requests[2]
    assert (again.batch.producer_epoch, again.batch.base_sequence) == (0, 1)
    assert len(client.init_requests) == 1  # no bump
    again.answer(0, base_offset=11)
    assert (await fut).offset == 11
    await producer.stop(timeout=1)


async def test_a_full_batch_fits_max_batch_size_header_included() -> None:
    """max_batch_size bounds the whole batch (Java's batch.size): with max_request_size
    equal to it, a full batch, built by send() or by the caller, is still sendable
    (found by the benchmark: a caller-built 1 MiB batch came out 61 bytes too large)."""
    limit = 1 << 20
    producer = await _unsent_producer(max_batch_size=limit, max_request_size=limit)
    try:
        for _ in range(3 * limit // 1000):
            await producer.send(TOPIC, b"v" * 1000, partition=0)
        full = producer._batches[TopicPartition(TOPIC, 0)][0]
        assert limit - 1100 < full.size() <= limit
        batch = producer.create_batch()
        while batch.append(timestamp=None, key=None, value=b"w" * 1000):
            pass
        assert limit - 1100 < batch.size() <= limit
        await producer.send_batch(batch, TOPIC, partition=1)  # no RecordTooLargeError
    finally:
        await producer.stop(timeout=0)
