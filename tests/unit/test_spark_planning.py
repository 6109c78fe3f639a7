"""Planning pieces of the Spark data source that need no cluster and no JVM.

Offset JSON, range splitting, rate limiting, the read/write schemas and the Arrow
batches handed to Spark, and the private event loop helpers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import pickle
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark.sql.datasource")

from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from aiokafka_lite import errors  # noqa: E402
from aiokafka_lite.spark._runtime import iterate_async, run_async  # noqa: E402
from aiokafka_lite.spark.offsets import (  # noqa: E402
    DataLossError,
    OffsetRange,
    OffsetResolver,
    from_json,
    group_ranges,
    plan_ranges,
    rate_limit,
    report_data_loss,
    to_json,
)
from aiokafka_lite.spark.options import parse_read_options  # noqa: E402
from aiokafka_lite.spark.reader import KafkaInputPartition, KafkaStreamReader  # noqa: E402
from aiokafka_lite.spark.schema import (  # noqa: E402
    RecordBatchBuilder,
    arrow_schema,
    check_read_schema,
    check_write_schema,
    read_schema,
)
from aiokafka_lite.structs import ConsumerRecord, TopicPartition  # noqa: E402

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


# --- stream offsets ---------------------------------------------------------------------


def test_offset_json_round_trip_is_spark_kafka_format() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    as_json = to_json(offsets)
    assert as_json == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json(as_json) == offsets


def test_offset_json_refuses_garbage() -> None:
    with pytest.raises(errors.IllegalStateError):
        from_json({"a": 3})
    with pytest.raises(errors.IllegalStateError):
        from_json({"a": {"x": 3}})


# --- ranges -----------------------------------------------------------------------------


def test_one_range_per_partition_and_empty_ranges_dropped() -> None:
    ranges = plan_ranges(
        {A0: 0, A1: 5, B0: 4}, {A0: 10, A1: 5, B0: 6}, max_records_per_partition=100
    )
    assert ranges == [OffsetRange("a", 0, 0, 10), OffsetRange("b", 0, 4, 6)]


def test_large_ranges_are_split_into_contiguous_pieces() -> None:
    ranges = plan_ranges({A0: 100}, {A0: 351}, max_records_per_partition=100)
    assert [(r.start, r.end) for r in ranges] == [(100, 184), (184, 268), (268, 351)]
    assert all(r.size <= 100 for r in ranges)


def test_min_partitions_splits_proportionally() -> None:
    ranges = plan_ranges(
        {A0: 0, B0: 0}, {A0: 300, B0: 100}, max_records_per_partition=10**6, min_partitions=4
    )
    assert len(ranges) >= 4
    for tp, end in ((A0, 300), (B0, 100)):
        mine = [r for r in ranges if (r.topic, r.partition) == tp]
        assert mine[0].start == 0 and mine[-1].end == end
        assert all(x.end == y.start for x, y in itertools.pairwise(mine))


def test_small_ranges_share_a_task_and_large_ones_keep_their_own() -> None:
    small = [OffsetRange("t", p, 0, 250) for p in range(8)]
    assert group_ranges(small, min_records=20_000, max_records=500_000) == [tuple(small)]
    big = [OffsetRange("t", p, 0, 125_000) for p in range(8)]
    assert group_ranges(big, min_records=20_000, max_records=500_000) == [(r,) for r in big]
    # Off, or asked for parallelism: one task per range.
    assert group_ranges(small, min_records=0, max_records=500_000) == [(r,) for r in small]
    assert group_ranges(small, min_records=20_000, max_records=500_000, min_groups=4) == [
        (r,) for r in small
    ]


@given(
    sizes=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3_000)), min_size=0, max_size=40),
    min_records=st.integers(0, 5_000),
    max_records=st.integers(1, 8_000),
    min_groups=st.none() | st.integers(1, 12),
)
def test_grouped_ranges_are_every_range_once_within_the_bounds(
    sizes: list[tuple[int, int]], min_records: int, max_records: int, min_groups: int | None
) -> None:
    # Pieces of a partition, as plan_ranges makes them: contiguous, in order.
    ranges: list[OffsetRange] = []
    at: dict[int, int] = {}
    for partition, size in sorted(sizes, key=lambda x: x[0]):
        start = at.get(partition, 0)
        ranges.append(OffsetRange("t", partition, start, start + size))
        at[partition] = start + size
    groups = group_ranges(
        ranges, min_records=min_records, max_records=max_records, min_groups=min_groups
    )
    assert [r for g in groups for r in g] == ranges
    for group in groups:
        assert group
        assert len({r.partition for r in group}) == len(group)  # one consumer reads it
        assert len(group) == 1 or sum(r.size for r in group) <= max_records
    if min_groups is not None:
        assert len(groups) >= min(min_groups, len(ranges))
    # No two neighbours could have been one group (both small, fitting, no shared partition).
    if min_groups is None:
        for x, y in itertools.pairwise(groups):
            size_x, size_y = sum(r.size for r in x), sum(r.size for r in y)
            shared = {r.partition for r in x} & {r.partition for r in y}
            assert not (
                size_x + size_y < min_records and size_x + size_y <= max_records and not shared
            )


# --- rate limiting ----------------------------------------------------------------------------


def test_rate_limit_takes_everything_when_under_the_limit() -> None:
    assert rate_limit({A0: 0, A1: 5}, {A0: 3, A1: 6}, 10) == {A0: 3, A1: 6}


def test_rate_limit_is_exact_and_fair() -> None:
    starts = {A0: 0, A1: 100, B0: 50}
    latest = {A0: 1000, A1: 110, B0: 50}
    ends = rate_limit(starts, latest, 101)
    taken = {tp: ends[tp] - starts[tp] for tp in starts}
    assert sum(taken.values()) == 101
    assert taken[B0] == 0
    assert taken[A0] > taken[A1] > 0
    assert all(ends[tp] <= latest[tp] for tp in latest)


def test_rate_limit_always_progresses() -> None:
    starts = {TopicPartition("t", p): 0 for p in range(8)}
    latest = {tp: 1 for tp in starts}
    ends = rate_limit(starts, latest, 1)
    assert sum(ends[tp] - starts[tp] for tp in starts) == 1


def test_rate_limit_new_partition_without_start_is_left_at_latest() -> None:
    # Partitions missing from ``starts`` have nothing to take in this call.
    assert rate_limit({A0: 0}, {A0: 10, B0: 4}, 5) == {A0: 5, B0: 4}


def test_data_loss_raises_or_warns(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        report_data_loss(True, "t-0 lost [0, 5)")
    report_data_loss(False, "t-0 lost [0, 5)")
    assert "t-0 lost [0, 5)" in caplog.text


# --- schemas and Arrow --------------------------------------------------------------------


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_is_what_spark_expects(headers: bool) -> None:
    # Spark compares the batches' schema with this exactly (plan_data_source_read.py).
    expected = to_arrow_schema(read_schema(headers), timezone="UTC")
    assert arrow_schema(headers).equals(expected)


def test_read_schema_columns() -> None:
    assert read_schema(True).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )


def test_user_schema_is_refused() -> None:
    check_read_schema(read_schema(False), False)
    with pytest.raises(errors.ConfigurationError, match="fixed and cannot be set"):
        check_read_schema(StructType([StructField("value", StringType())]), False)
    with pytest.raises(errors.ConfigurationError, match="includeHeaders=true"):
        check_read_schema(read_schema(True), False)


def _record(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    timestamp: int = 0,
    timestamp_type: int = 0,
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        "t", 2, offset, timestamp, timestamp_type, key, value, None,
        -1 if key is None else len(key), -1 if value is None else len(value), headers,
    )  # fmt: skip


def test_record_batch_builder() -> None:
    builder = RecordBatchBuilder("t", 2, include_headers=True)
    added = builder.add_records(
        [
            _record(10, b"k", b"v", [("h", b"1"), ("n", None)], 1_700_000_000_123),
            _record(12, None, None, [], timestamp_type=1),
        ]
    )
    assert added == 2
    batch = builder.build()
    assert len(builder) == 0
    assert batch.schema.equals(arrow_schema(True))
    rows = batch.to_pylist()
    assert rows[0]["key"] == b"k" and rows[0]["value"] == b"v"
    assert rows[0]["topic"] == "t" and rows[0]["partition"] == 2 and rows[0]["offset"] == 10
    assert rows[0]["timestamp"] == dt.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc
    )
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert rows[1]["key"] is None and rows[1]["timestampType"] == 1 and rows[1]["headers"] == []


_bytes_or_none = st.none() | st.binary(max_size=8)
_headers = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3)


@given(
    chunks=st.lists(
        st.lists(
            st.tuples(_bytes_or_none, _bytes_or_none, _headers),
            max_size=6,
        ),
        max_size=4,
    ),
    include_headers=st.booleans(),
)
def test_record_batch_builder_keeps_every_record_in_order(
    chunks: list[list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]],
    include_headers: bool,
) -> None:
    """Records added in any number of calls come out as one batch, each field in place
    (headers flattened and rebuilt, empty lists and null values included)."""
    builder = RecordBatchBuilder("t", 2, include_headers=include_headers)
    expected = []
    offset = 0
    for chunk in chunks:
        records = []
        for key, value, headers in chunk:
            records.append(_record(offset, key, value, headers, timestamp=offset * 7))
            expected.append((offset, key, value, headers))
            offset += 1
        sizes = sum(len(k or b"") + len(v or b"") for k, v, _ in chunk)
        assert builder.add_records(records) == sizes
    batch = builder.build()
    batch.validate(full=True)
    assert batch.schema.equals(arrow_schema(include_headers))
    rows = batch.to_pylist()
    assert len(rows) == len(expected)
    for row, (off, key, value, headers) in zip(rows, expected, strict=True):
        assert (row["offset"], row["key"], row["value"], row["partition"]) == (off, key, value, 2)
        assert row["timestamp"] == dt.datetime.fromtimestamp(off * 7 / 1000, dt.timezone.utc)
        if include_headers:
            assert row["headers"] == [{"key": k, "value": v} for k, v in headers]


def _write_schema(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_write_schema_columns() -> None:
    cols = check_write_schema(
        _write_schema(
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("extra", LongType()),
        ),
        None,
    )
    assert (cols.value, cols.key, cols.topic, cols.partition, cols.headers) == (
        "value",
        "key",
        "topic",
        "partition",
        None,
    )
    # The topic option wins over a topic column.
    assert (
        check_write_schema(
            _write_schema(StructField("value", StringType()), StructField("topic", StringType())),
            "x",
        ).topic
        is None
    )


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ([StructField("key", StringType())], "need a 'value' column"),
        ([StructField("value", LongType())], "'value' must be string or binary"),
        (
            [StructField("value", StringType()), StructField("partition", LongType())],
            "'partition' must be int",
        ),
        (
            [StructField("value", StringType()), StructField("headers", ArrayType(StringType()))],
            "'headers' must be array<struct<key:string,value:binary>>",
        ),
    ],
)
def test_bad_write_schema(fields: list[StructField], match: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=match):
        check_write_schema(_write_schema(*fields), "t")


def test_write_needs_a_topic() -> None:
    with pytest.raises(errors.ConfigurationError, match="topic option or a 'topic' column"):
        check_write_schema(_write_schema(StructField("value", StringType())), None)


# --- what Spark pickles ---------------------------------------------------------------------


def test_input_partitions_and_stream_reader_pickle_without_state() -> None:
    part = KafkaInputPartition((OffsetRange("t", 1, 5, 10), OffsetRange("u", 0, 0, 3)))
    assert pickle.loads(pickle.dumps(part)) == part
    opts = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, streaming=True)
    reader = KafkaStreamReader(opts)
    reader._target = {A0: 1}
    again = pickle.loads(pickle.dumps(reader))
    assert again.opts == opts and again._target is None and again._session is None


def test_a_partition_added_mid_stream_whose_log_starts_after_0_is_data_loss(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # t-1 and t-2 appeared since the last micro-batch; t-1's log starts at 5 (its first
    # records deleted before the query saw the partition), t-2's at 0. Once read from
    # 5 without a word (noida: 5 of 10 records skipped with failOnDataLoss=true).
    def plan(fail: str) -> list[tuple[str, int, int, int]]:
        opts = parse_read_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "failOnDataLoss": fail},
            streaming=True,
        )
        reader = KafkaStreamReader(opts)
        earliest = {TopicPartition("t", 1): 5, TopicPartition("t", 2): 0}
        monkeypatch.setattr(reader, "_call", lambda fn, what: dict(earliest))
        parts = reader.partitions({"t": {"0": 10}}, {"t": {"0": 12, "1": 10, "2": 3}})
        return sorted(
            (r.topic, r.partition, r.start, r.end)
            for p in parts
            for r in p.ranges  # type: ignore[attr-defined]
        )

    with pytest.raises(DataLossError, match=r"t-1, added while the query ran, starts at offset 5"):
        plan("true")
    assert plan("false") == [("t", 0, 10, 12), ("t", 1, 5, 10), ("t", 2, 0, 3)]
    assert "offsets [0, 5) were deleted" in caplog.text


def test_a_batch_range_deleted_whole_is_data_loss_not_bad_options(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # startingOffsets 120, endingOffsets 140 of a partition whose log now starts at 150
    # (the records deleted): with failOnDataLoss=false an empty read and a warning, as
    # Spark's Kafka source; it was a ConfigurationError ("the ending offset 140 of a-0
    # is before its starting offset 150", a start nobody gave) whatever the option.
    def ranges(fail: str) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribe": "a",
                "startingOffsets": '{"a": {"0": 120}}',
                "endingOffsets": '{"a": {"0": 140}}',
                "failOnDataLoss": fail,
            },
            streaming=False,
        )
        resolver = OffsetResolver(opts.client)

        async def partitions(selection: object) -> list[TopicPartition]:
            return [A0]

        async def earliest(tps: object) -> dict[TopicPartition, int]:
            return {A0: 150}

        monkeypatch.setattr(resolver, "partitions", partitions)
        monkeypatch.setattr(resolver, "earliest", earliest)
        return asyncio.run(resolver.batch_ranges(opts))

    assert ranges("false") == ({A0: 150}, {A0: 150})
    assert "a-0 starts at 150 now, after the requested starting offset 120" in caplog.text
    with pytest.raises(DataLossError, match="a-0 starts at 150 now"):
        ranges("true")


def test_a_partition_missing_from_one_metadata_answer_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stream reads a-0 from 10; one metadata answer lacks topic a (a broker behind
    # on metadata), the next has it again. It was called gone at once: DataLossError,
    # or with failOnDataLoss=false dropped from the offsets and read again from its
    # start (0) once back: offsets 0-9 twice.
    import aiokafka_lite.spark.reader as reader_module

    monkeypatch.setattr(reader_module, "GONE_RECHECK_S", 0.0, raising=False)

    def latest(fail: str, answers: list[list[TopicPartition]]) -> dict[str, object]:
        opts = parse_read_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "failOnDataLoss": fail},
            streaming=True,
        )
        reader = KafkaStreamReader(opts)
        left = list(answers)

        class Resolver:
            async def partitions(self, selection: object) -> list[TopicPartition]:
                return left.pop(0) if len(left) > 1 else left[0]

            async def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
                return {tp: 20 for tp in tps}

            async def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
                return {tp: 0 for tp in tps}

        monkeypatch.setattr(reader, "_call", lambda fn, what: asyncio.run(fn(Resolver())))
        return reader.latestOffset({"a": {"0": 10}}, None)

    assert latest("true", [[], [A0]]) == {"a": {"0": 20}}
    assert latest("false", [[], [], [A0]]) == {"a": {"0": 20}}
    # Gone in every answer: gone.
    with pytest.raises(DataLossError, match="partition a-0 is gone"):
        latest("true", [[]])
    assert latest("false", [[]]) == {}


# --- private loops --------------------------------------------------------------------------


def test_run_async_is_bounded() -> None:
    assert run_async(asyncio.sleep(0, "done"), 5, "nothing") == "done"
    with pytest.raises(errors.KafkaTimeoutError, match="sleeping did not finish within 0 s"):
        run_async(asyncio.sleep(10), 0.05, "sleeping")


def test_a_timeout_the_work_raises_itself_goes_up_unchanged() -> None:
    # KafkaTimeoutError is a TimeoutError: the bound must not take the work's own timeout
    # (a read task's pollTimeoutMs naming the partition and offset, a flush) for its
    # expiry and replace it with "did not finish within <the bound> s".
    async def stalled() -> None:
        await asyncio.sleep(0.01)
        raise errors.KafkaTimeoutError("no record of t-0 at offset 7 within 10 ms")

    with pytest.raises(errors.KafkaTimeoutError, match=r"^no record of t-0 at offset 7"):
        run_async(stalled(), 60, "reading t-0")

    async def records() -> AsyncIterator[int]:
        yield 1
        await stalled()
        yield 2

    it = iterate_async(records(), 60, "reading t-0")
    assert next(it) == 1
    with pytest.raises(errors.KafkaTimeoutError, match=r"^no record of t-0 at offset 7"):
        next(it)
    # ... while the bound's own expiry still says what did not finish.
    with pytest.raises(errors.KafkaTimeoutError, match="reading t-0 did not finish within 0 s"):
        next(iterate_async(records_after(10), 0.05, "reading t-0"))


async def records_after(seconds: float) -> AsyncIterator[int]:
    await asyncio.sleep(seconds)
    yield 1


def test_iterate_async_closes_the_generator_when_stopped_early() -> None:
    closed: list[bool] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(100):
                await asyncio.sleep(0)
                yield i
        finally:
            await asyncio.sleep(0)
            closed.append(True)

    it = iterate_async(numbers(), 5, "numbers")
    assert [next(it), next(it)] == [0, 1]
    it.close()
    assert closed == [True]
    assert list(iterate_async(numbers(), 5, "numbers")) == list(range(100))


def test_what_metadata_lacks_for_a_read_waits_or_fails() -> None:
    # Asked again: a retriable topic error, a partition without a leader. Not at all: a
    # topic that does not exist (nothing to read), a partition with a leader (even with a
    # partition error such as REPLICA_NOT_AVAILABLE). Raised at once: an error asking
    # again does not cure (TOPIC_AUTHORIZATION_FAILED).
    from aiokafka_lite.cluster import ClusterMetadata, TopicMetadata
    from aiokafka_lite.spark.offsets import _not_ready
    from aiokafka_lite.structs import PartitionMetadata

    def topic(name: str, code: int = 0, parts: dict[int, tuple[int, int]] | None = None) -> Any:
        return TopicMetadata(
            name,
            None,
            False,
            {
                p: PartitionMetadata(name, p, leader, (1,), (1,), error_code=error)
                for p, (leader, error) in (parts or {}).items()
            },
            code,
        )

    cluster = ClusterMetadata(
        {},
        {
            "creating": topic("creating", 5),
            "missing": topic("missing", 3),
            "electing": topic("electing", 0, {0: (1, 0), 1: (-1, 5), 2: (-1, 0)}),
            "fine": topic("fine", 0, {0: (1, 9)}),
            "denied": topic("denied", 29),
        },
    )
    assert _not_ready(cluster, ["creating", "missing", "electing", "fine", "unasked"]) == [
        ("topic creating", 5, True),
        ("electing-1", 5, True),
        ("electing-2", 5, True),
    ]
    with pytest.raises(errors.TopicAuthorizationFailedError, match="topic 'denied'"):
        _not_ready(cluster, ["fine", "denied"])


@pytest.mark.parametrize("codec", [None, "none", "gzip", "snappy", "lz4", "zstd"])
def test_write_batches_fit_max_request_size_once_compressed(codec: str | None) -> None:
    # The writer's batch size (header included): the most record bytes whose compressed
    # worst case, with the header, is within max_request_size. Without a codec: the limit.
    # None fits (zstd's frame alone is larger than a 100-byte request): 61, every row in
    # a batch of its own.
    from aiokafka_lite.protocol.codecs import compress_bound
    from aiokafka_lite.spark.writer import fitting_batch_size

    for limit in (100, 65_536, 262_144, 1_048_576):
        size = fitting_batch_size(limit, codec)
        assert size == 61 or compress_bound(codec, size - 61) + 61 <= limit
        assert compress_bound(codec, size - 60) + 61 > limit
        if codec in (None, "none"):
            assert size == limit


def test_an_exactly_once_task_names_a_first_row_without_topic() -> None:
    # An exactly-once task takes its first row's topic (for its marker) before anything
    # else: a null one there is the same typed error, naming row 1.
    from aiokafka_lite.spark.options import parse_write_options
    from aiokafka_lite.spark.schema import WriteColumns
    from aiokafka_lite.spark.writer import _first_topic

    opts = parse_write_options(
        {"kafka.bootstrap.servers": "localhost:9092", "exactlyOnce": "true"}, streaming=False
    )
    schema = pa.schema([("value", pa.string()), ("topic", pa.string())])
    rows = pa.RecordBatch.from_pylist([{"value": "a", "topic": None}], schema=schema)
    columns = WriteColumns(value="value", key=None, topic="topic", partition=None, headers=None)
    with pytest.raises(
        errors.InvalidTopicError, match=r"row 1 of the task's input has a null topic column"
    ):
        _first_topic(opts, columns, iter([rows.slice(0, 0), rows]))
