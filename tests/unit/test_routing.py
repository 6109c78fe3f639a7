"""The one request path (aiokafka_lite.routing) and the backoff (aiokafka_lite.retry),
against a small fake cluster client: errors a real broker cannot be made to give on
demand (a leader that moves twice, a coordinator that loads, a leader that stalls while
another answers), with the timing they imply. No broker needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import pytest

from aiokafka_lite import errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.retry import BACKOFF_JITTER, Deadline, backoff_delay, retried_error
from aiokafka_lite.routing import (
    PartitionAnswer,
    leader_moved,
    request_any_node,
    send_to_coordinator,
    send_to_leaders,
)
from aiokafka_lite.structs import TopicPartition

BACKOFF_MS = 20
NOT_LEADER = errors.NotLeaderOrFollowerError.errno
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)

# node, body, how many requests so far (this one included) -> the answer
Answer = Callable[[int, dict[str, Any], int], Awaitable[dict[str, Any]]]


class FakeCluster:
    def __init__(self, leaders: dict[TopicPartition, int]) -> None:
        self.leaders = leaders

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)


class FakeClient:
    """What the request path uses of `KafkaClient`; requests answered by ``answer``."""

    retry_backoff_ms = BACKOFF_MS

    def __init__(self, leaders: dict[TopicPartition, int], answer: Answer) -> None:
        self.cluster = FakeCluster(leaders)
        self.answer = answer
        self.requests: list[tuple[int, int, dict[str, Any]]] = []
        #: The version cap each request was sent with (None: the highest both speak).
        self.versions: list[int | None] = []
        self.tracked: set[str] = set()
        self.refreshes = 0
        #: Run on each metadata refresh (a leader election, say).
        self.on_refresh: Callable[[], None] = lambda: None

    async def send_before(
        self,
        node_id: int,
        api_key: int,
        body: Mapping[str, Any],
        deadline: float,
        *,
        version: int | None = None,
    ) -> dict[str, Any]:
        self.requests.append((node_id, api_key, dict(body)))
        self.versions.append(version)
        try:
            return await asyncio.wait_for(
                self.answer(node_id, dict(body), len(self.requests)), deadline - time.monotonic()
            )
        except asyncio.TimeoutError:
            raise errors.KafkaTimeoutError("no answer in time") from None

    def add_topics(self, topics: set[str]) -> None:
        self.tracked |= topics

    def request_metadata_update(self) -> asyncio.Future[None]:
        self.refreshes += 1
        self.on_refresh()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def nodes(self) -> list[int]:
        return [node for node, _, _ in self.requests]


def as_client(fake: FakeClient) -> KafkaClient:
    return cast(KafkaClient, fake)


def build(partitions: list[TopicPartition]) -> dict[str, Any]:
    return {"partitions": list(partitions)}


def parse(response: dict[str, Any]) -> dict[TopicPartition, tuple[int, Any]]:
    return dict(response["answers"])


def answering(code_of: Callable[[int, TopicPartition, int], int]) -> Answer:
    """Each partition answered ``(code_of(node, tp, n), "<node>:<topic>-<partition>")``."""

    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {
            "answers": {
                tp: (code_of(node, tp, n), f"{node}:{tp.topic}-{tp.partition}")
                for tp in body["partitions"]
            }
        }

    return answer


async def to_leaders(
    fake: FakeClient, partitions: list[TopicPartition], timeout_ms: int = 2000, **kw: Any
) -> dict[TopicPartition, PartitionAnswer[Any]]:
    return await send_to_leaders(
        as_client(fake),
        ApiKey.LIST_OFFSETS,
        partitions,
        build,
        parse,
        Deadline(timeout_ms, "the test call"),
        **kw,
    )


# --- partition leaders -----------------------------------------------------------------


async def test_one_request_per_leader_with_its_partitions() -> None:
    fake = FakeClient({A0: 1, A1: 2, B0: 1}, answering(lambda node, tp, n: 0))
    answers = await to_leaders(fake, [A0, A1, B0])
    assert sorted((node, tuple(body["partitions"])) for node, _, body in fake.requests) == [
        (1, (A0, B0)),
        (2, (A1,)),
    ]
    assert {tp: a.value for tp, a in answers.items()} == {A0: "1:a-0", A1: "2:a-1", B0: "1:b-0"}
    assert all(a.error is None and not a.timed_out for a in answers.values())
    assert list(answers) == [A0, A1, B0]  # in the order asked


async def test_a_moved_leader_is_retried_after_a_refresh_and_a_backoff() -> None:
    fake = FakeClient({A0: 1}, answering(lambda node, tp, n: NOT_LEADER if n < 3 else 0))

    def elect() -> None:
        fake.cluster.leaders[A0] += 1  # each refresh names the next node

    fake.on_refresh = elect
    started = time.monotonic()
    answers = await to_leaders(fake, [A0])
    elapsed = time.monotonic() - started
    assert answers[A0] == PartitionAnswer("3:a-0")
    assert fake.nodes() == [1, 2, 3]  # asked again of the new leader each time
    assert fake.refreshes == 2
    assert elapsed >= 2 * BACKOFF_MS / 1000 * (1 - BACKOFF_JITTER)


async def test_retriable_errors_are_retried_until_the_deadline() -> None:
    fake = FakeClient({A0: 1, A1: 1}, answering(lambda node, tp, n: NOT_LEADER if tp == A0 else 0))
    started = time.monotonic()
    answers = await to_leaders(fake, [A0, A1], timeout_ms=300)
    elapsed = time.monotonic() - started
    assert answers[A1] == PartitionAnswer("1:a-1")
    assert answers[A0].timed_out and isinstance(answers[A0].error, errors.NotLeaderOrFollowerError)
    # Not past the deadline, and no retry whose backoff would not end before it.
    assert 0.3 - BACKOFF_MS / 1000 * (1 + BACKOFF_JITTER) <= elapsed < 0.3 + 0.1
    # Spaced by the backoff: about one request per backoff, no busy loop.
    assert 5 <= len(fake.requests) <= 0.3 / (BACKOFF_MS / 1000 * (1 - BACKOFF_JITTER)) + 1
    assert fake.requests[-1][2]["partitions"] == [A0]  # A1's answer was kept, not asked again


async def test_the_caller_decides_what_is_retried() -> None:
    # UNKNOWN_TOPIC_OR_PARTITION is retriable, but not a moved leader: the admin's
    # policy (leader_moved) answers with it at once.
    unknown = errors.UnknownTopicOrPartitionError.errno
    fake = FakeClient({A0: 1}, answering(lambda node, tp, n: unknown))
    answers = await to_leaders(fake, [A0], retry=leader_moved)
    assert isinstance(answers[A0].error, errors.UnknownTopicOrPartitionError)
    assert not answers[A0].timed_out and len(fake.requests) == 1


async def test_non_retriable_errors_are_the_answer_or_raised() -> None:
    denied = errors.TopicAuthorizationFailedError.errno

    def codes(node: int, tp: TopicPartition, n: int) -> int:
        return denied if tp == A0 else 0

    fake = FakeClient({A0: 1, A1: 1, B0: 2}, answering(codes))
    answers = await to_leaders(fake, [A0, A1, B0])
    assert isinstance(answers[A0].error, errors.TopicAuthorizationFailedError)
    assert "ListOffsets a-0" in str(answers[A0].error)
    assert answers[A1].value == "1:a-1" and answers[B0].value == "2:b-0"
    assert len(fake.requests) == 2  # no retry

    # raise_errors: the call fails once the round is over; the failing leader's other
    # answers are not handed over, the other leader's are.
    fake = FakeClient({A0: 1, A1: 1, B0: 2}, answering(codes))
    handed: list[dict[TopicPartition, Any]] = []
    with pytest.raises(errors.TopicAuthorizationFailedError):
        await to_leaders(
            fake,
            [A0, A1, B0],
            raise_errors=True,
            on_answer=lambda found: handed.append({tp: a.value for tp, a in found.items()}),
        )
    assert handed == [{B0: "2:b-0"}]


async def test_each_leaders_answers_are_handed_over_as_they_arrive() -> None:
    release = asyncio.Event()

    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if node == 2:
            await release.wait()  # node 2 stalls until told
        return await answering(lambda node, tp, n: 0)(node, body, n)

    fake = FakeClient({A0: 1, A1: 2, B0: 1}, answer)
    handed: list[set[TopicPartition]] = []

    def on_answer(found: Mapping[TopicPartition, PartitionAnswer[Any]]) -> None:
        handed.append(set(found))
        if not release.is_set():
            release.set()  # node 1 answered while node 2 held its request

    answers = await to_leaders(fake, [A0, A1, B0], on_answer=on_answer)
    assert handed == [{A0, B0}, {A1}]
    assert all(a.error is None for a in answers.values())


async def test_a_stalled_leader_times_out_only_its_own_partitions() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if node == 2:
            await asyncio.Event().wait()  # never answers
        return await answering(lambda node, tp, n: 0)(node, body, n)

    fake = FakeClient({A0: 1, A1: 2}, answer)
    handed: list[tuple[float, set[TopicPartition]]] = []
    started = time.monotonic()
    answers = await to_leaders(
        fake,
        [A0, A1],
        timeout_ms=400,
        on_answer=lambda found: handed.append((time.monotonic() - started, set(found))),
    )
    assert handed[0][1] == {A0} and handed[0][0] < 0.2  # not held up by node 2
    assert answers[A0].value == "1:a-0"
    assert answers[A1].timed_out and isinstance(answers[A1].error, errors.KafkaTimeoutError)
    assert time.monotonic() - started < 0.4 + 0.2


async def test_undeliverable_requests_are_retried_and_other_failures_raised() -> None:
    async def flaky(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            raise errors.KafkaConnectionError("connection reset")
        return await answering(lambda node, tp, n: 0)(node, body, n)

    fake = FakeClient({A0: 1}, flaky)
    answers = await to_leaders(fake, [A0])
    assert answers[A0].value == "1:a-0" and len(fake.requests) == 2

    async def old_broker(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        raise errors.UnsupportedVersionError("no such API")

    fake = FakeClient({A0: 1}, old_broker)
    with pytest.raises(errors.UnsupportedVersionError, match=r"ListOffsets.*the test call"):
        await to_leaders(fake, [A0])
    assert len(fake.requests) == 1


async def test_a_partition_without_a_leader_is_tracked_and_asked_again() -> None:
    fake = FakeClient({}, answering(lambda node, tp, n: 0))

    def elect() -> None:
        fake.cluster.leaders[B0] = 3

    fake.on_refresh = elect
    answers = await to_leaders(fake, [B0])
    assert fake.tracked == {"b"}
    assert answers[B0].value == "3:b-0" and fake.nodes() == [3]

    fake = FakeClient({}, answering(lambda node, tp, n: 0))
    answers = await to_leaders(fake, [B0], timeout_ms=200)
    assert answers[B0].timed_out and isinstance(answers[B0].error, errors.LeaderNotAvailableError)
    assert fake.requests == []


async def test_a_broker_that_leaves_a_partition_out_of_its_answer() -> None:
    async def partial(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"answers": {A0: (0, "x")}}

    fake = FakeClient({A0: 1, A1: 1}, partial)
    answers = await to_leaders(fake, [A0, A1])
    assert answers[A0].value == "x"
    assert isinstance(answers[A1].error, errors.UnknownServerError)
    assert "no result" in str(answers[A1].error)


# --- coordinators ------------------------------------------------------------------------


class Coordinator:
    """A ``find`` that names node 7, counting the lookups."""

    def __init__(self) -> None:
        self.lookups = 0
        self.lost: list[str] = []

    async def find(self, deadline: Deadline) -> int:
        self.lookups += 1
        return 7


def group_code(response: dict[str, Any]) -> errors.KafkaError | None:
    code = response["error_code"]
    not_ready = (
        errors.CoordinatorLoadInProgressError.errno,
        errors.NotCoordinatorError.errno,
        errors.CoordinatorNotAvailableError.errno,
    )
    return errors.error_for_code(code, "group 'g'") if code in not_ready else None


async def to_coordinator(
    fake: FakeClient,
    coordinator: Coordinator,
    timeout_ms: int = 2000,
    body: Any = None,
    retry_on: Callable[[dict[str, Any]], errors.KafkaError | None] = group_code,
    version: int | None = None,
) -> tuple[int, dict[str, Any]]:
    return await send_to_coordinator(
        as_client(fake),
        ApiKey.OFFSET_COMMIT,
        {"group_id": "g"} if body is None else body,
        Deadline(timeout_ms, "the commit"),
        find=coordinator.find,
        retry_on=retry_on,
        lost=coordinator.lost.append,
        version=version,
    )


async def test_a_coordinator_moving_and_loading_is_asked_again() -> None:
    codes = [errors.NotCoordinatorError.errno, errors.CoordinatorLoadInProgressError.errno, 0]

    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": codes[n - 1]}

    fake, coordinator = FakeClient({}, answer), Coordinator()
    started = time.monotonic()
    node, response = await to_coordinator(fake, coordinator)
    assert (node, response) == (7, {"error_code": 0})
    assert coordinator.lookups == 3 and len(fake.requests) == 3
    assert coordinator.lost == []  # the answers said so; nothing failed to arrive
    assert time.monotonic() - started >= 2 * BACKOFF_MS / 1000 * (1 - BACKOFF_JITTER)


async def test_an_answer_with_another_error_is_kept() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": errors.GroupAuthorizationFailedError.errno}

    fake = FakeClient({}, answer)
    _node, response = await to_coordinator(fake, Coordinator())
    assert response["error_code"] == errors.GroupAuthorizationFailedError.errno
    assert len(fake.requests) == 1


async def test_a_coordinator_request_keeps_its_version_cap_on_every_attempt() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": errors.NotCoordinatorError.errno if n == 1 else 0}

    fake = FakeClient({}, answer)
    await to_coordinator(fake, Coordinator(), version=4)
    assert fake.versions == [4, 4]


async def test_a_retry_on_that_raises_ends_the_call_with_its_error() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": errors.ProducerFencedError.errno}

    def fatal(response: dict[str, Any]) -> errors.KafkaError | None:
        raise errors.error_for_code(response["error_code"], "EndTxn")

    fake = FakeClient({}, answer)
    with pytest.raises(errors.ProducerFencedError):
        await to_coordinator(fake, Coordinator(), retry_on=fatal)
    assert len(fake.requests) == 1


async def test_a_deadline_until_a_time_set_before_keeps_that_end() -> None:
    end = time.monotonic() + 2.0
    await asyncio.sleep(0.05)
    deadline = Deadline.until(end, "EndTxn")
    assert deadline.end == end
    assert 1800 <= deadline.timeout_ms < 2000  # what was left of it when it was made


async def test_an_undelivered_request_tells_lost_and_is_retried() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            raise errors.KafkaConnectionError("connection reset")
        return {"error_code": 0}

    fake, coordinator = FakeClient({}, answer), Coordinator()
    await to_coordinator(fake, coordinator)
    assert len(coordinator.lost) == 1 and "OffsetCommit failed" in coordinator.lost[0]
    assert coordinator.lookups == 2

    async def refused(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        raise errors.IllegalStateError("not retriable")

    fake, coordinator = FakeClient({}, refused), Coordinator()
    with pytest.raises(errors.IllegalStateError):
        await to_coordinator(fake, coordinator)
    assert len(fake.requests) == 1 and coordinator.lost == []


async def test_a_coordinator_never_ready_ends_at_the_deadline_with_its_error() -> None:
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": errors.CoordinatorNotAvailableError.errno}

    fake = FakeClient({}, answer)
    started = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await to_coordinator(fake, Coordinator(), timeout_ms=300)
    elapsed = time.monotonic() - started
    assert "the commit did not complete within 300 ms" in str(caught.value)
    assert "CoordinatorNotAvailableError" in str(caught.value)
    assert 0.3 - BACKOFF_MS / 1000 * (1 + BACKOFF_JITTER) <= elapsed < 0.3 + 0.1
    assert 5 <= len(fake.requests) <= 0.3 / (BACKOFF_MS / 1000 * (1 - BACKOFF_JITTER)) + 1


async def test_a_backoff_that_overruns_the_deadline_still_names_the_last_error() -> None:
    # The loop stalls during the first backoff until past the end: the timeout must
    # still say what was being retried, not only that time ran out.
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            asyncio.get_running_loop().call_later(0.005, time.sleep, 0.4)
        return {"error_code": errors.CoordinatorNotAvailableError.errno}

    fake = FakeClient({}, answer)
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await to_coordinator(fake, Coordinator(), timeout_ms=300)
    assert "the commit did not complete within 300 ms" in str(caught.value)
    assert "CoordinatorNotAvailableError" in str(caught.value)
    assert len(fake.requests) == 1


async def test_any_node_backoff_that_overruns_the_deadline_names_the_connection_error() -> None:
    # As above for a request any node can answer: the connection fails, the loop stalls
    # in the backoff until past the end, and the timeout still says why it retried.
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            asyncio.get_running_loop().call_later(0.005, time.sleep, 0.4)
        raise errors.KafkaConnectionError("connection closed by the broker")

    fake = FakeClient({}, answer)
    fake.least_loaded_node = lambda: 3  # type: ignore[attr-defined]
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await request_any_node(
            as_client(fake), ApiKey.DESCRIBE_CONFIGS, {}, Deadline(300, "describe_configs")
        )
    assert "describe_configs did not complete within 300 ms" in str(caught.value)
    assert "connection closed by the broker" in str(caught.value)
    assert len(fake.requests) == 1


# A retry cut short: the first attempt's connection drops, the retry is still unanswered
# at the deadline. The timeout must name the dropped connection (why the call retried),
# not only that the last attempt got no answer.


async def dropped_then_silent(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
    if n == 1:
        raise errors.KafkaConnectionError("connection closed by the broker")
    await asyncio.sleep(10)
    raise AssertionError("the deadline ends the wait first")


async def test_a_coordinator_retry_cut_short_names_the_dropped_connection() -> None:
    fake = FakeClient({}, dropped_then_silent)
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await to_coordinator(fake, Coordinator(), timeout_ms=300)
    assert str(caught.value) == (
        "the commit did not complete within 300 ms (last error: connection closed by the broker)"
    )
    assert len(fake.requests) == 2


async def test_a_coordinator_lookup_cut_short_names_the_dropped_connection() -> None:
    async def find(deadline: Deadline) -> int:
        finds.append(deadline.remaining())
        if len(finds) > 1:  # the lookup before the retry runs out of time
            await asyncio.sleep(deadline.remaining())
            raise errors.KafkaTimeoutError("no coordinator found for 'g' within 0.3s")
        return 7

    finds: list[float] = []

    async def dropped(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        raise errors.KafkaConnectionError("connection closed by the broker")

    fake = FakeClient({}, dropped)
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await send_to_coordinator(
            as_client(fake),
            ApiKey.END_TXN,
            {},
            Deadline(300, "EndTxn"),
            find=find,
            retry_on=group_code,
        )
    assert str(caught.value) == (
        "EndTxn did not complete within 300 ms (last error: connection closed by the broker)"
    )
    assert isinstance(caught.value.__cause__, errors.KafkaTimeoutError)  # the lookup's
    assert len(finds) == 2 and len(fake.requests) == 1


async def test_an_any_node_retry_cut_short_names_the_dropped_connection() -> None:
    fake = FakeClient({}, dropped_then_silent)
    fake.least_loaded_node = lambda: 3  # type: ignore[attr-defined]
    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await request_any_node(
            as_client(fake), ApiKey.DESCRIBE_CONFIGS, {}, Deadline(300, "describe_configs")
        )
    assert str(caught.value) == (
        "describe_configs did not complete within 300 ms "
        "(last error: connection closed by the broker)"
    )
    assert len(fake.requests) == 2


async def test_a_first_any_node_attempt_that_times_out_is_its_own_error() -> None:
    async def silent(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        await asyncio.sleep(10)
        raise AssertionError("the deadline ends the wait first")

    fake = FakeClient({}, silent)
    fake.least_loaded_node = lambda: 3  # type: ignore[attr-defined]
    with pytest.raises(errors.KafkaTimeoutError, match=r"^no answer in time$"):
        await request_any_node(
            as_client(fake), ApiKey.DESCRIBE_CONFIGS, {}, Deadline(200, "describe_configs")
        )


async def test_a_leader_retry_cut_short_keeps_the_dropped_connection_as_the_answer() -> None:
    fake = FakeClient({A0: 1}, dropped_then_silent)
    answers = await to_leaders(fake, [A0], timeout_ms=300)
    assert answers[A0].timed_out
    assert isinstance(answers[A0].error, errors.KafkaConnectionError)
    assert str(answers[A0].error) == "connection closed by the broker"
    assert len(fake.requests) == 2


class DeadlineCheckingLeaders:
    """A lookup that asks the cluster under the deadline (as the admin client's does)."""

    def __init__(self, leaders: dict[TopicPartition, int]) -> None:
        self.leaders_of = leaders
        self.lookups = 0

    async def leaders(
        self, partitions: list[TopicPartition], deadline: Deadline
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, errors.KafkaError]]:
        self.lookups += 1
        deadline.check()
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(self.leaders_of[tp], []).append(tp)
        return by_leader, {}

    async def refresh(self, deadline: Deadline) -> None:
        pass


