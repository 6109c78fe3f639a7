"""Requests sent to the node that must answer them, retried with backoff until a deadline.

`request` sends to one node and `request_any_node` to whichever answers; two shapes of
request take one more step:

* partition requests (ListOffsets, DeleteRecords): `send_to_leaders` groups the
  partitions by leader, sends one request per leader, all at once, hands each
  leader's answers over as they arrive, and asks again for the partitions whose error
  is worth it (a leader moved or unknown, ...) after a metadata refresh;
* group requests (OffsetCommit, OffsetFetch, DescribeGroups, ...):
  `send_to_coordinator` sends to the group's (or transactional id's) coordinator and
  asks again while the answer says so (the coordinator moved or is loading, ...).

Callers build the bodies and read the answers; this module routes, retries and keeps
time. Every function takes a typed API key of `protocol.bodies` (``bodies.LIST_OFFSETS``):
mypy checks the bodies (or what ``build`` returns) against the request's ``TypedDict``
and types the answers (for ``parse``, ``retry_on``, the caller) as the response's. A
request that could not be delivered (a retriable connection or timeout error) is
retried too. Retries wait `retry_delay` (the client's ``retry_backoff_ms`` through
`retry.backoff_delay`) and stop when the `Deadline` leaves no time for the next one.
Used by the admin client, the consumer's fetcher and group coordinator, and the
producer's transaction manager.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.client import COORDINATOR_GROUP, KafkaClient
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT, api_name
from aiokafka_lite.retry import Deadline, backoff_delay, retried_error
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "COORDINATOR_NOT_READY",
    "LeaderLookup",
    "PartitionAnswer",
    "TrackedLeaders",
    "coordinator_lookup",
    "coordinator_not_ready",
    "leader_moved",
    "request",
    "request_any_node",
    "retriable",
    "retry_delay",
    "send_to_coordinator",
    "send_to_leaders",
]

log = logging.getLogger(__name__)

V = TypeVar("V")

#: Codes that mean the coordinator moved, is not available, or is still loading.
COORDINATOR_NOT_READY = frozenset(
    {
        errors.CoordinatorLoadInProgressError.errno,
        errors.CoordinatorNotAvailableError.errno,
        errors.NotCoordinatorError.errno,
    }
)

_LEADER_MOVED = (
    errors.LeaderNotAvailableError,
    errors.NotLeaderOrFollowerError,
    errors.FencedLeaderEpochError,
    errors.UnknownLeaderEpochError,
)


def retriable(error: errors.KafkaError) -> bool:
    """Retry every error Kafka calls retriable (the default policy)."""
    return error.retriable


def leader_moved(error: errors.KafkaError) -> bool:
    """Retry only when the partition's leader is unknown or moved (the admin's policy)."""
    return isinstance(error, _LEADER_MOVED)


def coordinator_not_ready(code: int, what: str) -> errors.KafkaError | None:
    """The error to retry on when ``code`` says the coordinator is not ready, else None."""
    if code in COORDINATOR_NOT_READY:
        return errors.error_for_code(code, what)
    return None


def retry_delay(client: KafkaClient) -> float:
    """Seconds before a retry of a routed request: ``retry_backoff_ms`` with jitter.

    `backoff_delay` with the cap at the base, so it does not grow: these requests
    have always been retried at a constant pace, and the clients that use them have
    no ``retry_backoff_max_ms`` option to bound a growing one.
    """
    base = client.retry_backoff_ms / 1000
    return backoff_delay(1, base, base)


async def request(
    client: KafkaClient,
    node_id: int,
    api_key: Api[RequestT, ResponseT],
    body: RequestT,
    deadline: Deadline,
    *,
    version: int | None = None,
) -> ResponseT:
    """One request to ``node_id``, waiting for its answer until ``deadline`` at most.

    The connection keeps its own request timeout: a caller running out of time does
    not close a connection others share. ``version`` caps the API version (the
    highest both sides speak by default). A broker without the API raises
    `UnsupportedVersionError` naming it and what needed it.
    """
    deadline.check()
    try:
        return await client.send_before(node_id, api_key, body, deadline.end, version=version)
    except errors.UnsupportedVersionError as exc:
        raise errors.UnsupportedVersionError(
            f"the broker does not support the {api_name(api_key)} API "
            f"(key {int(api_key)}), needed for {deadline.what}"
        ) from exc


async def request_any_node(
    client: KafkaClient, api_key: Api[RequestT, ResponseT], body: RequestT, deadline: Deadline
) -> ResponseT:
    """One request any broker can answer, to the least loaded node; another node (or
    the same one, reconnected) is tried after a backoff while connections fail."""
    last: errors.KafkaError | None = None
    while True:
        deadline.check(last)
        try:
            return await request(client, client.least_loaded_node(), api_key, body, deadline)
        except errors.KafkaConnectionError as exc:
            last = exc
        except errors.KafkaTimeoutError as exc:
            deadline.raise_cut_short(exc, last)
        await deadline.pause(retry_delay(client), last)


# --- partition leaders -------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionAnswer(Generic[V]):
    """One partition's outcome: its value, or the error it ended with."""

    value: V | None = None
    error: errors.KafkaError | None = None
    #: The deadline ended the retries; ``error`` is the last one retried.
    timed_out: bool = False


