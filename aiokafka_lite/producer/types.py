"""Values the producer hands to its callers: record metadata, records, interceptors."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka_lite.structs import RecordMetadata

log = logging.getLogger(__name__)

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "Header",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "checked_timestamp",
]

#: ``RecordMetadata.timestamp_type`` values (Kafka's timestamp types).
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]

#: A record timestamp is an int64 of milliseconds since the epoch.
MAX_TIMESTAMP = (1 << 63) - 1


def checked_timestamp(timestamp: object) -> int:
    """A record timestamp the caller gave, as an int: milliseconds since the epoch, from
    0 (as the Java client requires) to int64's largest. A float (``time.time() * 1000``)
    is truncated, as aiokafka does; anything else is a TypeError."""
    if isinstance(timestamp, float) and math.isfinite(timestamp):
        timestamp = int(timestamp)
    if type(timestamp) is int and 0 <= timestamp <= MAX_TIMESTAMP:
        return timestamp
    raise TypeError(
        f"timestamp_ms must be a number >= 0 (milliseconds since the epoch) or None, "
        f"got {timestamp!r}"
    )


@dataclass
class ProducerRecord:
    """A record on its way to the accumulator, as interceptors see it (before serializing)."""

    topic: str
    value: Any = None
    key: Any = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: Sequence[Header] | None = None


class ProducerInterceptor:
    """Hooks around each record; subclass and override what you need.

    ``on_send`` runs in ``send()`` before the key and value are serialized and may return a
    changed record. ``on_acknowledgement`` runs once per record when its delivery ends,
    with the metadata or the exception. An exception raised by a hook is logged and
    otherwise ignored, as in the Java client.
    """

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        return record

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        return None

    def close(self) -> None:
        return None


def run_on_send(interceptors: Sequence[Any], record: ProducerRecord) -> ProducerRecord:
    for interceptor in interceptors:
        try:
            result = interceptor.on_send(record)
        except Exception:
            log.exception("interceptor %r on_send failed; record passed on unchanged", interceptor)
            continue
        if isinstance(result, ProducerRecord):
            record = result
        else:
            log.warning(
                "interceptor %r on_send returned %r, not a ProducerRecord", interceptor, result
            )
    return record


def run_on_acknowledgement(
    interceptors: Sequence[Any], metadata: RecordMetadata | None, exc: BaseException | None
) -> None:
    for interceptor in interceptors:
        try:
            interceptor.on_acknowledgement(metadata, exc)
        except Exception:
            log.exception("interceptor %r on_acknowledgement failed", interceptor)
