"""Small value types shared by every layer above the protocol."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic name and a partition number."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset with its metadata string (and leader epoch, -1 if unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
