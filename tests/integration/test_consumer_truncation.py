"""Log truncation under a consumer (KIP-320), against a scripted broker whose leader
changes and whose new leader's log ends before the consumer's position (an unclean
leader election): records 0-9 in leader epoch 0 are read, then the leader's epoch is 1
and its log holds 0-6 from epoch 0 and 7-8 written anew in epoch 1.

With validation the consumer asks the new leader where epoch 0 ends (7), moves there
and reads the new 7-8 (``auto_offset_reset="latest"`` or ``"earliest"``), or raises
`LogTruncationError` (``"none"``). Without it (a broker lacking OffsetsForLeaderEpoch)
the fetch at 10 is out of range and ``"latest"`` moves to 9: records 7-8 are never read
(``"earliest"`` reads 0-8 again).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from aiokafka_lite.consumer import Consumer, LogTruncationError
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.protocol.records import RecordBatchBuilder
from aiokafka_lite.structs import TopicPartition
from tests.integration._helpers import ScriptedBroker

TP = TopicPartition("t", 0)
OFFSET_OUT_OF_RANGE = 1
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


def batch(base: int, epoch: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(base_offset=base, partition_leader_epoch=epoch, max_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(1000 + base + i, None, value, None)
    return builder.build()


class EpochBroker(ScriptedBroker):
    """One partition whose log is a list of (base offset, epoch, values) batches, led at
    leader epoch ``epoch``: Fetch and OffsetsForLeaderEpoch police the epoch the client
    sends, as Kafka's leader does, and answer from the log."""

    def __init__(self, missing_apis: set[int] | None = None) -> None:
        super().__init__(missing_apis)
        self.topics["t"] = 1
        self.epoch = 0
        self.log: list[tuple[int, int, list[bytes]]] = []
        self.fetched: list[int] = []
        self.metadata_requests = 0
        self.validations: list[dict[str, Any]] = []
        self.validation_error = 0  # answered to every OffsetsForLeaderEpoch when set
        self.scripts[ApiKey.FETCH] = self._fetch
        self.scripts[ApiKey.LIST_OFFSETS] = self._list_offsets
        self.scripts[ApiKey.OFFSET_FOR_LEADER_EPOCH] = self._offsets_for_leader_epoch

    def end(self) -> int:
        return self.log[-1][0] + len(self.log[-1][2]) if self.log else 0

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if header.api_key == ApiKey.METADATA and answer is not None:
            self.metadata_requests += 1
            for topic in answer["topics"]:
                for p in topic["partitions"]:
                    p["leader_epoch"] = self.epoch
        return answer

    def _epoch_error(self, current: int) -> int:
        if current < 0 or current == self.epoch:
            return 0
        return FENCED_LEADER_EPOCH if current < self.epoch else UNKNOWN_LEADER_EPOCH

    def _fetch(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        p = body["topics"][0]["partitions"][0]
        offset = p["fetch_offset"]
        self.fetched.append(offset)
        code = self._epoch_error(p.get("current_leader_epoch", -1))
        if not code and offset > self.end():
            code = OFFSET_OUT_OF_RANGE
        data = b""
        if not code:
            for base, epoch, values in self.log:
                if base + len(values) > offset:
                    data += batch(base, epoch, values)
        part = {
            "partition_index": 0,
            "error_code": code,
            "high_watermark": self.end(),
            "last_stable_offset": self.end(),
            "log_start_offset": 0,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": data,
        }
        responses = [{"topic": "t", "partitions": [part]}]
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    def _list_offsets(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        p = body["topics"][0]["partitions"][0]
        offset = 0 if p["timestamp"] == -2 else self.end()
        part = {
            "partition_index": 0,
            "error_code": 0,
            "timestamp": -1,
            "offset": offset,
            "leader_epoch": self.epoch,
        }
        return {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [part]}]}

    def _offsets_for_leader_epoch(self, header: Any, body: dict[str, Any], n: int) -> Any:
        p = body["topics"][0]["partitions"][0]
        self.validations.append(p)
        code = self.validation_error or self._epoch_error(p["current_leader_epoch"])
        # Kafka's answer: the largest epoch <= the one asked about, and where it ends
        # (where the next epoch starts, or the log's end).
        epoch, end = -1, -1
        if not code:
            for base, batch_epoch, _ in self.log:
                if batch_epoch > p["leader_epoch"]:
                    end = base
                    break
                epoch = batch_epoch
            else:
                end = self.end()
            if epoch < 0:
                end = -1
        part = {"error_code": code, "partition": 0, "leader_epoch": epoch, "end_offset": end}
        return {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [part]}]}

    def truncate(self) -> None:
        """The unclean election: the new leader (epoch 1) has 0-6 of epoch 0 and 7-8 of
        its own."""
        self.epoch = 1
        self.log = [
            (0, 0, [b"a%d" % i for i in range(7)]),
            (7, 1, [b"new7", b"new8"]),
        ]