class LeaderLookup(Protocol):
    """Where a partition request goes: each partition's leader."""

    async def leaders(
        self, partitions: list[TopicPartition], deadline: Deadline
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, errors.KafkaError]]:
        """The partitions by leader, and those without one with the reason."""
        ...

    async def refresh(self, deadline: Deadline) -> None:
        """Called before a retry: bring the leaders up to date."""
        ...


class TrackedLeaders:
    """Leaders from the client's own metadata.

    A partition without a known leader has its topic tracked from then on, and is
    asked again after the refresh that precedes every retry.
    """

    def __init__(self, client: KafkaClient) -> None:
        self._client = client

    async def leaders(
        self, partitions: list[TopicPartition], deadline: Deadline
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, errors.KafkaError]]:
        cluster = self._client.cluster
        by_leader: dict[int, list[TopicPartition]] = {}
        leaderless: dict[TopicPartition, errors.KafkaError] = {}
        for tp in partitions:
            leader = cluster.leader_for(tp)
            if leader is None:
                leaderless[tp] = errors.LeaderNotAvailableError(
                    f"no leader known for {tp.topic}-{tp.partition}"
                )
            else:
                by_leader.setdefault(leader, []).append(tp)
        if leaderless:
            self._client.add_topics({tp.topic for tp in leaderless})
        return by_leader, leaderless

    async def refresh(self, deadline: Deadline) -> None:
        try:
            await wait_for(
                asyncio.shield(self._client.request_metadata_update()),
                max(deadline.remaining(), 0.001),
            )
        except (asyncio.TimeoutError, errors.KafkaError) as exc:
            log.debug("metadata refresh before a retry of %s failed: %r", deadline.what, exc)


_LeaderAnswers = tuple[
    dict[TopicPartition, PartitionAnswer[V]],  # final answers
    dict[TopicPartition, errors.KafkaError],  # to ask again, with the error
    errors.KafkaError | None,  # with raise_errors: the error that fails the call
]


