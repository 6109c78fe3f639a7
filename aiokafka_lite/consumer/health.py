"""A public, read-only snapshot of what the consumer is doing (``consumer.health()``).

It shows a stall without private attributes: the group state, the assignment, when the
last fetch and heartbeat succeeded, the lag of every partition, the last errors, and a
list of human-readable ``problems`` (empty when all is well).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiokafka_lite.consumer.membership import GroupState
from aiokafka_lite.structs import TopicPartition

__all__ = ["ConsumerHealth", "PartitionHealth"]


@dataclass(frozen=True)
class PartitionHealth:
    """One assigned partition. Offsets are ``None`` until known."""

    topic_partition: TopicPartition
    #: Next offset the consumer will return.
    position: int | None
    #: Last offset committed by (or fetched for) this consumer.
    committed: int | None
    highwater: int | None
    last_stable_offset: int | None
    #: Records between the position and the end (the high watermark, or the last stable
    #: offset with read_committed).
    lag: int | None
    paused: bool
    #: Wall-clock time (``time.time()``) of the last fetch response for this partition.
    last_fetch_time: float | None
    #: An error waiting to be raised to the user for this partition, or what fails
    #: at its position (a corrupt batch being fetched again).
    error: str | None = None


@dataclass(frozen=True)
class ConsumerHealth:
    """Consumer status at one instant. Times are ``time.time()`` values (or None)."""

    #: ``"unjoined"``, ``"no_coordinator"``, ``"rebalancing"``, ``"stable"``, ``"failed"``,
    #: ``"closed"``; ``"unjoined"`` also for consumers without a group (``group_id=None``).
    group_state: GroupState
    group_id: str | None
    member_id: str | None
    generation_id: int
    is_leader: bool
    coordinator_id: int | None
    assigned_partitions: frozenset[TopicPartition]
    partitions: Mapping[TopicPartition, PartitionHealth]
    #: Sum of the known partition lags (None when no lag is known yet).
    total_lag: int | None
    last_fetch_time: float | None
    last_fetch_error: str | None
    last_fetch_error_time: float | None
    #: Since when fetches fail without a success in between (None when they work).
    fetch_failing_since: float | None
    last_heartbeat_time: float | None
    last_rebalance_time: float | None
    rebalance_count: int
    last_commit_time: float | None
    last_commit_error: str | None
    last_group_error: str | None
    last_group_error_time: float | None
    last_poll_time: float | None
    buffered_bytes: int
    closed: bool
    #: Record batches met so far that failed their CRC or could not be decoded (each
    #: was fetched again; see docs/consumer.md, "When a record cannot be read").
    corrupt_batches: int = 0
    #: Human-readable descriptions of what is wrong right now (empty when healthy).
    problems: tuple[str, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def lag(self) -> dict[TopicPartition, int | None]:
        """Lag per assigned partition."""
        return {tp: p.lag for tp, p in self.partitions.items()}
