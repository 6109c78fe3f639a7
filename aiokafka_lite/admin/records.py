"""Records of partitions: look up offsets (earliest, latest, by timestamp) and delete
records before an offset.

Both are partition requests: `routing.send_to_leaders` sends them to each partition's
leader and retries the partitions whose leader moved or is catching up
(`leader_answer_retry`). Unlike the consumer, the admin
client tracks no topics: each round looks the leaders up in a Metadata answer for just
those topics (`MetadataLeaders`), so a missing topic is an item error, never created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error, request_metadata
from aiokafka_lite.admin.types import (
    AdminResults,
    DeleteRecordsResult,
    ListOffsetsResult,
    OffsetSpec,
    RecordsToDelete,
)
from aiokafka_lite.admin.validation import check_tp, isolation_code, offset_spec
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.cluster import ClusterMetadata
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsRequest,
)
from aiokafka_lite.protocol.offsets import list_offsets_body, read_list_offsets
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import PartitionAnswer, leader_moved, send_to_leaders
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "MetadataLeaders",
    "RecordsAdmin",
    "leader_answer_retry",
    "list_offsets_by_leader",
    "ran_out",
]


def leader_answer_retry(error: errors.KafkaError) -> bool:
    """Whether a leader's answer for a partition is worth asking again (the leader
    looked up anew): it moved (`leader_moved`), or it is a new leader catching up, one
    that does not know its high watermark yet (OFFSET_NOT_AVAILABLE, KIP-207) or does
    not host the partition yet (UNKNOWN_TOPIC_OR_PARTITION while its metadata catches
    up; a topic that is really gone is missing from the next lookup, which ends it)."""
    return leader_moved(error) or isinstance(
        error, (errors.OffsetNotAvailableError, errors.UnknownTopicOrPartitionError)
    )


class MetadataLeaders:
    """Leaders from a fresh Metadata answer for just the partitions' topics.

    A topic error other than a moving leader, a missing topic or a missing partition
    ends that partition with its error; a partition without a leader is retried.
    """

    def __init__(self, client: KafkaClient) -> None:
        self._client = client

    async def leaders(
        self, partitions: list[TopicPartition], deadline: Deadline
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, errors.KafkaError]]:
        # A snapshot of just these topics' leaders; never auto-creates a topic.
        response = await request_metadata(
            self._client, sorted({tp.topic for tp in partitions}), deadline
        )
        cluster = ClusterMetadata.from_response(response, version=-1)
        by_leader: dict[int, list[TopicPartition]] = {}
        leaderless: dict[TopicPartition, errors.KafkaError] = {}
        for tp in partitions:
            topic_code = cluster.topic_error(tp.topic)
            known = cluster.partitions_for_topic(tp.topic)
            leader = cluster.leader_for(tp)
            if topic_code and not leader_moved(errors.error_for_code(topic_code)):
                leaderless[tp] = item_error(topic_code, None, f"topic {tp.topic!r}")
            elif known is not None and tp.partition not in known:
                leaderless[tp] = errors.UnknownTopicOrPartitionError(f"partition {tp}")
            elif known is None and not topic_code:
                leaderless[tp] = errors.UnknownTopicOrPartitionError(f"topic {tp.topic!r}")
            elif leader is None:
                leaderless[tp] = errors.LeaderNotAvailableError(f"partition {tp}")
            else:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader, leaderless

    async def refresh(self, deadline: Deadline) -> None:
        """Nothing to do: every round asks for the leaders anew."""


def ran_out(answer: PartitionAnswer[Any], deadline: Deadline) -> errors.KafkaError | None:
    """A partition's error: for one the deadline ended while it was being retried, the
    call's timeout naming the last error (a refused leader, ...), as for every admin item
    that ran out of time (so a call whose every item did raises it, see `AdminBase._run`)."""
    if answer.timed_out and not isinstance(answer.error, errors.KafkaTimeoutError):
        return deadline.timeout_error(answer.error)
    return answer.error


async def list_offsets_by_leader(
    client: KafkaClient, specs: Mapping[TopicPartition, int], isolation: int, deadline: Deadline
) -> AdminResults[TopicPartition, ListOffsetsResult]:
    """ListOffsets for each partition (a timestamp, or EARLIEST / LATEST / MAX_TIMESTAMP)."""

    def build(items: list[TopicPartition]) -> ListOffsetsRequest:
        return list_offsets_body(
            {tp: specs[tp] for tp in items},
            isolation_level=isolation,
            timeout_ms=deadline.remaining_ms(),
        )

    answers = await send_to_leaders(
        client,
        bodies.LIST_OFFSETS,
        specs,
        build,
        read_list_offsets,
        deadline,
        leaders=MetadataLeaders(client),
        retry=leader_answer_retry,
        retry_leaderless=leader_moved,
    )
    results: AdminResults[TopicPartition, ListOffsetsResult] = AdminResults()
    for tp, answer in answers.items():
        if answer.error is not None or answer.value is None:
            results[tp] = ListOffsetsResult(tp, ran_out(answer, deadline))
            continue
        found = answer.value
        offset = found.offset if found.offset >= 0 else None
        results[tp] = ListOffsetsResult(tp, None, offset, found.timestamp, found.leader_epoch)
    return results


class RecordsAdmin(AdminBase):
    """Offsets of partitions and deleting their records."""

    async def list_offsets(
        self,
        partitions: Mapping[TopicPartition, OffsetSpec | Literal["earliest", "latest"] | int],
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, ListOffsetsResult]:
        """Earliest, latest, or first-at-timestamp offsets of partitions.

        Each partition maps to an `OffsetSpec`, ``"earliest"``, ``"latest"`` or a
        timestamp in ms. A timestamp after the last record gives ``offset=None``.
        """
        isolation = isolation_code(isolation_level)
        specs: dict[TopicPartition, int] = {}
        for raw_tp, spec in partitions.items():
            tp = check_tp(raw_tp)
            specs[tp] = offset_spec(spec).timestamp

        async def body(deadline: Deadline) -> AdminResults[TopicPartition, ListOffsetsResult]:
            return await list_offsets_by_leader(self._client, specs, isolation, deadline)

        if not specs:
            return AdminResults()
        return await self._run("list_offsets", timeout_ms, body)

    async def delete_records(
        self,
        records_to_delete: Mapping[TopicPartition, RecordsToDelete | int],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, DeleteRecordsResult]:
        """Delete records before an offset in each partition (-1: all records so far)."""
        before: dict[TopicPartition, int] = {}
        for raw_tp, spec in records_to_delete.items():
            tp = check_tp(raw_tp)
            offset = spec.before_offset if isinstance(spec, RecordsToDelete) else spec
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
                raise errors.ConfigurationError(
                    f"offset for {tp} must be an int >= -1 (-1: high watermark), got {spec!r}"
                )
            before[tp] = offset

        async def body(deadline: Deadline) -> AdminResults[TopicPartition, DeleteRecordsResult]:
            def build(items: list[TopicPartition]) -> DeleteRecordsRequest:
                by_topic: dict[str, list[DeleteRecordsPartition]] = {}
                for tp in items:
                    by_topic.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "offset": before[tp]}
                    )
                return {
                    "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
                    "timeout_ms": deadline.remaining_ms(),
                }

            def parse(response: DeleteRecordsResponse) -> dict[TopicPartition, tuple[int, int]]:
                return {
                    TopicPartition(t["name"], p["partition_index"]): (
                        p["error_code"],
                        p.get("low_watermark", -1),
                    )
                    for t in response.get("topics", ())
                    for p in t.get("partitions", ())
                }

            answers = await send_to_leaders(
                self._client,
                bodies.DELETE_RECORDS,
                before,
                build,
                parse,
                deadline,
                leaders=MetadataLeaders(self._client),
                retry=leader_answer_retry,
                retry_leaderless=leader_moved,
            )
            results: AdminResults[TopicPartition, DeleteRecordsResult] = AdminResults()
            for tp, answer in answers.items():
                low = -1 if answer.value is None else int(answer.value)
                results[tp] = DeleteRecordsResult(tp, ran_out(answer, deadline), low)
            return results

        if not before:
            return AdminResults()
        return await self._run("delete_records", timeout_ms, body)
