"""Offsets on the driver: resolving start/end offsets, stream offsets, partition planning.

The pure functions here (JSON conversion, rate limiting, range splitting) do no I/O.
:class:`OffsetResolver` asks the cluster, with our own client: metadata through a
:class:`~aiokafka_lite.client.KafkaClient` and ListOffsets through a group-less
:class:`~aiokafka_lite.consumer.Consumer`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiokafka_lite import errors
from aiokafka_lite.spark.options import (
    EARLIEST,
    LATEST,
    ClientOptions,
    ReadBound,
    ReadOptions,
    TopicSelection,
)
from aiokafka_lite.structs import TopicPartition

if TYPE_CHECKING:
    from aiokafka_lite.cluster import ClusterMetadata

log = logging.getLogger(__name__)

__all__ = [
    "DataLossError",
    "OffsetRange",
    "OffsetResolver",
    "from_json",
    "group_ranges",
    "plan_ranges",
    "rate_limit",
    "to_json",
]

Offsets = dict[TopicPartition, int]


class DataLossError(errors.KafkaError):
    """Records the query should read are gone (deleted, truncated, topic recreated).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the loss is
    logged and the read goes on with what is left.
    """


def report_data_loss(fail: bool, message: str) -> None:
    """Raise :class:`DataLossError` or log a warning, as ``failOnDataLoss`` says."""
    if fail:
        raise DataLossError(
            f"aiokafka_lite data source: {message}. Some data may have been lost; set "
            "failOnDataLoss=false to go on without it."
        )
    log.warning("aiokafka_lite data source: %s; some data may have been lost", message)


# --- stream offsets as JSON-able dicts -------------------------------------------------


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """``{"topic": {"0": 42}}``: Spark's Kafka offset format (also the checkpoint format)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_json(data: Mapping[str, Any]) -> Offsets:
    """The inverse of :func:`to_json`; refuses anything else with a clear error."""
    result: Offsets = {}
    if not isinstance(data, Mapping):
        raise errors.IllegalStateError(f"not a Kafka stream offset: {data!r}")
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise errors.IllegalStateError(f"not a Kafka stream offset: {data!r}")
        for partition, offset in parts.items():
            try:
                result[TopicPartition(str(topic), int(partition))] = int(offset)
            except (TypeError, ValueError):
                raise errors.IllegalStateError(f"not a Kafka stream offset: {data!r}") from None
    return result


