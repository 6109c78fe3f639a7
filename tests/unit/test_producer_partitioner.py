"""Partitioners: murmur2 equal to the Java client's, sticky/round-robin/callable behaviour."""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from aiokafka_lite import errors
from aiokafka_lite.producer.accumulator import RecordAccumulator
from aiokafka_lite.producer.partitioner import (
    CallablePartitioner,
    DefaultPartitioner,
    Murmur2Partitioner,
    RandomPartitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
    check_partition,
    murmur2,
    murmur2_partition,
    resolve_partitioner,
)
from aiokafka_lite.structs import TopicPartition

# Expected values of Java's org.apache.kafka.common.utils.Utils.murmur2 (from Kafka's
# own UtilsTest).
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS)
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


@settings(deadline=None)
@given(st.binary(max_size=32), st.integers(min_value=1, max_value=500))
def test_murmur2_partition_in_range_and_positive_hash(key: bytes, n: int) -> None:
    part = murmur2_partition(key, n)
    assert 0 <= part < n
    assert part == (murmur2(key) & 0x7FFFFFFF) % n


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_default_keyed_is_murmur2() -> None:
    part = DefaultPartitioner()
    parts = list(range(12))
    for key, _ in JAVA_VECTORS:
        assert part.partition("t", key, parts, parts) == murmur2_partition(key, 12)


def test_sticky_keyless_switches_after_batch_size_bytes() -> None:
    part = StickyPartitioner(batch_size=1000)
    parts = list(range(50))
    first = part.partition("t", None, parts, parts)
    # Stays on the same partition until 1000 bytes went there.
    for _ in range(9):
        assert part.partition("t", None, parts, parts) == first
        part.on_append("t", first, 100)
    assert part.partition("t", None, parts, parts) == first
    part.on_append("t", first, 100)
    seen = {part.partition("t", None, parts, parts) for _ in range(1)}
    # After the switch a new choice was made (it may randomly be the same partition, so
    # check that the byte count restarted instead).
    chosen = seen.pop()
    part.on_append("t", chosen, 999)
    assert part.partition("t", None, parts, parts) == chosen


def test_sticky_spreads_over_available_partitions_only() -> None:
    part = StickyPartitioner(batch_size=1)
    counts: collections.Counter[int] = collections.Counter()
    for _ in range(600):
        p = part.partition("t", None, [0, 1, 2, 3], [1, 3])
        part.on_append("t", p, 10)
        counts[p] += 1
    assert set(counts) == {1, 3}
    assert min(counts.values()) > 200  # uniform, not stuck


def test_round_robin_cycles_per_topic_ignoring_keys() -> None:
    part = RoundRobinPartitioner()
    parts = [0, 1, 2]
    assert [part.partition("a", b"k", parts, parts) for _ in range(4)] == [0, 1, 2, 0]
    assert part.partition("b", b"k", parts, parts) == 0
    # Skips partitions without a leader.
    assert {part.partition("c", None, parts, [2]) for _ in range(3)} == {2}


def test_murmur2_random_and_random() -> None:
    parts = list(range(7))
    m = Murmur2Partitioner()
    assert m.partition("t", b"foobar", parts, parts) == murmur2_partition(b"foobar", 7)
    assert m.partition("t", None, parts, [4]) == 4
    assert RandomPartitioner().partition("t", b"x", parts, [5]) == 5


def test_callable_partitioner_gets_aiokafka_signature() -> None:
    calls = []

    def choose(key: bytes | None, all_parts: list[int], available: list[int]) -> int:
        calls.append((key, all_parts, available))
        return all_parts[-1]

    part = resolve_partitioner(choose, 16384)
    assert isinstance(part, CallablePartitioner)
    assert part.partition("t", b"k", [0, 1], [1]) == 1
    assert calls == [(b"k", [0, 1], [1])]


def test_builtin_is_callable_like_aiokafka() -> None:
    assert DefaultPartitioner()(b"foobar", list(range(7)), list(range(7))) == murmur2_partition(
        b"foobar", 7
    )


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("default", DefaultPartitioner),
        ("murmur2", DefaultPartitioner),
        ("sticky", StickyPartitioner),
        ("round_robin", RoundRobinPartitioner),
        ("round-robin", RoundRobinPartitioner),
        ("murmur2_random", Murmur2Partitioner),
        ("random", RandomPartitioner),
    ],
)
def test_resolve_by_name(name: str, cls: type) -> None:
    assert isinstance(resolve_partitioner(name, 100), cls)


@pytest.mark.parametrize("bad", ["nope", 42, object()])
def test_resolve_rejects_unknown(bad: object) -> None:
    with pytest.raises(errors.ConfigurationError, match="partitioner"):
        resolve_partitioner(bad, 100)  # type: ignore[arg-type]


def test_check_partition_rejects_bad_answers() -> None:
    assert check_partition(2, [0, 1, 2], "t") == 2
    for bad in (3, -1, "1", 1.0, None, True):
        with pytest.raises(errors.ConfigurationError, match="partitioner returned"):
            check_partition(bad, [0, 1, 2], "t")