async def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def consumer_of(broker: EpochBroker, **options: Any) -> AsyncIterator[Consumer]:
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        **{"fetch_max_wait_ms": 50, "retry_backoff_ms": 50, "request_timeout_ms": 5000, **options},
    )
    try:
        await consumer.start()
        consumer.assign([TP])
        consumer.seek(TP, 0)
        yield consumer
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


async def read_for(consumer: Consumer, seconds: float) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=50)).values():
            got += [(r.offset, r.value) for r in records]
    return got


async def read_ten_then_truncate(broker: EpochBroker, consumer: Consumer) -> None:
    broker.log = [(0, 0, [b"a%d" % i for i in range(10)])]
    got: list[tuple[int, bytes]] = []
    while len(got) < 10:
        for records in (await consumer.getmany(timeout_ms=5000)).values():
            got += [(r.offset, r.value) for r in records]
    assert [o for o, _ in got] == list(range(10))
    assert await consumer.position(TP) == 10
    broker.truncate()


@pytest.mark.parametrize("reset", ["latest", "earliest"])
async def test_a_truncated_log_is_read_on_from_where_the_new_leader_diverges(reset: str) -> None:
    # The consumer learns of epoch 1 from its next fetch, fenced (its metadata says 0),
    # and the refresh that follows; the position is validated before any fetch at 10.
    broker = EpochBroker()
    async with consumer_of(broker, auto_offset_reset=reset) as consumer:
        await read_ten_then_truncate(broker, consumer)
        got = await read_for(consumer, 1.5)
        # Without validation: [] with "latest" (reset to 9), 0-8 again with "earliest".
        assert got == [(7, b"new7"), (8, b"new8")]
        assert await consumer.position(TP) == 9
    assert broker.validations[-1] == {
        "partition": 0,
        "current_leader_epoch": 1,
        "leader_epoch": 0,
    }
    after = broker.fetched[broker.fetched.index(10) :]
    assert after[: after.index(7)].count(10) <= 1  # the fenced one; then 7, no reset


async def test_a_truncated_log_with_reset_none_raises_log_truncation() -> None:
    broker = EpochBroker()
    async with consumer_of(broker, auto_offset_reset="none") as consumer:
        await read_ten_then_truncate(broker, consumer)
        with pytest.raises(LogTruncationError) as raised:
            await read_for(consumer, 3)
        error = raised.value
        assert error.offsets == {TP: 10} and error.divergent_offsets == {TP: 7}
        assert "t-0" in str(error) and "position 10" in str(error) and "7" in str(error)
        with pytest.raises(LogTruncationError):  # raised again until a seek
            await consumer.getmany(timeout_ms=0)
        consumer.seek(TP, 7)
        got = await read_for(consumer, 1.0)
        assert got == [(7, b"new7"), (8, b"new8")]


async def test_no_validation_while_the_leader_epoch_stays() -> None:
    broker = EpochBroker()
    async with consumer_of(broker, metadata_max_age_ms=200) as consumer:
        broker.log = [(0, 0, [b"a%d" % i for i in range(10)])]
        got = await read_for(consumer, 1.5)
        assert [o for o, _ in got] == list(range(10))
        await wait_until(lambda: broker.metadata_requests >= 3, 5, "metadata refreshes")
    assert broker.validations == []
    assert broker.calls.get(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0) == 0


async def test_a_broker_without_offsets_for_leader_epoch_skips_validation() -> None:
    broker = EpochBroker(missing_apis={ApiKey.OFFSET_FOR_LEADER_EPOCH})
    async with consumer_of(broker, auto_offset_reset="latest") as consumer:
        await read_ten_then_truncate(broker, consumer)
        got = await read_for(consumer, 1.5)
        # As before KIP-320: the fetch at 10 is out of range, "latest" moves to 9.
        assert got == []
        assert await consumer.position(TP) == 9
    assert broker.validations == []
    assert broker.fetched[broker.fetched.index(10) :].count(9) >= 1  # out of range, reset


async def test_a_position_waiting_long_for_validation_shows_in_health() -> None:
    """Nothing is fetched for a partition while its position awaits validation; when
    the new leader keeps answering a retriable error, health() said nothing of it (the
    consumer looked healthy and idle). Past request_timeout_ms it names the partition,
    the position and the last answer; validated, the problem is gone and reading goes on."""
    broker = EpochBroker()
    broker.validation_error = 6  # NOT_LEADER_OR_FOLLOWER: metadata behind, asked again
    async with consumer_of(broker, request_timeout_ms=1000) as consumer:
        await read_ten_then_truncate(broker, consumer)
        await read_for(consumer, 0.3)
        assert not any("not validated" in p for p in consumer.health().problems)
        got = await read_for(consumer, 1.2)
        assert got == []
        problems = [p for p in consumer.health().problems if "not validated" in p]
        assert len(problems) == 1, consumer.health().problems
        assert problems[0].startswith("t-0: position 10 not validated with its new leader for")
        assert "NOT_LEADER_OR_FOLLOWER" in problems[0]
        broker.validation_error = 0
        got = await read_for(consumer, 1.0)
        assert got == [(7, b"new7"), (8, b"new8")]
        assert not any("not validated" in p for p in consumer.health().problems)
