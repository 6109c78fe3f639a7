"""Partitioners: murmur2 equal to the Java client's, sticky/round-robin/callable behaviour."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from aiokafka_lite import errors
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
    with pytest.raises(errors.ConfigurationError):
        resolve_partitioner(bad, 100)  # type: ignore[arg-type]


def test_check_partition_rejects_bad_answers() -> None:
    assert check_partition(2, [0, 1, 2], "t") == 2
    for bad in (3, -1, "1", 1.0, None, True):
        with pytest.raises(errors.ConfigurationError, match="partitioner returned"):
            check_partition(bad, [0, 1, 2], "t")
