"""Producer calls racing the transaction's end, the coordinator lock, a failed epoch bump,
and send_many failing part-way: a scripted broker, which answers (or holds) each request
as the case needs, since a real one cannot be made to hold AddPartitionsToTxn or to time
out InitProducerId on cue."""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.structs import TopicPartition

from ._helpers import ScriptedBroker

pytestmark = pytest.mark.asyncio


class Log:
    """What the scripted broker was asked: records written, AddPartitionsToTxn, EndTxn."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int, bytes | None]] = []
        self.added: list[tuple[str, int]] = []
        self.ended: list[bool] = []
        self.next_offset = 0


def _records(data: Any) -> bytes:
    return b"".join(bytes(x) for x in data) if isinstance(data, tuple | list) else bytes(data)


def _produce(log: Log) -> Any:
    def answer(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        from aiokafka_lite.protocol.records import decode_records

        topics = []
        for t in body["topic_data"]:
            parts = []
            for p in t["partition_data"]:
                records = decode_records(_records(p["records"]))
                log.written += [(t["name"], p["index"], r.value) for r in records]
                parts.append(
                    {
                        "index": p["index"],
                        "error_code": 0,
                        "base_offset": log.next_offset,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                    }
                )
                log.next_offset += len(records)
            topics.append({"name": t["name"], "partition_responses": parts})
        return {"responses": topics, "throttle_time_ms": 0}

    return answer


def _init_pid(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
    epoch = 0 if body["producer_epoch"] < 0 else body["producer_epoch"] + 1
    return {"error_code": 0, "producer_id": 1000, "producer_epoch": epoch, "throttle_time_ms": 0}


def _add_partitions(log: Log) -> Any:
    def answer(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        results = []
        for t in body["v3_and_below_topics"]:
            log.added += [(t["name"], p) for p in t["partitions"]]
            results.append(
                {
                    "name": t["name"],
                    "results_by_partition": [
                        {"partition_index": p, "partition_error_code": 0} for p in t["partitions"]
                    ],
                }
            )
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}

    return answer


def _end_txn(log: Log) -> Any:
    def answer(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        log.ended.append(body["committed"])
        return {"throttle_time_ms": 0, "error_code": 0}

    return answer


def txn_producer(scripted: ScriptedBroker, **options: Any) -> Producer:
    """The transactional producer of these tests ("tx", no linger), with ``options``."""
    return Producer(
        bootstrap_servers=scripted.bootstrap, transactional_id="tx", linger_ms=0, **options
    )


@pytest.fixture
async def broker() -> AsyncIterator[tuple[ScriptedBroker, Log]]:
    broker, log = ScriptedBroker(), Log()
    broker.topics["t"] = 2
    broker.scripts[ApiKey.PRODUCE] = _produce(log)
    broker.scripts[ApiKey.INIT_PRODUCER_ID] = _init_pid
    broker.scripts[ApiKey.ADD_PARTITIONS_TO_TXN] = _add_partitions(log)
    broker.scripts[ApiKey.END_TXN] = _end_txn(log)
    await broker.start()
    try:
        yield broker, log
    finally:
        await broker.stop()


async def test_a_send_outlived_by_its_transaction_fails_and_joins_no_other(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """send() called in transaction 1, still waiting for a new topic's metadata when
    transaction 1 commits, raises: its record is in neither transaction 1 nor the next."""
    scripted, log = broker
    async with txn_producer(scripted) as producer:
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"in-1", partition=0)
        late = asyncio.create_task(producer.send("late", b"sent-in-1", partition=0))
        await asyncio.sleep(0.3)  # (waiting for the topic to appear)
        await producer.commit_transaction()
        scripted.topics["late"] = 1
        with pytest.raises(errors.IllegalOperationError, match="sends only inside a transaction"):
            await late
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"in-2", partition=0)
        await producer.commit_transaction()
    assert [value for _, _, value in log.written] == [b"in-1", b"in-2"]
    assert ("late", 0) not in log.added
    assert log.ended == [True, True]


async def test_a_send_outlived_by_its_transaction_fails_even_when_another_began(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """The same with transaction 2 already open when the send's wait ends."""
    scripted, log = broker
    async with txn_producer(scripted) as producer:
        await producer.begin_transaction()
        late = asyncio.create_task(producer.send("late", b"sent-in-1", partition=0))
        await asyncio.sleep(0.3)
        await producer.abort_transaction()
        await producer.begin_transaction()
        scripted.topics["late"] = 1
        with pytest.raises(errors.IllegalOperationError, match="ended while the send waited"):
            await late
        await producer.send_and_wait("t", b"in-2", partition=0)
        await producer.commit_transaction()
    assert [value for _, _, value in log.written] == [b"in-2"]


