"""The bodies and answers of the offset APIs, as the admin client and the consumer both
send and read them: ListOffsets, OffsetCommit and OffsetFetch.

Builders take partitions and offsets and return a body for `protocol.api` (one body
for every version: fields a version lacks are ignored), typed as the request's
``TypedDict`` of `protocol.bodies`. Readers take a decoded answer (the response's
``TypedDict``) and return each partition's error code with what it carries; what an
error means is the caller's business.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from aiokafka_lite.protocol.bodies import (
    DeleteRecordsResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from aiokafka_lite.protocol.group_protocol import group_by_topic
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "OffsetInfo",
    "list_offsets_body",
    "offset_commit_body",
    "offset_fetch_body",
    "partition_error_codes",
    "read_list_offsets",
    "read_offset_fetch",
]


@dataclass(frozen=True)
class OffsetInfo:
    """A ListOffsets answer for one partition (``offset`` -1: no record matches)."""

    offset: int
    timestamp: int
    leader_epoch: int


def _no_epoch(tp: TopicPartition) -> int:
    return -1


def list_offsets_body(
    timestamps: Mapping[TopicPartition, int],
    *,
    isolation_level: int,
    timeout_ms: int,
    leader_epoch: Callable[[TopicPartition], int] = _no_epoch,
) -> ListOffsetsRequest:
    """ListOffsets for each partition's timestamp (-1 latest, -2 earliest, -3 the record
    with the largest timestamp); ``leader_epoch`` gives ``current_leader_epoch``."""
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp, timestamp in timestamps.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "current_leader_epoch": leader_epoch(tp),
                "timestamp": timestamp,
            }
        )
    return {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
        "timeout_ms": timeout_ms,
    }


def read_list_offsets(
    response: ListOffsetsResponse,
) -> dict[TopicPartition, tuple[int, OffsetInfo]]:
    """Each partition's (error code, offset found) in a ListOffsets answer."""
    answered: dict[TopicPartition, tuple[int, OffsetInfo]] = {}
    for t in response.get("topics", ()):
        for p in t.get("partitions", ()):
            offset = p.get("offset", -1)
            if offset < 0:
                offset = -1
            answered[TopicPartition(t["name"], p["partition_index"])] = (
                p.get("error_code", 0),
                OffsetInfo(offset, p.get("timestamp", -1), p.get("leader_epoch", -1)),
            )
    return answered


def offset_commit_body(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> OffsetCommitRequest:
    """OffsetCommit of ``offsets``; without a generation, as a group with no members."""
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for tp, om in offsets.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch,
                "committed_metadata": om.metadata,
            }
        )
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation_id,
        "member_id": member_id,
        "group_instance_id": group_instance_id,
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
    }


def offset_fetch_body(
    group_id: str, partitions: Iterable[TopicPartition] | None, *, require_stable: bool
) -> OffsetFetchRequest:
    """OffsetFetch of the group's committed offsets of ``partitions`` (None: all)."""
    topics: list[OffsetFetchRequestTopic] | None = (
        None
        if partitions is None
        else [
            {"name": topic, "partition_indexes": indexes}
            for topic, indexes in group_by_topic(partitions).items()
        ]
    )
    return {
        "group_id": group_id,
        "topics": topics,
        "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": require_stable,
    }


def read_offset_fetch(
    response: OffsetFetchResponse,
) -> tuple[int, dict[TopicPartition, tuple[int, OffsetAndMetadata | None]]]:
    """An OffsetFetch answer: the group's error code, and each partition's (error code,
    committed offset or None when nothing is committed)."""
    data = response["groups"][0] if response.get("groups") else response
    found: dict[TopicPartition, tuple[int, OffsetAndMetadata | None]] = {}
    for t in data.get("topics", ()):
        for p in t.get("partitions", ()):
            offset = p.get("committed_offset", -1)
            committed = (
                None
                if offset is None or offset < 0
                else OffsetAndMetadata(
                    offset, p.get("metadata") or "", p.get("committed_leader_epoch", -1)
                )
            )
            found[TopicPartition(t["name"], p["partition_index"])] = (
                p.get("error_code", 0),
                committed,
            )
    return data.get("error_code", 0), found


def partition_error_codes(
    response: OffsetCommitResponse | OffsetDeleteResponse | DeleteRecordsResponse,
) -> dict[TopicPartition, int]:
    """Each partition's error code in an answer listed by topic (OffsetCommit,
    OffsetDelete, DeleteRecords: ``topics[].partitions[].error_code``)."""
    return {
        TopicPartition(t["name"], p["partition_index"]): int(p.get("error_code", 0))
        for t in response.get("topics", ())
        for p in t.get("partitions", ())
    }