async def send_to_leaders(
    client: KafkaClient,
    api_key: Api[RequestT, ResponseT],
    partitions: Iterable[TopicPartition],
    build: Callable[[list[TopicPartition]], RequestT],
    parse: Callable[[ResponseT], Mapping[TopicPartition, tuple[int, V]]],
    deadline: Deadline,
    *,
    leaders: LeaderLookup | None = None,
    retry: Callable[[errors.KafkaError], bool] = retriable,
    retry_leaderless: Callable[[errors.KafkaError], bool] | None = None,
    raise_errors: bool = False,
    on_answer: Callable[[Mapping[TopicPartition, PartitionAnswer[V]]], None] | None = None,
) -> dict[TopicPartition, PartitionAnswer[V]]:
    """Send a per-partition request to each partition's leader; one answer per partition.

    ``build(partitions)`` makes one leader's request body and ``parse(response)``
    reads each partition's ``(error code, value)`` from its answer. A partition whose
    error ``retry`` accepts, or whose request could not be delivered, is asked again
    (its leader looked up anew) after a backoff, while the deadline leaves time for
    one; at the deadline its answer is its last error, marked ``timed_out``. Any other
    error is the partition's answer; with ``raise_errors`` it is raised instead, once
    the other leaders of that round have answered. ``retry_leaderless`` (default:
    ``retry``) judges the errors of partitions the lookup found no leader for.
    ``on_answer`` gets each leader's final answers as they arrive, so a slow leader
    holds up no other partition. ``leaders`` defaults to `TrackedLeaders`.
    """
    lookup: LeaderLookup = leaders if leaders is not None else TrackedLeaders(client)
    retry_lookup = retry if retry_leaderless is None else retry_leaderless
    wanted = list(dict.fromkeys(partitions))
    pending: dict[TopicPartition, errors.KafkaError | None] = dict.fromkeys(wanted)
    answers: dict[TopicPartition, PartitionAnswer[V]] = {}

    async def ask(node: int, tps: list[TopicPartition]) -> _LeaderAnswers[V]:
        parsed = parse(await request(client, node, api_key, build(tps), deadline))
        final: dict[TopicPartition, PartitionAnswer[V]] = {}
        again: dict[TopicPartition, errors.KafkaError] = {}
        for tp in tps:
            got = parsed.get(tp)
            where = f"{api_name(api_key)} {tp.topic}-{tp.partition}"
            if got is None:
                error: errors.KafkaError = errors.UnknownServerError(
                    f"{where}: the broker returned no result"
                )
            elif got[0] == 0:
                final[tp] = PartitionAnswer(got[1])
                continue
            else:
                error = errors.error_for_code(got[0], where)
            if retry(error):
                again[tp] = error
            elif raise_errors:
                return final, again, error  # this leader's answers are not handed over
            else:
                final[tp] = PartitionAnswer(error=error)
        if on_answer is not None and final:
            on_answer(final)
        return final, again, None

    def out_of_time() -> None:
        for tp, last in pending.items():
            answers[tp] = PartitionAnswer(error=last or deadline.timeout_error(), timed_out=True)

    while pending:
        try:
            by_leader, leaderless = await lookup.leaders(list(pending), deadline)
        except errors.KafkaTimeoutError:
            if all(last is None for last in pending.values()):
                raise  # nothing asked yet: the call itself timed out
            # A backoff on a busy loop can overrun the end before the lookup of a retry.
            out_of_time()
            break
        for tp, error in leaderless.items():
            if retry_lookup(error):
                pending[tp] = error
            elif raise_errors:
                raise error
            else:
                answers[tp] = PartitionAnswer(error=error)
                del pending[tp]
        nodes = list(by_leader)
        rounds = await asyncio.gather(
            *(ask(node, by_leader[node]) for node in nodes), return_exceptions=True
        )
        for node, outcome in zip(nodes, rounds, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, errors.KafkaError) and outcome.retriable:
                    for tp in by_leader[node]:
                        pending[tp] = retried_error(pending[tp], outcome)
                    continue
                raise outcome
            final, again, fatal = outcome
            if fatal is not None:
                raise fatal
            for tp, answer in final.items():
                answers[tp] = answer
                del pending[tp]
            pending.update(again)
        if not pending:
            break
        await lookup.refresh(deadline)
        delay = retry_delay(client)
        if not deadline.allows(delay):
            out_of_time()
            break
        await asyncio.sleep(delay)
    return {tp: answers[tp] for tp in wanted}


# --- coordinators ---------------------------------------------------------------------------


def coordinator_lookup(
    client: KafkaClient, key: str, key_type: int = COORDINATOR_GROUP
) -> Callable[[Deadline], Awaitable[int]]:
    """A ``find`` for `send_to_coordinator` that asks FindCoordinator before every attempt."""

    async def find(deadline: Deadline) -> int:
        return await client.find_coordinator(key, key_type, timeout_ms=deadline.remaining_ms())

    return find


async def send_to_coordinator(
    client: KafkaClient,
    api_key: Api[RequestT, ResponseT],
    body: RequestT | Callable[[], Awaitable[RequestT]],
    deadline: Deadline,
    *,
    find: Callable[[Deadline], Awaitable[int]],
    retry_on: Callable[[ResponseT], errors.KafkaError | None],
    lost: Callable[[str], None] | None = None,
    version: int | None = None,
) -> tuple[int, ResponseT]:
    """Send to a coordinator until it gives an answer to keep; returns (node, answer).

    ``find(deadline)`` names the coordinator (`coordinator_lookup`, or the caller's
    cached one). ``body`` is the request, or an async function that makes it before
    each attempt. ``retry_on(answer)`` returns the error worth asking again for (the
    coordinator moved or is loading, ...), or None to keep the answer. A request that
    could not be delivered is retried too, after ``lost`` is told why (so a cached
    coordinator is looked up again). When the deadline leaves no time for another
    backoff, its `KafkaTimeoutError` is raised, naming the last error. ``retry_on`` may
    raise instead, for an answer that ends the call. ``version`` caps the API version.
    """
    last: errors.KafkaError | None = None
    while True:
        deadline.check(last)
        payload = body if isinstance(body, Mapping) else await body()
        try:
            node = await find(deadline)
        except errors.KafkaTimeoutError as exc:
            deadline.raise_cut_short(exc, last)
        try:
            response = await request(client, node, api_key, payload, deadline, version=version)
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            if lost is not None:
                lost(f"{api_name(api_key)} failed: {exc}")
            last = retried_error(last, exc)
        else:
            last = retry_on(response)
            if last is None:
                return node, response
        await deadline.pause(retry_delay(client), last)