# --- KIP-794: switch at a full batch, next partition weighted by queue sizes ------------


class FakeQueues:
    def __init__(
        self, sizes: dict[int, int], full: bool = True, ages: dict[int, float] | None = None
    ) -> None:
        self.sizes = sizes
        self.full = full
        self.ages = ages or {}
        self.asked: list[list[int]] = []

    def queue_ages(self, topic: str, partitions: Sequence[int]) -> list[float]:
        return [self.ages.get(p, 0.0) for p in partitions]

    def queue_sizes(self, topic: str, partitions: Sequence[int]) -> list[int]:
        self.asked.append(list(partitions))
        return [self.sizes.get(p, 0) for p in partitions]

    def tail_batch_full(self, topic: str, partition: int) -> bool:
        return self.full


def _draws(
    part: StickyPartitioner, n: int, all_parts: list[int], available: list[int]
) -> collections.Counter[int]:
    counts: collections.Counter[int] = collections.Counter()
    for _ in range(n):
        p = part.next_partition("t", all_parts, available)
        counts[p] += 1
    return counts


def test_next_partition_follows_javas_cumulative_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # Queue sizes 0, 3, 1 -> weights (max + 1 - size) 4, 1, 3 -> cumulative 4, 5, 8: every
    # value of the draw in range(8) maps to one partition, each partition `weight` times.
    part = StickyPartitioner(batch_size=100)
    part.bind(FakeQueues({0: 0, 1: 3, 2: 1}))
    draws = iter(range(8))
    monkeypatch.setattr(random, "randrange", lambda n: next(draws))
    chosen = [part.next_partition("t", [0, 1, 2], [0, 1, 2]) for _ in range(8)]
    assert chosen == [0, 0, 0, 0, 1, 2, 2, 2]


def test_less_loaded_partitions_get_more_records() -> None:
    part = StickyPartitioner(batch_size=100)
    part.bind(FakeQueues({0: 0, 1: 0, 2: 9}))  # weights 10, 10, 1
    counts = _draws(part, 21_000, [0, 1, 2], [0, 1, 2])
    assert 700 < counts[2] < 1300
    assert 9_000 < counts[0] < 11_000 and 9_000 < counts[1] < 11_000


def test_equal_queues_or_no_producer_draw_uniformly() -> None:
    for queues in (FakeQueues({0: 2, 1: 2, 2: 2, 3: 2}), None):
        part = StickyPartitioner(batch_size=100)
        part.bind(queues)
        counts = _draws(part, 8_000, [0, 1, 2, 3], [0, 1, 2, 3])
        assert all(1_700 < counts[p] < 2_300 for p in range(4)), counts


def test_partitions_without_a_leader_are_never_chosen() -> None:
    queues = FakeQueues({0: 0, 1: 5, 2: 0, 3: 5})
    part = StickyPartitioner(batch_size=100)
    part.bind(queues)
    counts = _draws(part, 2_000, [0, 1, 2, 3], [1, 3])
    assert set(counts) == {1, 3}
    assert queues.asked[-1] == [1, 3]  # only the available ones are weighed


def test_switch_waits_for_a_full_batch_up_to_twice_batch_size() -> None:
    queues = FakeQueues({}, full=False)
    part = StickyPartitioner(batch_size=1000)
    part.bind(queues)
    parts = list(range(50))
    first = part.partition("t", None, parts, parts)
    part.on_append("t", first, 1500)
    # batch_size reached, but the partition's batch still has room: stay.
    assert part.partition("t", None, parts, parts) == first
    # Full now: switch (the byte count restarts).
    queues.full = True
    second = part.partition("t", None, parts, parts)
    part.on_append("t", second, 999)
    assert part.partition("t", None, parts, parts) == second
    # Twice batch_size switches whatever the batch.
    queues.full = False
    part.on_append("t", second, 1001)
    assert part._current["t"] == [second, 2000]
    part.partition("t", None, parts, parts)
    assert part._current["t"][1] == 0


def _small_accumulator() -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=200,
        buffer_memory=100_000,
        compression=0,
        linger_ms=5,
        delivery_timeout_ms=120000,
    )


async def test_the_accumulator_tells_queue_sizes_and_full_batches() -> None:
    acc = _small_accumulator()
    assert acc.queue_sizes("t", [0, 1]) == [0, 0]
    assert acc.tail_batch_full("t", 0)  # nothing being filled
    acc.try_append(TopicPartition("t", 0), 1, None, b"x" * 40, None)
    assert acc.queue_sizes("t", [0, 1]) == [1, 0]
    assert not acc.tail_batch_full("t", 0)
    for _ in range(3):
        acc.try_append(TopicPartition("t", 0), 1, None, b"x" * 40, None)
    # 4 records of ~47 bytes in 200: no room for a fifth.
    assert acc.queue_sizes("t", [0, 1]) == [1, 0] and acc.tail_batch_full("t", 0)
    acc.try_append(TopicPartition("t", 0), 1, None, b"x" * 40, None)
    assert acc.queue_sizes("t", [0]) == [2] and not acc.tail_batch_full("t", 0)