async def test_a_backoff_that_overruns_the_deadline_before_the_lookup_answers_the_last_error() -> (
    None
):
    # The loop stalls in the backoff until past the end, so the retry's leader lookup
    # finds the deadline gone: each partition's answer is still the error it was
    # retried for, not a bare timeout of the whole call.
    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.005, time.sleep, 0.4)
        raise errors.KafkaConnectionError("connection closed by the broker")

    fake = FakeClient({}, answer)
    lookup = DeadlineCheckingLeaders({A0: 1, B0: 2})
    answers = await to_leaders(fake, [A0, B0], timeout_ms=300, leaders=lookup)
    assert lookup.lookups == 2
    for tp in (A0, B0):
        assert answers[tp].timed_out
        assert str(answers[tp].error) == "connection closed by the broker"


async def test_a_first_lookup_past_the_deadline_is_the_calls_timeout() -> None:
    fake = FakeClient({}, answering(lambda node, tp, n: 0))
    lookup = DeadlineCheckingLeaders({A0: 1})
    with pytest.raises(errors.KafkaTimeoutError, match="the test call did not complete"):
        await to_leaders(fake, [A0], timeout_ms=0, leaders=lookup)
    assert fake.requests == []


def test_the_error_retried_is_the_one_that_started_the_retries_not_a_timeout() -> None:
    dropped = errors.KafkaConnectionError("connection closed by the broker")
    moved = errors.NotCoordinatorError("group 'g'")
    late = errors.KafkaTimeoutError("no answer in time")
    assert retried_error(None, late) is late  # a first attempt's timeout is the error
    assert retried_error(dropped, late) is dropped
    assert retried_error(dropped, moved) is moved  # any other error is news
    assert retried_error(late, dropped) is dropped


