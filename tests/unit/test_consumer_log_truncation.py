"""KIP-320 without a broker: a position under a new leader epoch is validated with
OffsetsForLeaderEpoch before it is fetched again, and moved (or raised about) when the
new leader's log ends before it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.consumer import ConsumerConfig, LogTruncationError
from aiokafka_lite.consumer.fetcher import Fetcher
from aiokafka_lite.consumer.subscription import OffsetResetStrategy, SubscriptionState
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

TP = TopicPartition("t", 0)
FENCED_LEADER_EPOCH = 74


class _Cluster:
    def __init__(self) -> None:
        self.epochs: dict[TopicPartition, int] = {TP: 0}

    def leader_for(self, tp: TopicPartition) -> int:
        return 1

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        return self.epochs.get(tp, -1)

    def topic_id(self, topic: str) -> None:
        return None

    def broker(self, node_id: int) -> object:
        return object()


class _Conn:
    def __init__(self, version: int | None) -> None:
        self.version = version

    def version_for(self, api_key: int) -> int:
        if self.version is None:
            raise errors.UnsupportedVersionError("no OffsetForLeaderEpoch")
        return self.version


class _Client:
    """Answers OffsetsForLeaderEpoch from ``answers`` (one per request, in turn); every
    request goes to ``log`` (``"fetch <offset>"``, ``"epochs"``); Fetches get no records."""

    def __init__(self, version: int | None = 4) -> None:
        self.cluster = _Cluster()
        self.conn = _Conn(version)
        self.answers: list[Any] = []  # an answer, or an exception to raise
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.log: list[str] = []
        self.metadata_requests = 0

    def add_metadata_listener(self, callback: Any) -> None:
        pass

    def remove_metadata_listener(self, callback: Any) -> None:
        pass

    def request_metadata_update(self) -> asyncio.Future[None]:
        self.metadata_requests += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def get_connection(self, node_id: int) -> _Conn:
        return self.conn

    async def send(self, node: int, api: object, body: Any, **kw: Any) -> dict[str, Any]:
        if int(api) == 1:  # type: ignore[call-overload]
            offset = body["topics"][0]["partitions"][0]["fetch_offset"]
            self.log.append(f"fetch {offset}")
            await asyncio.sleep(0.01)  # a long poll that ends without records
            part = {"partition_index": 0, "error_code": 0, "high_watermark": 100, "records": b""}
            return {
                "error_code": 0,
                "session_id": 0,
                "responses": [{"topic": "t", "partitions": [part]}],
            }
        self.log.append("epochs")
        self.requests.append((kw["version"], body))
        reply = self.answers.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def answer(code: int = 0, end_offset: int = -1, leader_epoch: int = -1) -> dict[str, Any]:
    partition = {
        "error_code": code,
        "partition": 0,
        "leader_epoch": leader_epoch,
        "end_offset": end_offset,
    }
    return {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [partition]}]}


def consumer_at(
    position: int, position_epoch: int, reset: str = "latest", version: int | None = 4
) -> tuple[Fetcher, SubscriptionState, Any]:
    client: Any = _Client(version)
    subs = SubscriptionState(OffsetResetStrategy(reset))
    fetcher = Fetcher(client, subs, ConsumerConfig(retry_backoff_ms=10))
    subs.assign_from_user([TP])
    subs.seek(TP, position, position_epoch)
    return fetcher, subs, client


def test_no_validation_while_the_leader_epoch_stays() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    state = subs.state(TP)
    assert state.current_leader_epoch == 0  # noted at the assignment
    fetcher._check_leader_epochs(client.cluster)
    assert not state.awaiting_validation and state.fetch_offset == 10
    assert not fetcher._to_validate


def test_a_new_leader_epoch_holds_the_fetch_and_drops_what_was_fetched() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    state = subs.state(TP)
    state.fetch_offset = 14  # records 10-13 from the old leader wait in the buffer
    epoch = state.epoch
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    assert state.awaiting_validation and state.fetch_offset is None
    assert state.epoch > epoch  # the buffered records are dropped
    assert state.position == 10 and set(fetcher._to_validate) == {TP}
    assert subs.all_consumed() == {}  # a position that may be past the log's end
    state.drop_fetched()  # a pause, say: still nothing to fetch
    assert state.fetch_offset is None
    client.cluster.epochs[TP] = 0  # older metadata from another broker: ignored
    fetcher._check_leader_epochs(client.cluster)
    assert state.current_leader_epoch == 1


def test_a_position_without_an_epoch_is_not_validated() -> None:
    fetcher, subs, client = consumer_at(10, -1)
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    assert not state.awaiting_validation and state.fetch_offset == 10
    assert state.current_leader_epoch == 1


def test_a_log_holding_the_position_keeps_it() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    fetcher._apply_validation(TP, state, 12, 0)
    assert not state.awaiting_validation
    assert (state.position, state.fetch_offset, state.leader_epoch) == (10, 10, 0)
    assert subs.all_consumed() == {TP: OffsetAndMetadata(10, "", 0)}


@pytest.mark.parametrize("reset", ["latest", "earliest"])
def test_a_truncated_log_moves_the_position_to_its_end(reset: str) -> None:
    fetcher, subs, client = consumer_at(10, 0, reset)
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    fetcher._apply_validation(TP, state, 7, 0)
    assert not state.awaiting_validation and state.error is None
    assert (state.position, state.fetch_offset, state.leader_epoch) == (7, 7, 0)


def test_a_truncated_log_with_reset_none_raises_log_truncation() -> None:
    fetcher, subs, client = consumer_at(10, 0, "none")
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    fetcher._apply_validation(TP, state, 7, 0)
    error = fetcher.pending_error()
    assert isinstance(error, LogTruncationError)
    assert isinstance(error, errors.OffsetOutOfRangeError)
    assert error.offsets == {TP: 10} and error.divergent_offsets == {TP: 7}
    assert "t-0" in str(error) and "10" in str(error) and "7" in str(error)
    assert state.position == 10 and state.fetch_offset is None
    assert subs.all_consumed() == {}
    subs.seek(TP, 7)  # the user's seek ends it
    assert fetcher.pending_error() is None and state.fetch_offset == 7
    assert subs.all_consumed() == {TP: OffsetAndMetadata(7, "", -1)}


@pytest.mark.parametrize("reset", ["latest", "none"])
def test_an_epoch_the_leader_does_not_know_resets_or_raises(reset: str) -> None:
    # As Java's consumer: no end offset to move to, so the reset policy decides.
    fetcher, subs, client = consumer_at(10, 3, reset)
    client.cluster.epochs[TP] = 4
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    fetcher._apply_validation(TP, state, -1, -1)
    if reset == "latest":
        assert state.reset_strategy is OffsetResetStrategy.LATEST and state.position is None
    else:
        error = fetcher.pending_error()
        assert isinstance(error, LogTruncationError)
        assert error.offsets == {TP: 10} and error.divergent_offsets == {}


async def wait_until(condition: Any) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met")


async def new_epoch_then_fetch(fetcher: Fetcher, client: Any) -> int:
    """Start fetching, give the partition leader epoch 1 once a fetch went out, and stop
    after the next fetch; the index in ``client.log`` where the new epoch was seen."""
    fetcher.start()
    try:
        await wait_until(lambda: client.log)
        client.cluster.epochs[TP] = 1
        fetcher._on_metadata(client.cluster)
        mark = len(client.log)
        await wait_until(lambda: any(e.startswith("fetch") for e in client.log[mark + 1 :]))
    finally:
        await fetcher.close()
    return mark


@pytest.mark.parametrize(
    "failure",
    [
        answer(FENCED_LEADER_EPOCH),
        answer(75),  # UNKNOWN_LEADER_EPOCH
        answer(6),  # NOT_LEADER_OR_FOLLOWER
        errors.KafkaConnectionError("connection lost"),
    ],
    ids=["fenced", "unknown-epoch", "not-leader", "connection-lost"],
)
async def test_validation_is_retried_after_a_retriable_error_then_fetching_resumes(
    failure: Any,
) -> None:
    fetcher, subs, client = consumer_at(10, 0)
    client.answers = [failure, answer(0, 7, 0)]
    mark = await new_epoch_then_fetch(fetcher, client)
    state = subs.state(TP)
    assert (state.position, state.leader_epoch, state.awaiting_validation) == (7, 0, False)
    # No fetch while the position waits (the one in flight was sent before), then at 7.
    assert client.log[mark : mark + 3] == ["epochs", "epochs", "fetch 7"]
    assert client.metadata_requests >= 1  # refreshed before asking again
    assert [v for v, _ in client.requests] == [4, 4]
    sent = client.requests[0][1]
    assert sent["replica_id"] == -1
    assert sent["topics"] == [
        {
            "topic": "t",
            "partitions": [{"partition": 0, "current_leader_epoch": 1, "leader_epoch": 0}],
        }
    ]


@pytest.mark.parametrize("version", [None, 2])
async def test_a_broker_that_cannot_validate_is_fetched_from_as_it_is(version: int | None) -> None:
    fetcher, subs, client = consumer_at(10, 0, version=version)
    await new_epoch_then_fetch(fetcher, client)
    assert client.requests == []
    assert set(client.log) == {"fetch 10"}
    state = subs.state(TP)
    assert (state.position, state.awaiting_validation) == (10, False)


async def test_an_answer_for_a_position_seeked_away_is_dropped() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    client.cluster.epochs[TP] = 1
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    asked = {TP: (state, 10, 0)}
    subs.seek(TP, 3)
    assert fetcher._handle_validation(1, asked, answer(0, 7, 0)) is False  # type: ignore[arg-type]
    assert (state.position, state.fetch_offset) == (3, 3)


async def test_a_committed_position_with_an_epoch_is_validated_before_fetching() -> None:
    # As Java's consumer: the log may have been truncated under a committed offset
    # (10 in epoch 0) since the commit; the leader says epoch 0 ends at 7.
    client: Any = _Client()
    client.cluster.epochs[TP] = 1
    client.answers = [answer(0, 7, 0)]
    subs = SubscriptionState(OffsetResetStrategy.LATEST)

    async def committed(tps: Any) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return {TP: OffsetAndMetadata(10, "", 0)}

    fetcher = Fetcher(client, subs, ConsumerConfig(retry_backoff_ms=10), committed)
    subs.assign_from_user([TP])
    fetcher.start()
    try:
        await wait_until(lambda: client.log)
        await wait_until(lambda: len(client.log) >= 2)
    finally:
        await fetcher.close()
    assert client.log[:2] == ["epochs", "fetch 7"]
    assert client.requests[0][1]["topics"][0]["partitions"] == [
        {"partition": 0, "current_leader_epoch": 1, "leader_epoch": 0}
    ]


async def test_a_committed_position_without_an_epoch_is_fetched_at_once() -> None:
    client: Any = _Client()
    subs = SubscriptionState(OffsetResetStrategy.LATEST)

    async def committed(tps: Any) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return {TP: OffsetAndMetadata(10, "", -1)}

    fetcher = Fetcher(client, subs, ConsumerConfig(retry_backoff_ms=10), committed)
    subs.assign_from_user([TP])
    fetcher.start()
    try:
        await wait_until(lambda: client.log)
    finally:
        await fetcher.close()
    assert client.log[0] == "fetch 10" and client.requests == []


async def test_an_error_that_asking_again_would_repeat_is_raised_for_the_partition() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    client.answers = [answer(29)]  # TOPIC_AUTHORIZATION_FAILED
    fetcher.start()
    try:
        await wait_until(lambda: client.log)
        client.cluster.epochs[TP] = 1
        fetcher._on_metadata(client.cluster)
        await wait_until(lambda: fetcher.pending_error() is not None)
        await asyncio.sleep(0.05)
    finally:
        await fetcher.close()
    assert isinstance(fetcher.pending_error(), errors.TopicAuthorizationFailedError)
    assert client.log.count("epochs") == 1 and subs.all_consumed() == {}


def test_a_topic_created_again_has_its_leader_epochs_noted_anew() -> None:
    fetcher, subs, client = consumer_at(10, 0)
    client.cluster.epochs[TP] = 5
    fetcher._check_leader_epochs(client.cluster)
    subs.seek(TP, 10, 0)  # (validated, say)
    subs.forget_positions("t")  # deleted and created again: its epochs start at 0
    client.cluster.epochs[TP] = 0
    fetcher._check_leader_epochs(client.cluster)
    state = subs.state(TP)
    state.seek(3, 0)
    client.cluster.epochs[TP] = 1  # a new leader of the new topic
    fetcher._check_leader_epochs(client.cluster)
    assert state.awaiting_validation  # without the reset: 1 <= 5, not seen as new
