"""Choosing a partition for a record.

Keyed records go where the Java client sends them: ``murmur2(key) & 0x7fffffff``
modulo the partition count, so producers written in any language that follow Kafka's
default agree on where a key lives. Records without a key use the uniform sticky
partitioner (KIP-480, KIP-794): they stay on one partition until a batch worth of bytes
went there and its batch is full, then move to another partition with a leader, drawn
with weights that favour partitions with fewer batches waiting (less-loaded brokers get
more), which fills batches quickly without skewing load over time.

A partitioner is either one of the built-ins (by name or instance) or any callable with
aiokafka's signature ``(key_bytes, all_partitions, available_partitions) -> int``.
"""

from __future__ import annotations

import bisect
import itertools
import random
import struct
from collections.abc import Callable, Sequence
from typing import Protocol

from aiokafka_lite import errors
from aiokafka_lite.accel import speedups

__all__ = [
    "DefaultPartitioner",
    "Murmur2Partitioner",
    "Partitioner",
    "PartitionerCallable",
    "QueueView",
    "RandomPartitioner",
    "RoundRobinPartitioner",
    "StickyPartitioner",
    "murmur2",
    "murmur2_partition",
    "python_murmur2",
    "python_murmur2_partition",
    "resolve_partitioner",
]

_MASK32 = 0xFFFFFFFF
_M = 0x5BD1E995
_SEED = 0x9747B28C

#: aiokafka's partitioner signature: (key bytes or None, all partitions, available ones).
PartitionerCallable = Callable[[bytes | None, list[int], list[int]], int]


def python_murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 (32-bit, seed 0x9747b28c) as Kafka's Java client computes it.

    The reference; :func:`murmur2` is the compiled one when it was built.

    Returns the hash as a signed 32-bit integer, the value Java's ``Utils.murmur2`` gives.
    """
    raw = bytes(data)
    length = len(raw)
    h = (_SEED ^ length) & _MASK32
    nwords = length >> 2
    if nwords:
        for k in struct.unpack_from(f"<{nwords}I", raw):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            k = (k * _M) & _MASK32
            h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= raw[base + 2] << 16
        if tail >= 2:
            h ^= raw[base + 1] << 8
        h ^= raw[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


#: murmur2, compiled when built (see :mod:`aiokafka_lite.accel`): the same hashes.
murmur2: Callable[[bytes | bytearray | memoryview], int] = (
    python_murmur2 if speedups is None else speedups.murmur2
)


def python_murmur2_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``num_partitions``
    (the reference of the compiled :func:`murmur2_partition`)."""
    if num_partitions < 0:
        raise ValueError("num_partitions must be > 0")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


#: The partition Kafka's default partitioner picks for ``key`` among ``num_partitions``:
#: ``(murmur2(key) & 0x7fffffff) % num_partitions``, compiled when built.
murmur2_partition: Callable[[bytes | bytearray | memoryview, int], int] = (
    python_murmur2_partition if speedups is None else speedups.murmur2_partition
)