async def test_producer_binds_its_sticky_partitioner_to_its_queues() -> None:
    from aiokafka_lite.producer import Producer

    producer = Producer(bootstrap_servers="fake:9092")
    producer._setup()
    try:
        assert isinstance(producer._partitioner, StickyPartitioner)
        assert producer._partitioner._queues is producer._accumulator
    finally:
        assert producer._sender is not None
        await producer._sender.stop()


# --- the Java client's partitioner.* settings --------------------------------------------


def test_availability_timeout_leaves_out_partitions_whose_broker_takes_nothing() -> None:
    # linger 5 ms + timeout 100 ms: a partition whose oldest batch is 0.2 s old is left
    # out; one at 0.1 s is not (yet).
    queues = FakeQueues({0: 0, 1: 0, 2: 0}, ages={0: 0.2, 1: 0.1, 2: 0.0})
    part = StickyPartitioner(batch_size=100, availability_timeout_ms=100, linger_ms=5)
    part.bind(queues)
    assert set(_draws(part, 500, [0, 1, 2], [0, 1, 2])) == {1, 2}
    # Every partition stalled: the draw falls back to all of them rather than none.
    queues.ages = {0: 1.0, 1: 1.0, 2: 1.0}
    assert set(_draws(part, 500, [0, 1, 2], [0, 1, 2])) == {0, 1, 2}
    # Off (the default): stalled partitions are drawn like the others.
    off = StickyPartitioner(batch_size=100)
    off.bind(FakeQueues({0: 0, 1: 0, 2: 0}, ages={0: 9.0}))
    assert set(_draws(off, 500, [0, 1, 2], [0, 1, 2])) == {0, 1, 2}


def test_adaptive_off_draws_uniformly_whatever_the_queues() -> None:
    queues = FakeQueues({0: 0, 1: 0, 2: 50})  # adaptive: partition 2 weighs 1 in 103
    part = StickyPartitioner(batch_size=100, adaptive=False)
    part.bind(queues)
    counts = _draws(part, 9_000, [0, 1, 2], [0, 1, 2])
    assert all(2_600 < counts[p] < 3_400 for p in range(3)), counts
    assert queues.asked == []


def test_ignore_keys_makes_keyed_records_sticky() -> None:
    part = StickyPartitioner(batch_size=1000, ignore_keys=True)
    parts = list(range(50))
    chosen = {part.partition("t", b"key-%d" % i, parts, parts) for i in range(20)}
    assert len(chosen) == 1  # one sticky partition, not murmur2 of each key
    keyed = StickyPartitioner(batch_size=1000)
    assert {keyed.partition("t", b"key-%d" % i, parts, parts) for i in range(20)} == {
        murmur2_partition(b"key-%d" % i, 50) for i in range(20)
    }


def test_partitioner_settings_are_checked_at_construction() -> None:
    from aiokafka_lite.producer import Producer

    made = Producer(
        bootstrap_servers="fake:9092",
        partitioner_ignore_keys=True,
        partitioner_availability_timeout_ms=500,
        linger_ms=20,
    )
    part = made._partitioner
    assert isinstance(part, StickyPartitioner) and part.ignore_keys and part.adaptive
    assert part._stalled_after == pytest.approx(0.52)
    assert made.config.partitioner_availability_timeout_ms == 500
    assert made._sticky_keyed
    # A sticky partitioner given as an object: the producer follows its own settings.
    given = Producer(bootstrap_servers="fake:9092", partitioner=StickyPartitioner(ignore_keys=True))
    assert given._sticky_keyed
    assert not Producer(bootstrap_servers="fake:9092")._sticky_keyed
    for options, message in [
        ({"partitioner_ignore_keys": 1}, "must be a bool"),
        ({"partitioner_availability_timeout_ms": -1}, "must be >= 0"),
        (
            {"partitioner_adaptive_partitioning": False, "partitioner_availability_timeout_ms": 5},
            "needs adaptive partitioning",
        ),
        ({"partitioner": "round_robin", "partitioner_ignore_keys": True}, "do not apply"),
        ({"partitioner": StickyPartitioner(), "partitioner_ignore_keys": True}, "do not apply"),
    ]:
        with pytest.raises(errors.ConfigurationError, match=message):
            Producer(bootstrap_servers="fake:9092", **options)


async def test_the_accumulator_tells_how_long_batches_have_waited() -> None:
    acc = _small_accumulator()
    assert acc.queue_ages("t", [0, 1]) == [0.0, 0.0]
    acc.try_append(TopicPartition("t", 0), 1, None, b"x" * 40, None)
    await asyncio.sleep(0.05)
    age, none = acc.queue_ages("t", [0, 1])
    assert 0.04 < age < 5 and none == 0.0
