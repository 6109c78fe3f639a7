"""What the client knows about the cluster: brokers, topics, partitions, leaders.

A `ClusterMetadata` is a snapshot built from one Metadata response. The client
replaces it whole on each refresh instead of patching it, so readers never see
a half-updated view.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka_lite.errors import error_for_code
from aiokafka_lite.protocol.bodies import MetadataResponse
from aiokafka_lite.structs import BrokerMetadata, PartitionMetadata, TopicPartition

__all__ = ["BrokerMetadata", "ClusterMetadata", "PartitionMetadata", "TopicMetadata"]

#: Kafka's all-zero topic id means "no id" (brokers before topic ids, KIP-516).
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: Mapping[int, PartitionMetadata]
    error_code: int


class ClusterMetadata:
    """An immutable snapshot of the cluster as one Metadata response described it."""

    def __init__(
        self,
        brokers: Mapping[int, BrokerMetadata] | None = None,
        topics: Mapping[str, TopicMetadata] | None = None,
        *,
        cluster_id: str | None = None,
        controller_id: int = -1,
        version: int = 0,
    ) -> None:
        self.brokers: Mapping[int, BrokerMetadata] = dict(brokers or {})
        self.topics: Mapping[str, TopicMetadata] = dict(topics or {})
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.version = version
        self.updated_at = time.monotonic()

    @classmethod
    def from_response(
        cls,
        body: MetadataResponse,
        *,
        version: int,
        previous: ClusterMetadata | None = None,
        full: bool = True,
    ) -> ClusterMetadata:
        """Build a snapshot from a decoded Metadata response body.

        With ``full=False`` the response covered only some topics: topics known
        from ``previous`` and absent from the response are kept.
        """
        brokers = {
            b["node_id"]: BrokerMetadata(b["node_id"], b["host"], b["port"], b.get("rack"))
            for b in body.get("brokers", ())
        }
        topics: dict[str, TopicMetadata] = {}
        if previous is not None and not full:
            topics.update(previous.topics)
        for t in body.get("topics", ()):
            name = t.get("name")
            if name is None:
                continue
            partitions = {
                p["partition_index"]: PartitionMetadata(
                    topic=name,
                    partition=p["partition_index"],
                    leader=p["leader_id"],
                    replicas=tuple(p.get("replica_nodes") or ()),
                    isr=tuple(p.get("isr_nodes") or ()),
                    error=error_for_code(p["error_code"]) if p.get("error_code") else None,
                    leader_epoch=p.get("leader_epoch", -1),
                    offline_replicas=tuple(p.get("offline_replicas") or ()),
                    error_code=p.get("error_code", 0),
                )
                for p in t.get("partitions", ())
            }
            topic_id = t.get("topic_id")
            if isinstance(topic_id, uuid.UUID) and topic_id == _ZERO_UUID:
                topic_id = None
            topics[name] = TopicMetadata(
                name=name,
                topic_id=topic_id if isinstance(topic_id, uuid.UUID) else None,
                is_internal=bool(t.get("is_internal", False)),
                partitions=partitions,
                error_code=t.get("error_code", 0),
            )
        return cls(
            brokers,
            topics,
            cluster_id=body.get("cluster_id"),
            controller_id=body.get("controller_id", -1),
            version=(previous.version + 1) if previous is not None else 1,
        )

    # --- queries -------------------------------------------------------------

    def broker(self, node_id: int) -> BrokerMetadata | None:
        return self.brokers.get(node_id)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition numbers of ``topic``, or None when the topic is not known (or errored)."""
        meta = self.topics.get(topic)
        if meta is None or (meta.error_code != 0 and not meta.partitions):
            return None
        return set(meta.partitions)

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        """Partitions of ``topic`` that have a leader now."""
        meta = self.topics.get(topic)
        if meta is None:
            return set()
        return {p for p, pm in meta.partitions.items() if pm.leader >= 0}

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        meta = self.topics.get(tp.topic)
        if meta is None:
            return None
        return meta.partitions.get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> int | None:
        """Node id of the partition's leader, or None when unknown or leaderless."""
        pm = self.partition(tp)
        if pm is None or pm.leader < 0:
            return None
        return pm.leader

    # aiokafka's names for the same questions.

    def broker_metadata(self, node_id: int) -> BrokerMetadata | None:
        return self.broker(node_id)

    def leader_for_partition(self, tp: TopicPartition) -> int | None:
        """The leader's node id; None when the partition is unknown, -1 when it has no
        leader right now (aiokafka's meaning)."""
        pm = self.partition(tp)
        return None if pm is None else pm.leader

    def partitions_for_broker(self, node_id: int) -> set[TopicPartition] | None:
        """The partitions ``node_id`` leads (None when it leads none)."""
        led = {
            TopicPartition(name, p)
            for name, meta in self.topics.items()
            for p, pm in meta.partitions.items()
            if pm.leader == node_id
        }
        return led or None

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        pm = self.partition(tp)
        return -1 if pm is None else pm.leader_epoch

    def topic_error(self, topic: str) -> int:
        """The topic-level error code of the last response (0 when fine or not asked)."""
        meta = self.topics.get(topic)
        return 0 if meta is None else meta.error_code

    def topic_id(self, topic: str) -> uuid.UUID | None:
        meta = self.topics.get(topic)
        return None if meta is None else meta.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for meta in self.topics.values():
            if meta.topic_id == topic_id:
                return meta.name
        return None

    def __repr__(self) -> str:
        return (
            f"ClusterMetadata(cluster_id={self.cluster_id!r}, brokers={sorted(self.brokers)}, "
            f"controller={self.controller_id}, topics={len(self.topics)}, version={self.version})"
        )