# --- planning ------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def plan_ranges(
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    *,
    max_records_per_partition: int,
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Split the ranges ``[starts[tp], ends[tp])`` into task-sized pieces.

    One range per partition, split into equal pieces when it holds more than
    ``max_records_per_partition`` offsets, and split further (largest first) until
    there are at least ``min_partitions`` pieces. Empty ranges are left out.
    """
    pieces: list[OffsetRange] = []
    for tp in sorted(ends):
        start, end = starts[tp], ends[tp]
        if end <= start:
            continue
        count = math.ceil((end - start) / max_records_per_partition)
        pieces.extend(_split(tp, start, end, count))
    if min_partitions is not None and pieces and len(pieces) < min_partitions:
        total = sum(p.size for p in pieces)
        result: list[OffsetRange] = []
        for piece in pieces:
            share = max(1, round(min_partitions * piece.size / total))
            result.extend(
                _split(
                    TopicPartition(piece.topic, piece.partition),
                    piece.start,
                    piece.end,
                    min(share, piece.size),
                )
            )
        pieces = result
    return pieces


def group_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_records: int,
    max_records: int,
    min_groups: int | None = None,
) -> list[tuple[OffsetRange, ...]]:
    """The ranges each task reads: small ranges share one.

    In plan order, ranges join a group until it holds ``min_records`` offsets; a group
    never exceeds ``max_records`` (unless a single range does) nor holds two ranges of
    one partition (one consumer reads the group). A small last group joins the one
    before when it fits. When that would leave fewer than ``min_groups`` groups, every
    range stays alone (``minPartitions`` asks for parallelism).
    """
    alone: list[tuple[OffsetRange, ...]] = [(r,) for r in ranges]
    if min_records <= 1 or len(ranges) <= 1:
        return alone
    groups: list[list[OffsetRange]] = []
    sizes: list[int] = []
    for piece in ranges:
        tp = (piece.topic, piece.partition)
        if groups and (
            sizes[-1] < min_records
            and sizes[-1] + piece.size <= max_records
            and all((r.topic, r.partition) != tp for r in groups[-1])
        ):
            groups[-1].append(piece)
            sizes[-1] += piece.size
        else:
            groups.append([piece])
            sizes.append(piece.size)
    if (
        len(groups) > 1
        and sizes[-1] < min_records
        and sizes[-2] + sizes[-1] <= max_records
        and not {(r.topic, r.partition) for r in groups[-2]}
        & {(r.topic, r.partition) for r in groups[-1]}
    ):
        groups[-2].extend(groups.pop())
    if min_groups is not None and len(groups) < min(min_groups, len(ranges)):
        return alone
    return [tuple(g) for g in groups]


def _split(tp: TopicPartition, start: int, end: int, count: int) -> list[OffsetRange]:
    count = max(1, min(count, end - start))
    size, extra = divmod(end - start, count)
    result = []
    at = start
    for i in range(count):
        stop = at + size + (1 if i < extra else 0)
        result.append(OffsetRange(tp.topic, tp.partition, at, stop))
        at = stop
    return result


def rate_limit(
    starts: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> Offsets:
    """End offsets that take at most ``max_rows`` offsets in all, shared fairly.

    Each partition gets a share proportional to what it has available; leftovers of
    the rounding go to the largest remainders, so exactly ``min(max_rows, available)``
    offsets are taken and every batch makes progress.
    """
    sizes = {tp: max(latest[tp] - starts.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    quotas: dict[TopicPartition, int] = {}
    remainders: list[tuple[float, TopicPartition]] = []
    for tp, size in sizes.items():
        exact = max_rows * size / total
        quotas[tp] = min(int(exact), size)
        remainders.append((exact - int(exact), tp))
    left = max_rows - sum(quotas.values())
    for _, tp in sorted(remainders, key=lambda item: (-item[0], item[1])):
        if left <= 0:
            break
        if quotas[tp] < sizes[tp]:
            quotas[tp] += 1
            left -= 1
    return {tp: (starts[tp] + quotas[tp]) if tp in starts else latest[tp] for tp in latest}


# --- the cluster ---------------------------------------------------------------------


#: The longest wait between two metadata requests while a topic is not ready.
METADATA_BACKOFF_MAX_S = 1.0


def _not_ready(cluster: ClusterMetadata, topics: Iterable[str]) -> list[tuple[str, int, bool]]:
    """(where, error code, leaderless) of what ``topics`` lack to be read now: a topic
    with a retriable topic-level error, a partition without a leader. Raises the errors
    that asking again will not cure."""
    waiting: list[tuple[str, int, bool]] = []
    for topic in topics:
        meta = cluster.topics.get(topic)
        if meta is None or not meta.partitions:
            code = cluster.topic_error(topic)
            if not code or code == errors.UnknownTopicOrPartitionError.errno:
                continue  # it does not exist: nothing to read from it
            if not errors.error_for_code(code).retriable:
                raise errors.error_for_code(code, f"topic {topic!r}")
            waiting.append((f"topic {topic}", code, code == errors.LeaderNotAvailableError.errno))
            continue
        for index in sorted(meta.partitions):
            part = meta.partitions[index]
            if part.leader >= 0:
                continue
            code = part.error_code or errors.LeaderNotAvailableError.errno
            if not errors.error_for_code(code).retriable:
                raise errors.error_for_code(code, f"{topic}-{index}")
            waiting.append((f"{topic}-{index}", code, True))
    return waiting


class OffsetResolver:
    """Partitions and offsets from the cluster (driver side; async; start/close once)."""

    def __init__(self, client_options: ClientOptions, *, timeout_ms: int = 30_000) -> None:
        from aiokafka_lite.client import KafkaClient
        from aiokafka_lite.consumer import Consumer
        from aiokafka_lite.consumer.config import ConsumerConfig

        kwargs = client_options.consumer_kwargs()
        kwargs["allow_auto_create_topics"] = False
        kwargs["enable_auto_commit"] = False
        config = ConsumerConfig.from_kwargs(**kwargs)
        self._timeout_ms = timeout_ms
        self._client = KafkaClient(config.bootstrap_servers, **config.client_kwargs())
        self._consumer = Consumer(**kwargs)
        self._started = False

    async def start(self) -> None:
        await self._client.start()
        await self._consumer.start()
        self._started = True

    async def close(self) -> None:
        try:
            await self._consumer.stop(timeout_ms=self._timeout_ms)
        finally:
            await self._client.close()

    async def partitions(self, selection: TopicSelection) -> list[TopicPartition]:
        """The topic partitions selected now (topics that do not exist have none)."""
        if selection.kind == "assign":
            topics = sorted({tp.topic for tp in selection.partitions})
        elif selection.kind == "subscribe":
            topics = list(selection.topics)
        else:
            names = await self._consumer.topics(timeout_ms=self._timeout_ms)
            topics = sorted(t for t in names if selection.matches(t))
        if not topics:
            return []
        cluster = await self._metadata(topics)
        result: list[TopicPartition] = []
        for topic in topics:
            meta = cluster.topics.get(topic)
            if meta is None or not meta.partitions:
                log.info("topic %r does not exist (yet); nothing to read from it", topic)
                continue
            result.extend(TopicPartition(topic, p) for p in sorted(meta.partitions))
        if selection.kind == "assign":
            known = set(result)
            missing = [tp for tp in selection.partitions if tp not in known]
            if missing:
                raise errors.ConfigurationError(
                    "aiokafka_lite data source: assigned partitions do not exist: "
                    + ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                )
            result = list(selection.partitions)
        return result

    async def _metadata(self, topics: list[str]) -> ClusterMetadata:
        """Metadata of ``topics`` in which each has its partitions and each partition a
        leader: a retriable error (LEADER_NOT_AVAILABLE while a topic is being created
        or its leaders elected) is asked again, with backoff, until the timeout; then
        it is raised, naming the topic or partition. A topic that does not exist is no
        error (it has nothing to read); any other error is raised at once."""
        deadline = time.monotonic() + self._timeout_ms / 1000
        backoff = self._client.retry_backoff_ms / 1000
        while True:
            # (The last answer, asked at the deadline, gets a second of its own.)
            remaining_ms = max(int((deadline - time.monotonic()) * 1000), 1000)
            cluster = await self._client.refresh_metadata(topics, timeout_ms=remaining_ms)
            waiting = _not_ready(cluster, topics)
            if not waiting:
                return cluster
            where, code, leaderless = waiting[0]
            left = deadline - time.monotonic()
            if left <= 0:
                error = errors.error_for_code(code)
                raise errors.error_for_code(
                    code,
                    f"aiokafka_lite data source: {where} "
                    + ("has no leader" if leaderless else "is not available")
                    + f": every metadata answer for {self._timeout_ms} ms said "
                    + getattr(error, "kafka_name", type(error).__name__)
                    + (f" (and {len(waiting) - 1} more)" if len(waiting) > 1 else ""),
                )
            log.info(
                "%s not ready (%s); asking the metadata again in %.0f ms",
                ", ".join(w for w, _, _ in waiting),
                type(errors.error_for_code(code)).__name__,
                min(backoff, left) * 1000,
            )
            await asyncio.sleep(min(backoff, left))
            backoff = min(backoff * 2, METADATA_BACKOFF_MAX_S)

    async def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        parts = list(tps)
        if not parts:
            return {}
        return await self._consumer.beginning_offsets(parts, timeout_ms=self._timeout_ms)

    async def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        parts = list(tps)
        if not parts:
            return {}
        return await self._consumer.end_offsets(parts, timeout_ms=self._timeout_ms)

    async def for_time(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        parts = list(tps)
        if not parts:
            return {}
        found = await self._consumer.offsets_for_times(
            {tp: timestamp_ms for tp in parts}, timeout_ms=self._timeout_ms
        )
        return {
            tp: (None if found.get(tp) is None else found[tp].offset)  # type: ignore[union-attr]
            for tp in parts
        }

    async def resolve(
        self,
        spec: ReadBound,
        tps: list[TopicPartition],
        *,
        option: str,
        timestamp_strategy: str = "error",
    ) -> Offsets:
        """Concrete offsets of ``tps`` for a starting or ending ``spec``."""
        if not tps:
            return {}
        if spec.kind == "earliest":
            return await self.earliest(tps)
        if spec.kind == "latest":
            return await self.latest(tps)
        if spec.kind == "timestamp":
            assert spec.timestamp is not None
            found = await self.for_time(tps, spec.timestamp)
            missing = [tp for tp, offset in found.items() if offset is None]
            latest = await self.latest(missing) if missing else {}
            if missing and (timestamp_strategy == "error" and option == "startingTimestamp"):
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                raise errors.ConfigurationError(
                    f"aiokafka_lite data source: no record at or after {option} "
                    f"{spec.timestamp} in {names} (set startingOffsetsByTimestampStrategy="
                    "latest to start these at the end)"
                )
            return {
                tp: (offset if offset is not None else latest[tp]) for tp, offset in found.items()
            }
        given = spec.offset_map
        missing = [tp for tp in tps if tp not in given]
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            raise errors.ConfigurationError(
                f"aiokafka_lite data source: {option} gives no offset for {names}; "
                "per-partition offsets must name every partition read"
            )
        unknown = [tp for tp in given if tp not in set(tps)]
        if unknown:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in unknown)
            raise errors.ConfigurationError(
                f"aiokafka_lite data source: {option} names partitions that do not exist: {names}"
            )
        want_earliest = [tp for tp in tps if given[tp] == EARLIEST]
        want_latest = [tp for tp in tps if given[tp] == LATEST]
        earliest = await self.earliest(want_earliest)
        latest = await self.latest(want_latest)
        result: Offsets = {}
        for tp in tps:
            offset = given[tp]
            result[tp] = (
                earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
            )
        return result

    async def batch_ranges(self, opts: ReadOptions) -> tuple[Offsets, Offsets]:
        """Start and end offsets of a batch read, checked."""
        tps = await self.partitions(opts.selection)
        starts = await self.resolve(
            opts.starting,
            tps,
            option="startingOffsets" if opts.starting.kind != "timestamp" else "startingTimestamp",
            timestamp_strategy=opts.timestamp_strategy,
        )
        ends = await self.resolve(
            opts.ending,
            tps,
            option="endingOffsets" if opts.ending.kind != "timestamp" else "endingTimestamp",
        )
        earliest = await self.earliest(tps)
        for tp in tps:
            lost = starts[tp] < earliest[tp]
            if lost:
                report_data_loss(
                    opts.fail_on_data_loss,
                    f"{tp.topic}-{tp.partition} starts at {earliest[tp]} now, after the "
                    f"requested starting offset {starts[tp]}",
                )
                starts[tp] = earliest[tp]
            if ends[tp] < starts[tp]:
                # (An end before a start that deletion moved up: the whole range is gone,
                # which is the data loss just reported, not a mistake in the options.)
                if not lost and (opts.ending.kind == "offsets" or opts.starting.kind == "offsets"):
                    raise errors.ConfigurationError(
                        f"aiokafka_lite data source: the ending offset {ends[tp]} of "
                        f"{tp.topic}-{tp.partition} is before its starting offset {starts[tp]}"
                    )
                ends[tp] = starts[tp]
        return starts, ends