async def test_a_body_function_makes_each_attempts_request() -> None:
    made: list[int] = []

    async def body() -> dict[str, Any]:
        made.append(len(made) + 1)
        return {"attempt": len(made)}

    async def answer(node: int, body: dict[str, Any], n: int) -> dict[str, Any]:
        return {"error_code": errors.NotCoordinatorError.errno if n == 1 else 0}

    fake = FakeClient({}, answer)
    await to_coordinator(fake, Coordinator(), body=body)
    assert [b["attempt"] for _, _, b in fake.requests] == [1, 2]


# --- backoff and deadline ----------------------------------------------------------------


def test_backoff_doubles_per_attempt_up_to_its_cap_with_jitter() -> None:
    for attempt, expected in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (80, 1000)]:
        delays = [backoff_delay(attempt, 100, 1000) for _ in range(200)]
        assert all(
            expected * (1 - BACKOFF_JITTER) <= d <= expected * (1 + BACKOFF_JITTER) for d in delays
        ), (attempt, min(delays), max(delays))
        assert max(delays) - min(delays) > 0  # jittered, not lockstep
    assert backoff_delay(0, 100, 1000) <= 100 * (1 + BACKOFF_JITTER)  # never below the base's
    assert backoff_delay(3, 0, 0) == 0  # a zero backoff stays zero


async def test_a_deadline_refuses_a_retry_that_would_not_start_in_time() -> None:
    deadline = Deadline(100, "the call")
    assert deadline.allows(0.05) and not deadline.allows(0.2)
    last = errors.NotCoordinatorError("group 'g'")
    with pytest.raises(errors.KafkaTimeoutError, match=r"the call did not complete within 100 ms"):
        await deadline.pause(0.2, last)
    await deadline.pause(0.01, last)  # fits: just sleeps
    own = deadline.timeout_error()
    assert str(deadline.timeout_error(own)) == str(own)  # said once, not twice
    named = deadline.timeout_error(last)
    assert str(deadline.timeout_error(named)) == str(named)  # with what it named, once
    assert "last error" in str(deadline.timeout_error(last))