class Partitioner:
    """Base class of the built-in partitioners.

    ``partition`` picks a partition for one record; ``on_append`` tells the partitioner
    how many bytes went to the partition it picked (the sticky strategy uses it). Calling
    the instance with aiokafka's ``(key, all_partitions, available_partitions)``
    signature works too.
    """

    #: Whether keyless records go through the producer's sticky strategy.
    sticky_keyless = False

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        raise NotImplementedError

    def on_append(self, topic: str, partition: int, size: int) -> None:
        """Called after a keyless record of ``size`` bytes went to ``partition``."""

    def __call__(self, key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        return self.partition("", key, all_partitions, available)


def _pick_random(all_partitions: list[int], available: list[int]) -> int:
    candidates = available or all_partitions
    return candidates[random.randrange(len(candidates))]


class QueueView(Protocol):
    """What the uniform sticky partitioner reads from the producer's queues (KIP-794)."""

    def queue_sizes(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """How many batches wait to be sent for each of ``partitions``."""
        ...

    def tail_batch_full(self, topic: str, partition: int) -> bool:
        """Whether the partition's batch being filled has no room for another record."""
        ...

    def queue_ages(self, topic: str, partitions: Sequence[int]) -> list[float]:
        """Seconds the oldest batch waiting for each of ``partitions`` has existed (0: none)."""
        ...


class StickyPartitioner(Partitioner):
    """Uniform sticky partitioning for keyless records (KIP-794), as the Java client does.

    A topic's keyless records stay on one partition until at least ``batch_size`` bytes
    were appended there *and* the batch being filled is full (so that switching does not
    leave a part-filled batch behind), or ``2 * batch_size`` bytes whatever the batch.
    The next partition is drawn among the partitions that have a leader, weighted by how
    many batches wait for each (weight ``max + 1 - queued``): partitions whose leader
    keeps up get more records than those of a slow or overloaded broker. When every
    queue is the same length (or the partitioner is not attached to a producer) the
    draw is uniform. Keyed records are hashed with murmur2 like the default.

    The Java client's ``partitioner.*`` settings: ``adaptive=False``
    (``partitioner.adaptive.partitioning.enable``) draws uniformly whatever the queues;
    ``availability_timeout_ms`` (``partitioner.availability.timeout.ms``, 0 = off) leaves
    out of the draw a partition whose oldest batch has waited longer than ``linger_ms``
    plus this timeout (its broker is not taking produce requests), unless that would
    leave none; ``ignore_keys=True`` (``partitioner.ignore.keys``) partitions keyed
    records like keyless ones.
    """

    sticky_keyless = True

    def __init__(
        self,
        batch_size: int = 16384,
        *,
        adaptive: bool = True,
        availability_timeout_ms: int = 0,
        ignore_keys: bool = False,
        linger_ms: float = 0.0,
    ) -> None:
        if batch_size <= 0:
            raise errors.ConfigurationError("batch_size must be > 0")
        if availability_timeout_ms < 0:
            raise errors.ConfigurationError("availability_timeout_ms must be >= 0")
        if availability_timeout_ms and not adaptive:
            raise errors.ConfigurationError(
                "partitioner_availability_timeout_ms needs adaptive partitioning "
                "(partitioner_adaptive_partitioning=True), as in the Java client"
            )
        self.batch_size = batch_size
        self.adaptive = adaptive
        self.ignore_keys = ignore_keys
        # A partition whose oldest batch is older than this (seconds) is left out.
        self._stalled_after = (
            (linger_ms + availability_timeout_ms) / 1000 if availability_timeout_ms else 0.0
        )
        # topic -> [partition, bytes appended since the switch]
        self._current: dict[str, list[int]] = {}
        self._queues: QueueView | None = None

    def bind(self, queues: QueueView | None) -> None:
        """Read queue sizes from ``queues`` (the producer does this at start)."""
        self._queues = queues

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        if key is not None and not self.ignore_keys:
            return all_partitions[murmur2_partition(key, len(all_partitions))]
        state = self._current.get(topic)
        if state is not None:
            part, produced = state
            # The sticky choice stays valid only while the partition still exists.
            if part < len(all_partitions) and (
                produced < self.batch_size
                or (produced < 2 * self.batch_size and not self._batch_full(topic, part))
            ):
                return part
        part = self.next_partition(topic, all_partitions, available)
        self._current[topic] = [part, 0]
        return part

    def _batch_full(self, topic: str, partition: int) -> bool:
        queues = self._queues
        return queues is None or queues.tail_batch_full(topic, partition)

    def next_partition(self, topic: str, all_partitions: list[int], available: list[int]) -> int:
        """The partition the next keyless records of ``topic`` stick to."""
        candidates = available or all_partitions
        queues = self._queues
        if queues is None or len(candidates) == 1 or not self.adaptive:
            return candidates[random.randrange(len(candidates))]
        if self._stalled_after:
            limit = self._stalled_after
            ages = queues.queue_ages(topic, candidates)
            taking = [p for p, age in zip(candidates, ages, strict=True) if age <= limit]
            if taking and len(taking) < len(candidates):
                candidates = taking
                if len(candidates) == 1:
                    return candidates[0]
        sizes = queues.queue_sizes(topic, candidates)
        most = max(sizes)
        if most == min(sizes):
            return candidates[random.randrange(len(candidates))]
        # Java's BuiltInPartitioner: a cumulative table of (max + 1 - queue size).
        cumulative = list(itertools.accumulate(most + 1 - size for size in sizes))
        return candidates[bisect.bisect_right(cumulative, random.randrange(cumulative[-1]))]

    def on_append(self, topic: str, partition: int, size: int) -> None:
        state = self._current.get(topic)
        if state is not None and state[0] == partition:
            state[1] += size

    def room(self, topic: str, partition: int) -> int:
        """Bytes of keyless records (counted as ``on_append`` counts them) that may go to
        ``partition`` before :meth:`partition` must look again; 0 when it must look at
        the next record already. For the producer's ``send_many``, which appends a run
        of records after one :meth:`partition` call and one ``on_append`` of their sum.
        """
        state = self._current.get(topic)
        if state is None or state[0] != partition:
            return 0
        return max(self.batch_size - state[1], 0)

    def reset(self, topic: str) -> None:
        """Forget the sticky choice for ``topic`` (e.g. its partition lost its leader)."""
        self._current.pop(topic, None)


class DefaultPartitioner(StickyPartitioner):
    """Kafka's default: murmur2 for keyed records, uniform sticky for keyless ones."""


class Murmur2Partitioner(Partitioner):
    """murmur2 for keyed records, a random partition for keyless ones.

    The same choice as librdkafka's ``murmur2_random`` partitioner.
    """

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        if key is None:
            return _pick_random(all_partitions, available)
        return all_partitions[(murmur2(key) & 0x7FFFFFFF) % len(all_partitions)]


class RandomPartitioner(Partitioner):
    """A random partition with a leader for every record, keyed or not."""

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        return _pick_random(all_partitions, available)


class RoundRobinPartitioner(Partitioner):
    """Each topic's records go to its partitions in turn, ignoring keys.

    Partitions without a leader are skipped while others have one.
    """

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        n = self._counters.get(topic, 0)
        self._counters[topic] = n + 1
        candidates = available or all_partitions
        return candidates[n % len(candidates)]


class CallablePartitioner(Partitioner):
    """Wraps a user callable with aiokafka's ``(key, all, available) -> int`` signature."""

    def __init__(self, func: PartitionerCallable) -> None:
        self.func = func

    def partition(
        self, topic: str, key: bytes | None, all_partitions: list[int], available: list[int]
    ) -> int:
        return self.func(key, all_partitions, available)

    def __repr__(self) -> str:
        return f"CallablePartitioner({self.func!r})"


#: Names of the built-in partitioners: the sticky ones take the ``partitioner_*`` settings.
_STICKY_BY_NAME: dict[str, type[StickyPartitioner]] = {
    "default": DefaultPartitioner,
    "sticky": StickyPartitioner,
    "consistent_random": DefaultPartitioner,
    "murmur2": DefaultPartitioner,
}
_OTHERS_BY_NAME: dict[str, Callable[[], Partitioner]] = {
    "murmur2_random": Murmur2Partitioner,
    "random": RandomPartitioner,
    "round_robin": RoundRobinPartitioner,
}


def resolve_partitioner(
    spec: str | Partitioner | PartitionerCallable | None,
    batch_size: int,
    *,
    adaptive: bool = True,
    availability_timeout_ms: int = 0,
    ignore_keys: bool = False,
    linger_ms: float = 0.0,
) -> Partitioner:
    """Turn the ``partitioner`` option into a `Partitioner` (ConfigurationError if invalid).

    The keyword settings configure the built-in sticky partitioner (the default); they
    cannot be combined with another partitioner.
    """
    if spec is None:
        spec = "default"
    name = spec.lower().replace("-", "_") if isinstance(spec, str) else None
    result: Partitioner
    if name in _STICKY_BY_NAME:
        return _STICKY_BY_NAME[name](
            batch_size,
            adaptive=adaptive,
            availability_timeout_ms=availability_timeout_ms,
            ignore_keys=ignore_keys,
            linger_ms=linger_ms,
        )
    if name is not None:
        factory = _OTHERS_BY_NAME.get(name)
        if factory is None:
            known = sorted([*_STICKY_BY_NAME, *_OTHERS_BY_NAME])
            raise errors.ConfigurationError(
                f"unknown partitioner {spec!r}; use one of {', '.join(known)} "
                "or a callable(key_bytes, all_partitions, available_partitions)"
            )
        result = factory()
    elif isinstance(spec, Partitioner):
        result = spec
    elif callable(spec):
        result = CallablePartitioner(spec)
    else:
        raise errors.ConfigurationError(
            f"partitioner must be a name, a Partitioner or a callable, got {type(spec).__name__}"
        )
    if not adaptive or availability_timeout_ms or ignore_keys:
        raise errors.ConfigurationError(
            "partitioner_adaptive_partitioning, partitioner_availability_timeout_ms and "
            "partitioner_ignore_keys configure the built-in default partitioner (by name); "
            f"they do not apply to {result!r}"
        )
    return result


def check_partition(choice: object, all_partitions: Sequence[int], topic: str) -> int:
    """Validate a partitioner's answer."""
    if type(choice) is not int or choice not in all_partitions:
        raise errors.ConfigurationError(
            f"partitioner returned {choice!r} for topic {topic!r}, which is not one of its "
            f"partitions {list(all_partitions)}"
        )
    return choice
