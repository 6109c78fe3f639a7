"""Small value types shared by every layer above the protocol."""

from __future__ import annotations

import re
from typing import NamedTuple

#: Kafka's rule for topic names: 1 to 249 ASCII letters, digits, ".", "_" and "-".
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topic_name(topic: object) -> str:
    """``topic`` when Kafka would accept it as a topic name; else ``TypeError`` (not a
    str) or ``ValueError`` saying why. Besides its characters and length, Kafka refuses
    the names "." and ".."."""
    if not isinstance(topic, str):
        raise TypeError(f"a topic name must be a str, got {topic!r}")
    if _TOPIC_NAME.fullmatch(topic) is None:
        raise ValueError(
            f"invalid topic name {topic!r}: 1 to 249 characters, each an ASCII letter, "
            "a digit, '.', '_' or '-'"
        )
    if topic in (".", ".."):
        raise ValueError(f"invalid topic name {topic!r}: Kafka refuses '.' and '..'")
    return topic


class TopicPartition(NamedTuple):
    """A topic name and a partition number."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """A committed offset with its metadata string (and leader epoch, -1 if unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