async def test_transaction_calls_keep_their_timeout_while_the_sender_holds_the_coordinator(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """An AddPartitionsToTxn the coordinator never answers holds the coordinator lock for
    request_timeout_ms (8 s); calls given 1 s raise KafkaTimeoutError after about 1 s."""
    scripted, _ = broker
    answer_add = scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN]

    def first_only(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        return answer_add(header, body, count) if count == 1 else None

    scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN] = first_only
    scripted.scripts[ApiKey.ADD_OFFSETS_TO_TXN] = lambda h, b, c: {
        "throttle_time_ms": 0,
        "error_code": 0,
    }
    producer = txn_producer(scripted, request_timeout_ms=8000)
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"a", partition=0)
        await producer.send("t", b"b", partition=1)  # its AddPartitionsToTxn is held
        await asyncio.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError, match="AddOffsetsToTxn did not start"):
            await producer.send_offsets_to_transaction(
                {TopicPartition("src", 0): 5}, "group", timeout=1.0
            )
        assert time.monotonic() - started < 2.5
        started = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError, match="EndTxn did not start"):
            await producer.abort_transaction(timeout=1.0)
        assert time.monotonic() - started < 2.5
    finally:
        await producer.stop(timeout=2)


async def test_an_abort_whose_epoch_bump_timed_out_bumps_when_called_again(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """A record failed after it was sent: the abort must bump the epoch. The abort's
    InitProducerId gets no answer (the abort times out); the abort called again bumps,
    and the next transaction's records use the new epoch from sequence 0."""
    scripted, log = broker
    asked: list[tuple[int, int]] = []
    sent: list[tuple[int, int]] = []  # (epoch, base sequence) of each produced batch
    answer_produce = scripted.scripts[ApiKey.PRODUCE]

    def init_pid(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        asked.append((body["producer_id"], body["producer_epoch"]))
        # (The bump and its retry within the abort's 1.5 s get no answer.)
        return None if count in (2, 3) else _init_pid(header, body, count)

    def produce(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        partition = body["topic_data"][0]["partition_data"][0]
        _, epoch, sequence = struct.unpack_from(">qhi", _records(partition["records"]), 43)
        sent.append((epoch, sequence))
        if count == 1:  # INVALID_RECORD: nothing written, not retriable
            return {
                "responses": [
                    {
                        "name": "t",
                        "partition_responses": [
                            {
                                "index": partition["index"],
                                "error_code": 87,
                                "base_offset": -1,
                                "log_append_time_ms": -1,
                                "log_start_offset": 0,
                            }
                        ],
                    }
                ],
                "throttle_time_ms": 0,
            }
        return answer_produce(header, body, count)

    scripted.scripts[ApiKey.INIT_PRODUCER_ID] = init_pid
    scripted.scripts[ApiKey.PRODUCE] = produce
    producer = txn_producer(scripted, request_timeout_ms=1000, delivery_timeout_ms=4000)
    await producer.start()
    try:
        await producer.begin_transaction()
        with pytest.raises(errors.InvalidRecordError):
            await producer.send_and_wait("t", b"r1", partition=0)
        with pytest.raises(errors.KafkaTimeoutError):
            await producer.abort_transaction(timeout=1.5)
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"r2", partition=0)
        await producer.commit_transaction()
    finally:
        await producer.stop(timeout=2)
    assert asked[0] == (-1, -1)
    assert asked[1:] == [(1000, 0)] * (len(asked) - 1)  # the bump, asked again
    assert len(asked) >= 4
    assert sent == [(0, 0), (1, 0)]
    assert [value for _, _, value in log.written] == [b"r2"]


async def test_send_many_failing_part_way_hands_over_the_futures_of_what_it_buffered(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    scripted, log = broker
    async with Producer(bootstrap_servers=scripted.bootstrap, linger_ms=0) as producer:
        with pytest.raises(errors.SerializationError) as bad_value:
            await producer.send_many("t", [b"a1", b"a2", "not bytes", b"a4"], partition=0)
        with pytest.raises(ValueError, match="fewer keys") as short_keys:
            await producer.send_many("t", [b"k1", b"k2", b"k3"], keys=[b"x", b"y"], partition=0)
        with pytest.raises(errors.SerializationError) as first:
            await producer.send_many("t", ["not bytes"], partition=0)
        for caught, values in ((bad_value, [b"a1", b"a2"]), (short_keys, [b"k1", b"k2"])):
            futures = caught.value.buffered_futures  # type: ignore[attr-defined]
            assert [(await f).offset for f in futures] == sorted(
                offset for offset, (_, _, value) in enumerate(log.written) if value in values
            )
        assert not hasattr(first.value, "buffered_futures")  # nothing was buffered
    assert [value for _, _, value in log.written] == [b"a1", b"a2", b"k1", b"k2"]


async def test_send_many_meeting_a_too_large_record_mid_run_keeps_the_run_accounted(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """A value too large for max_request_size met inside a keyless run of records going
    into an open batch: the records of the run before it were appended, so their futures
    are among buffered_futures, and the batch (which later records join) still resolves
    every future. (They were missing, and the batch's completion then failed on them:
    its futures, that of a later send() included, never resolved.)"""
    scripted, log = broker
    async with Producer(
        bootstrap_servers=scripted.bootstrap, linger_ms=50, max_request_size=2000
    ) as producer:
        with pytest.raises(errors.RecordTooLargeError) as too_large:
            await producer.send_many("t", [b"a1", b"a2", b"a3", b"x" * 5000, b"a5"], partition=0)
        buffered = too_large.value.buffered_futures  # type: ignore[attr-defined]
        later = await producer.send("t", b"later", partition=0)
        offsets = await asyncio.wait_for(asyncio.gather(*buffered, later), 5)
    assert len(buffered) == 3
    assert [md.offset for md in offsets] == [0, 1, 2, 3]
    assert [value for _, _, value in log.written] == [b"a1", b"a2", b"a3", b"later"]


async def test_a_cancelled_send_has_buffered_nothing_its_caller_does_not_know_of(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """A task producing in a tight loop, cancelled: the cancellation lands where send()
    yields to the sender (when a batch filled up). The records that go out are exactly
    those whose futures send() returned; a cancelled send_many hands over the futures of
    what it buffered (buffered_futures). (send() yielded after appending the record: a
    cancellation there sent the record while its caller got CancelledError, one record
    per cancellation.)"""
    scripted, log = broker
    async with Producer(
        bootstrap_servers=scripted.bootstrap, linger_ms=100, max_batch_size=200
    ) as producer:
        returned: list[Any] = []

        async def produce() -> None:
            for i in itertools.count():
                returned.append(await producer.send("t", b"r%05d" % i, partition=0))

        for _ in range(5):
            task = asyncio.create_task(produce())
            await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        many = asyncio.create_task(
            producer.send_many("t", [b"m%05d" % i for i in range(2000)], partition=1)
        )
        await asyncio.sleep(0)
        many.cancel()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await many
        returned += cancelled.value.buffered_futures  # type: ignore[attr-defined]
        await producer.flush(5)
    written = [value for _, _, value in log.written]
    assert 0 < len(returned) == len(written)
    assert any(value.startswith(b"m") for value in written)
    assert sorted(f.result().offset for f in returned) == list(range(len(written)))


async def test_an_abort_that_drops_a_retry_restarts_the_sequences(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """A batch refused with NOT_LEADER_OR_FOLLOWER waits for its retry when the
    transaction is aborted: its records fail, and the sequence numbers it took are never
    written. The broker, which checks sequences as Kafka does, refuses a later sequence
    of the same epoch as out of order: the abort must bump the epoch (sequences restart
    at 0), or the next transaction's records are refused until they expire."""
    scripted, log = broker
    expected: dict[tuple[int, int], int] = {}  # (epoch, partition) -> next sequence
    sent: list[tuple[int, int]] = []  # (epoch, base sequence) of each produced batch
    answer_produce = scripted.scripts[ApiKey.PRODUCE]
    refused = asyncio.Event()

    def refuse(partition: int, code: int) -> dict[str, Any]:
        response = {"index": partition, "error_code": code, "base_offset": -1}
        response |= {"log_append_time_ms": -1, "log_start_offset": 0}
        return {
            "responses": [{"name": "t", "partition_responses": [response]}],
            "throttle_time_ms": 0,
        }

    def produce(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        partition = body["topic_data"][0]["partition_data"][0]
        data = _records(partition["records"])
        _, epoch, sequence = struct.unpack_from(">qhi", data, 43)
        (records,) = struct.unpack_from(">i", data, 57)
        sent.append((epoch, sequence))
        if count == 2:
            refused.set()
            return refuse(partition["index"], errors.NotLeaderOrFollowerError.errno)
        if sequence != expected.get((epoch, partition["index"]), 0):
            return refuse(partition["index"], errors.OutOfOrderSequenceNumberError.errno)
        expected[epoch, partition["index"]] = sequence + records
        return answer_produce(header, body, count)

    scripted.scripts[ApiKey.PRODUCE] = produce
    producer = txn_producer(
        scripted, retry_backoff_ms=1000, delivery_timeout_ms=3000, request_timeout_ms=2000
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"r1", partition=0)
        retried = await producer.send("t", b"r2", partition=0)
        await asyncio.wait_for(refused.wait(), 5)
        await asyncio.sleep(0.1)  # (refused: waiting 1 s for its retry)
        await producer.abort_transaction()
        with pytest.raises(errors.TransactionAbortedError):
            await retried
        await producer.begin_transaction()
        await asyncio.wait_for(producer.send_and_wait("t", b"r3", partition=0), 5)
        await producer.commit_transaction()
    finally:
        await producer.stop(timeout=2)
    assert sent == [(0, 0), (0, 1), (1, 0)]
    assert [value for _, _, value in log.written] == [b"r1", b"r3"]


async def test_a_commit_waiting_for_offsets_that_fail_does_not_commit(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """commit_transaction() called while the TxnOffsetCommit of send_offsets_to_transaction()
    is unanswered waits for it, and when it fails (the transaction is then abortable)
    raises its error: no EndTxn(commit) of a transaction without its offsets."""
    scripted, log = broker
    scripted.scripts[ApiKey.ADD_OFFSETS_TO_TXN] = lambda header, body, count: {
        "throttle_time_ms": 0,
        "error_code": 0,
    }
    scripted.scripts[ApiKey.TXN_OFFSET_COMMIT] = lambda header, body, count: None
    async with txn_producer(scripted) as producer:
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"out", partition=0)
        offsets = asyncio.create_task(
            producer.send_offsets_to_transaction({TopicPartition("t", 0): 5}, "group")
        )
        for _ in range(100):
            await asyncio.sleep(0.01)
            if scripted.unanswered:
                break
        commit = asyncio.create_task(producer.commit_transaction())
        await asyncio.sleep(0.1)
        assert log.ended == []  # (the EndTxn waits for the offsets)
        scripted.answer_late(
            {
                "throttle_time_ms": 0,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 30}]}],
            }
        )
        with pytest.raises(errors.GroupAuthorizationFailedError):
            await offsets
        with pytest.raises(errors.GroupAuthorizationFailedError):
            await commit
        assert producer.transaction_state == "abortable_error"
        await producer.abort_transaction()
    assert log.ended == [False]


async def test_group_metadata_on_a_broker_without_txn_offset_commit_v3_is_refused(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """TxnOffsetCommit below v3 has no generation, member id or group instance id. As
    Java (UnsupportedVersionException from the request's builder, a fatal error of the
    producer), consumer group metadata with a member or generation is refused rather than
    sent without them (which let a zombie member's offsets through); the bare group id,
    or metadata saying no more than it, still goes out at v2."""
    scripted, log = broker
    scripted.max_versions[ApiKey.TXN_OFFSET_COMMIT] = 2
    versions: list[int] = []

    def txn_offset_commit(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
        versions.append(header.api_version)
        return {
            "throttle_time_ms": 0,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}],
        }

    scripted.scripts[ApiKey.ADD_OFFSETS_TO_TXN] = lambda h, b, c: {
        "throttle_time_ms": 0,
        "error_code": 0,
    }
    scripted.scripts[ApiKey.TXN_OFFSET_COMMIT] = txn_offset_commit
    tp = TopicPartition("t", 0)
    member = SimpleNamespace(group_id="g", generation_id=4, member_id="m-1", group_instance_id=None)
    async with txn_producer(scripted) as producer:
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"out", partition=0)
        await producer.send_offsets_to_transaction({tp: 1}, "g")
        await producer.send_offsets_to_transaction(
            {tp: 2},
            SimpleNamespace(group_id="g", generation_id=-1, member_id="", group_instance_id=None),
        )
        await producer.commit_transaction()
        assert versions == [2, 2]
        await producer.begin_transaction()
        with pytest.raises(
            errors.UnsupportedVersionError, match=r"TxnOffsetCommit v2.*generation 4.*'m-1'"
        ):
            await producer.send_offsets_to_transaction({tp: 3}, member)
        assert versions == [2, 2]  # (nothing sent without the member)
        assert producer.transaction_state == "fatal_error"
        with pytest.raises(errors.UnsupportedVersionError):
            await producer.commit_transaction()
    assert log.ended == [True]


class Coordinator:
    """A transaction coordinator that knows whether it has the transaction open: an
    AddPartitionsToTxn or AddOffsetsToTxn that arrives opens it (answered or not, as
    ``answer`` says); EndTxn closes it, and is refused with INVALID_TXN_STATE when
    nothing is open (as Kafka's coordinator does for an Empty or completed one)."""

    def __init__(self, scripted: ScriptedBroker, log: Log) -> None:
        self.open = False
        self.answer_offsets: Any = lambda count: True  # False: hold the answer
        self.arrives: Any = lambda count: True  # False: as if lost before the coordinator
        answer_add = scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN]

        def add_offsets(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
            if self.arrives(count):
                self.open = True
            if not self.answer_offsets(count):
                return None
            return {"throttle_time_ms": 0, "error_code": 0}

        def add_partitions(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
            self.open = True
            return answer_add(header, body, count)

        def end_txn(header: RequestHeader, body: dict[str, Any], count: int) -> Any:
            log.ended.append(body["committed"])
            code = 0 if self.open else errors.InvalidTxnStateError.errno
            self.open = False
            return {"throttle_time_ms": 0, "error_code": code}

        scripted.scripts[ApiKey.ADD_OFFSETS_TO_TXN] = add_offsets
        scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN] = add_partitions
        scripted.scripts[ApiKey.END_TXN] = end_txn
        scripted.scripts[ApiKey.TXN_OFFSET_COMMIT] = lambda h, b, c: {
            "throttle_time_ms": 0,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}],
        }


@pytest.mark.parametrize("arrives", [True, False])
async def test_an_abort_after_an_unanswered_add_offsets_ends_the_transaction(
    broker: tuple[ScriptedBroker, Log], arrives: bool
) -> None:
    """send_offsets_to_transaction() times out with its AddOffsetsToTxn unanswered: the
    coordinator may have added the group, so the transaction may be open there. The
    abort sends EndTxn(abort) (it sent none: the group was known added only on an
    answer, and the coordinator kept the transaction open until
    transaction_timeout_ms, the producer's next one joining it). When the request in fact
    never arrived the coordinator answers INVALID_TXN_STATE, which then means nothing
    was open: the abort succeeds. An abort of a transaction that sent nothing still
    sends no EndTxn."""
    scripted, log = broker
    coordinator = Coordinator(scripted, log)
    coordinator.answer_offsets = lambda count: count > 1
    coordinator.arrives = lambda count: arrives or count > 1
    tp = TopicPartition("src", 0)
    async with txn_producer(scripted, request_timeout_ms=500) as producer:
        await producer.begin_transaction()
        await producer.abort_transaction()
        assert log.ended == []  # (nothing sent, nothing to end)
        await producer.begin_transaction()
        with pytest.raises(errors.KafkaTimeoutError, match="AddOffsetsToTxn"):
            await producer.send_offsets_to_transaction({tp: 5}, "group", timeout=0.3)
        assert coordinator.open is arrives
        await producer.abort_transaction()
        assert log.ended == [False]
        assert not coordinator.open
        assert producer.transaction_state == "ready"
        # The next transaction is one of its own, and commits.
        await producer.begin_transaction()
        await producer.send_and_wait("t", b"next", partition=0)
        await producer.send_offsets_to_transaction({tp: 6}, "group")
        await producer.commit_transaction()
        assert log.ended == [False, True]


async def test_an_abort_after_an_unanswered_add_partitions_ends_the_transaction(
    broker: tuple[ScriptedBroker, Log],
) -> None:
    """The sender's AddPartitionsToTxn gets no answer (the coordinator added the
    partition): the abort sends EndTxn(abort)."""
    scripted, log = broker
    coordinator = Coordinator(scripted, log)
    answer_add = scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN]
    scripted.scripts[ApiKey.ADD_PARTITIONS_TO_TXN] = lambda h, b, c: (
        answer_add(h, b, c) if c > 2 else (setattr(coordinator, "open", True) or None)
    )
    async with txn_producer(scripted, request_timeout_ms=500) as producer:
        await producer.begin_transaction()
        held = await producer.send("t", b"held", partition=0)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if scripted.calls.get(ApiKey.ADD_PARTITIONS_TO_TXN):
                break
        await asyncio.sleep(0.6)  # (its request timeout passed: outcome unknown)
        await producer.abort_transaction()
        with pytest.raises(errors.TransactionAbortedError):
            await held
        assert log.ended == [False]
        assert not coordinator.open
    assert log.written == []
