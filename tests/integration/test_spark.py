"""The Spark data source against the real broker, on a local[2] Spark.

Every record is produced and checked with our own client; Spark reads and writes through
the data source, whose tasks use our consumer and producer.

Tansu (the embedded broker) answers ListOffsets(latest) with the last batch's base
offset + 1 when that batch holds several records (its fetch high watermark is right).
Tests that are not about ``latest`` avoid the deviation: they give explicit ending
offsets or end each partition with a one-record batch (:func:`produce` ``seal=True``).
The test about ``latest`` asserts Kafka's semantics and is a strict xfail on Tansu.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import random
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pyarrow")

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from aiokafka_lite import errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.spark import FORMAT, local_session
from aiokafka_lite.spark.offsets import DataLossError, OffsetRange, OffsetResolver
from aiokafka_lite.spark.options import parse_read_options, parse_write_options
from aiokafka_lite.spark.reader import (
    KafkaBatchReader,
    KafkaInputPartition,
    KafkaStreamReader,
    read_partition,
)
from aiokafka_lite.spark.schema import WriteColumns
from aiokafka_lite.spark.task_input import TaskInput
from aiokafka_lite.spark.writer import write_batches
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import EmbeddedBroker, FaultProxy
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._cluster_front import ClusterFront

# Java: a skip where it is missing, a failure in CI (CI=true).
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.requires_tool(
        "java", install="Spark needs Java 17+: apt-get install openjdk-17-jre-headless"
    ),
]

TANSU_LATEST = (
    "Tansu answers ListOffsets(latest) with the last batch's base offset + 1 when that "
    "batch holds several records, so 'latest' stops short of the log end"
)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session(
        "aiokafka_lite-tests", conf={"spark.sql.streaming.pollingDelay": "50ms"}
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --- helpers (our client, no Spark) ---------------------------------------------------------


def produce(
    bootstrap: str,
    topic: str,
    per_partition: int,
    partitions: int,
    value: Callable[[int, int], bytes] = lambda p, i: b"p%d-%d" % (p, i),
    *,
    seal: bool = False,
) -> dict[int, int]:
    """Produce ``per_partition`` records to each partition; returns the end offsets.

    ``seal=True`` sends the last record of each partition alone (a one-record batch).
    """

    async def run() -> dict[int, int]:
        producer = Producer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=256 * 1024)
        await producer.start()
        try:
            futures = []
            bulk = per_partition - 1 if seal else per_partition
            for i in range(bulk):
                for p in range(partitions):
                    futures.append(await producer.send(topic, value(p, i), partition=p))
            await producer.flush(timeout=60)
            if seal:
                for p in range(partitions):
                    futures.append(
                        await producer.send(topic, value(p, per_partition - 1), partition=p)
                    )
                    await producer.flush(timeout=30)
            metas = await asyncio.wait_for(asyncio.gather(*futures), 60)
        finally:
            await producer.stop(timeout=30)
        ends: dict[int, int] = {}
        for meta in metas:
            ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
        return ends

    return asyncio.run(run())


def log_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log end, from the high watermark of a fetch (not ListOffsets)."""

    async def run() -> dict[int, int]:
        client = KafkaClient(bootstrap, allow_auto_create_topics=False)
        await client.start()
        try:
            numbers = sorted(await client.wait_for_metadata(topic, 30_000))
        finally:
            await client.close()
        consumer = Consumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in numbers]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + 30
            while any(consumer.highwater(tp) is None for tp in tps):
                assert time.monotonic() < deadline, "no fetch answered within 30 s"
                await consumer.getmany(timeout_ms=200)
            return {tp.partition: consumer.highwater(tp) or 0 for tp in tps}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def reader(spark: SparkSession, bootstrap: str, **options: str) -> Any:
    r = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def offsets_json(topic: str, ends: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): e for p, e in ends.items()}})


def summary(df: DataFrame) -> dict[int, tuple[int, int, int, int, int]]:
    """Per partition: (count, distinct offsets, min offset, max offset, checksum)."""
    row_sum = F.crc32(
        F.concat_ws(
            ":",
            F.col("partition").cast("string"),
            F.col("offset").cast("string"),
            F.col("value").cast("string"),
        )
    )
    rows = (
        df.groupBy("partition")
        .agg(
            F.count("*").alias("n"),
            F.countDistinct("offset").alias("distinct"),
            F.min("offset").alias("lo"),
            F.max("offset").alias("hi"),
            F.sum(row_sum).alias("checksum"),
        )
        .collect()
    )
    return {r["partition"]: (r["n"], r["distinct"], r["lo"], r["hi"], r["checksum"]) for r in rows}


def expected_summary(
    per_partition: int, partitions: int, value: Callable[[int, int], bytes]
) -> dict[int, tuple[int, ...]]:
    result = {}
    for p in range(partitions):
        checksum = sum(zlib.crc32(b"%d:%d:" % (p, i) + value(p, i)) for i in range(per_partition))
        result[p] = (per_partition, per_partition, 0, per_partition - 1, checksum)
    return result


# --- batch reads ------------------------------------------------------------------------------


def test_batch_read_3x100k_exactly(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    create_topic(topic_name, 3)
    n = 100_000

    def value(p: int, i: int) -> bytes:
        return b"v-%d-%d" % (p, i)

    ends = produce(bootstrap_servers, topic_name, n, 3, value)
    assert ends == {0: n, 1: n, 2: n}
    df = reader(
        spark,
        bootstrap_servers,
        subscribe=topic_name,
        endingOffsets=offsets_json(topic_name, ends),
        maxRecordsPerPartition="60000",  # so large partitions are split across tasks
    ).load()
    assert df.rdd.getNumPartitions() == 6
    assert summary(df) == expected_summary(n, 3, value)


def test_small_partitions_are_read_together_exactly(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # Six small ranges: one task reads them all by default (minRecordsPerPartition
    # 20,000), two groups of three at 7,000, one task each with 0; the rows are the same.
    create_topic(topic_name, 6)
    n = 3_000
    ends = produce(bootstrap_servers, topic_name, n, 6)
    expected = expected_summary(n, 6, lambda p, i: b"p%d-%d" % (p, i))
    for option, tasks in ((None, 1), ("7000", 2), ("0", 6)):
        options = {"minRecordsPerPartition": option} if option is not None else {}
        df = reader(
            spark,
            bootstrap_servers,
            subscribe=topic_name,
            endingOffsets=offsets_json(topic_name, ends),
            **options,
        ).load()
        assert df.rdd.getNumPartitions() == tasks, option
        if option != "0":
            assert summary(df) == expected, option


def test_batch_read_defaults_read_to_the_log_end(
    spark: SparkSession,
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Any,
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 2)
    produce(bootstrap_servers, topic_name, 500, 2)  # multi-record batches
    df = reader(spark, bootstrap_servers, subscribe=topic_name).load()
    got = summary(df)
    with expect_deviation("tansu", TANSU_LATEST):
        assert got == expected_summary(500, 2, lambda p, i: b"p%d-%d" % (p, i))


def test_batch_read_offset_ranges_headers_and_assign(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    create_topic(topic_name, 2)
    base_ts = int(time.time() * 1000) - 60_000

    async def run() -> None:
        producer = Producer(bootstrap_servers=bootstrap_servers, linger_ms=0)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(
                    topic_name,
                    b"v%d" % i,
                    key=b"k%d" % i,
                    partition=1,
                    timestamp_ms=base_ts + i,
                    headers=[("n", b"%d" % i), ("z", None)],
                )
        finally:
            await producer.stop(timeout=30)

    asyncio.run(run())
    df = reader(
        spark,
        bootstrap_servers,
        assign=json.dumps({topic_name: [1]}),
        startingOffsets=json.dumps({topic_name: {"1": 3}}),
        endingOffsets=json.dumps({topic_name: {"1": 7}}),
        includeHeaders="true",
    ).load()
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in rows] == [3, 4, 5, 6]
    first = rows[0]
    assert (first["key"], first["value"], first["topic"], first["partition"]) == (
        b"k3",
        b"v3",
        topic_name,
        1,
    )
    assert first["timestamp"].timestamp() == pytest.approx((base_ts + 3) / 1000)
    assert first["timestampType"] == 0
    assert [(h["key"], h["value"]) for h in first["headers"]] == [("n", b"3"), ("z", None)]


# --- bad options ------------------------------------------------------------------------------


def test_bad_options_fail_at_planning_with_clear_messages(
    spark: SparkSession, bootstrap_servers: str, tmp_path: Path
) -> None:
    def load_fails(match: str, **options: str) -> None:
        # Checked when the read is defined or, at the latest, when it is planned: before
        # any task runs (count() plans the query).
        with pytest.raises(PySparkException, match=match):
            reader(spark, bootstrap_servers, **options).load().count()

    load_fails(
        "exactly one of the options subscribe, subscribePattern and assign",
        subscribe="a",
        subscribePattern="a.*",
    )
    load_fails("unknown option 'subcribe'", subcribe="a")
    load_fails("startingOffsets cannot be latest", subscribe="a", startingOffsets="latest")
    load_fails("kafka.group.id is not supported", subscribe="a", **{"kafka.group.id": "g"})
    load_fails(
        "unknown option kafka.fetch.max.bites", subscribe="a", **{"kafka.fetch.max.bites": "1"}
    )
    with pytest.raises(PySparkException, match="fixed and cannot be set"):
        spark.read.format(FORMAT).schema("value string").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).option("subscribe", "a").load().collect()

    stream = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", "a")
        .option("endingOffsets", "latest")
        .load()
    )
    with pytest.raises(PySparkException, match="endingOffsets applies to batch reads only"):
        stream.writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "c1")
        ).start().processAllAvailable()

    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException, match="can only be appended to"):
        df.write.format(FORMAT).mode("overwrite").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).option("topic", "t").save()
    with pytest.raises(PySparkException, match="topic option or a 'topic' column"):
        df.write.format(FORMAT).mode("append").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).save()
    with pytest.raises(PySparkException, match="option subscribe does not apply to writes"):
        df.write.format(FORMAT).mode("append").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).option("topic", "t").option("subscribe", "t").save()


# --- streaming reads --------------------------------------------------------------------------


class BatchCollector:
    """A foreachBatch sink keyed by batch id: a replayed batch replaces itself."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, int, bytes]]] = {}
        self.lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = [
            (r["partition"], r["offset"], bytes(r["value"]))
            for r in df.select("partition", "offset", "value").collect()
        ]
        with self.lock:
            self.batches[batch_id] = rows

    def rows(self) -> list[tuple[int, int, bytes]]:
        with self.lock:
            return [row for batch in self.batches.values() for row in batch]

    def wait_for(self, count: int, timeout: float, query: Any) -> None:
        deadline = time.monotonic() + timeout
        while len(self.rows()) < count:
            if query.exception() is not None:
                raise AssertionError(f"query failed: {query.exception()}")
            assert time.monotonic() < deadline, f"{len(self.rows())}/{count} rows after {timeout}s"
            time.sleep(0.2)


def stream(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    r = spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def test_a_write_to_an_unreachable_cluster_names_the_topic(spark: SparkSession) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    df = spark.createDataFrame([("x",)], "value string").coalesce(1)
    with pytest.raises(PySparkException, match=r"writing to topic nowhere-topic: .*127\.0\.0\.1"):
        df.write.format(FORMAT).mode("append").option(
            "kafka.bootstrap.servers", f"127.0.0.1:{port}"
        ).option("kafka.request.timeout.ms", "2000").option("topic", "nowhere-topic").save()


def test_streaming_read_picks_up_records_produced_after_start(
    spark: SparkSession,
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Any,
    tmp_path: Path,
) -> None:
    create_topic(topic_name, 2)
    produce(bootstrap_servers, topic_name, 5, 2, lambda p, i: b"old-%d-%d" % (p, i), seal=True)
    sink = BatchCollector()
    query = (
        stream(spark, bootstrap_servers, subscribe=topic_name, startingOffsets="latest")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress:  # the start offsets are fixed by the first batch
            assert time.monotonic() < deadline and query.exception() is None
            time.sleep(0.1)
        produce(bootstrap_servers, topic_name, 20, 2, lambda p, i: b"new-%d-%d" % (p, i), seal=True)
        sink.wait_for(40, 60, query)
        time.sleep(1)  # nothing more may come
    finally:
        query.stop()
    values = sorted(value for _, _, value in sink.rows())
    assert values == sorted(b"new-%d-%d" % (p, i) for p in range(2) for i in range(20))
    assert sorted((p, o) for p, o, _ in sink.rows()) == [
        (p, o) for p in range(2) for o in range(5, 25)
    ]


def test_streaming_restart_with_max_offsets_per_trigger_neither_skips_nor_repeats(
    spark: SparkSession,
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Any,
    tmp_path: Path,
) -> None:
    create_topic(topic_name, 3)
    n = 400
    produce(bootstrap_servers, topic_name, n, 3, seal=True)
    checkpoint = str(tmp_path / "ckpt")
    sink = BatchCollector()

    def start(**trigger: Any) -> Any:
        return (
            stream(
                spark,
                bootstrap_servers,
                subscribe=topic_name,
                startingOffsets="earliest",
                maxOffsetsPerTrigger="100",
            )
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="300 milliseconds")
    try:
        sink.wait_for(300, 90, first)
    finally:
        first.stop()
    before = len(sink.rows())
    assert before < 3 * n, "the first run must stop part-way for this test to mean anything"

    second = start(availableNow=True)  # resumes from the checkpoint, up to the end
    assert second.awaitTermination(120)
    assert second.exception() is None

    rows = sink.rows()
    keys = [(p, o) for p, o, _ in rows]
    assert len(keys) == len(set(keys)), "a record was read twice"
    assert sorted(keys) == [(p, o) for p in range(3) for o in range(n)], "records were skipped"
    assert all(len(batch) <= 100 for batch in sink.batches.values())
    assert sorted(v for _, _, v in rows) == sorted(
        b"p%d-%d" % (p, i) for p in range(3) for i in range(n)
    )


# --- writes -----------------------------------------------------------------------------------


def read_back(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    ends = log_end_offsets(bootstrap, topic)
    return reader(
        spark, bootstrap, subscribe=topic, endingOffsets=offsets_json(topic, ends), **options
    ).load()


def test_batch_write_lands_every_row_once(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    create_topic(topic_name, 3)
    n = 20_000
    df = (
        spark.range(n)
        .selectExpr(
            "cast(id as string) as key",
            "cast(concat('value-', id) as binary) as value",
            "cast(id % 3 as int) as partition",
            "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary)))"
            " as headers",
        )
        .repartition(4)
    )
    df.write.format(FORMAT).mode("append").option(
        "kafka.bootstrap.servers", bootstrap_servers
    ).option("topic", topic_name).save()

    back = read_back(spark, bootstrap_servers, topic_name, includeHeaders="true")
    rows = back.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "partition",
        F.col("headers")[0]["value"].cast("string").alias("h"),
    ).collect()
    assert len(rows) == n
    assert sorted(int(r["key"]) for r in rows) == list(range(n))
    assert all(r["value"] == f"value-{r['key']}" for r in rows)
    assert all(r["partition"] == int(r["key"]) % 3 for r in rows)
    assert all(r["h"] == r["key"] for r in rows)


def test_streaming_write_lands_every_row_once(
    spark: SparkSession,
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Any,
    tmp_path: Path,
) -> None:
    source, sink = topic_name + "-in", topic_name + "-out"
    create_topic(source, 2)
    create_topic(sink, 2)
    produce(bootstrap_servers, source, 1500, 2, seal=True)
    query = (
        stream(
            spark,
            bootstrap_servers,
            subscribe=source,
            startingOffsets="earliest",
            maxOffsetsPerTrigger="1000",
        )
        .select("key", F.upper(F.col("value").cast("string")).alias("value"))
        .writeStream.format(FORMAT)
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert len(query.recentProgress) >= 3  # 3000 rows in batches of at most 1000
    values = [
        r["value"]
        for r in read_back(spark, bootstrap_servers, sink)
        .select(F.col("value").cast("string").alias("value"))
        .collect()
    ]
    assert len(values) == 3000
    assert sorted(values) == sorted(f"P{p}-{i}" for p in range(2) for i in range(1500))


@pytest.mark.parametrize(
    "sizes",
    [{"kafka.max.request.size": "262144"}, {"kafka.batch.size": "2097152"}],
    ids=["max.request.size-below-the-batch-default", "batch.size-above-max.request.size"],
)
def test_write_batches_fit_max_request_size(
    bootstrap_servers: str, topic_name: str, create_topic: Any, sizes: dict[str, str]
) -> None:
    # The task itself (no Spark needed). The writer's batches (512 KiB unless
    # kafka.batch.size says otherwise) are sent whole: one above max_request_size failed
    # the task with RecordTooLargeError ("the batch is 2097041 bytes, larger than
    # max_request_size (1048576)") though every row was 110 bytes.
    create_topic(topic_name, 2)
    opts = parse_write_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "topic": topic_name, **sizes},
        streaming=False,
    )
    n = 20_000
    rows = pa.RecordBatch.from_pylist([{"key": f"k{i}", "value": "v" * 100} for i in range(n)])
    columns = WriteColumns(value="value", key="key", topic=None, partition=None, headers=None)
    message = write_batches(opts, columns, iter([rows]), task_input=TaskInput([]))
    assert message.records == n
    assert sum(log_end_offsets(bootstrap_servers, topic_name).values()) == n


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_incompressible_write_batches_fit_max_request_size_compressed(
    bootstrap_servers: str, topic_name: str, create_topic: Any, codec: str
) -> None:
    # The task itself (no Spark needed). Random bytes do not compress: a codec makes them
    # a little larger (per 64 KiB: zstd ~10 bytes, lz4 ~15, snappy and gzip ~40). The
    # writer filled its batches up to max_request_size uncompressed, and a batch of its
    # own (send_batch) is never split: one that ended within those few bytes of the limit
    # failed the task after compression ("the batch of 2298 record(s) for ...-1 is 262205
    # bytes after snappy compression, 262134 uncompressed; larger than max_request_size
    # (262144); not sent"). ~180 batches here: snappy, lz4 and zstd met it (gzip's
    # Huffman coding gained its overhead back on the rows' framing bytes).
    create_topic(topic_name, 2)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": bootstrap_servers,
            "topic": topic_name,
            "kafka.max.request.size": "65536",
            "kafka.compression.type": codec,
        },
        streaming=False,
    )
    rng = random.Random(7)
    n = 80_000
    rows = pa.RecordBatch.from_pylist(
        [{"value": rng.randbytes(rng.randrange(100, 200))} for _ in range(n)]
    )
    columns = WriteColumns(value="value", key=None, topic=None, partition=None, headers=None)
    message = write_batches(opts, columns, iter([rows]), task_input=TaskInput([]))
    assert message.records == n
    assert sum(log_end_offsets(bootstrap_servers, topic_name).values()) == n


def test_a_row_over_max_request_size_fails_the_task_naming_it(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # Row 2 of 3 is 2 MB: the task fails naming the row, its topic and partition, and
    # the option (it said "the batch is 2000075 bytes, larger than max_request_size").
    create_topic(topic_name, 1)
    opts = parse_write_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "topic": topic_name}, streaming=False
    )
    rows = pa.RecordBatch.from_pylist([{"value": v} for v in ("a", "x" * 2_000_000, "c")])
    columns = WriteColumns(value="value", key=None, topic=None, partition=None, headers=None)
    with pytest.raises(
        errors.RecordTooLargeError,
        match=rf"row 2 of the task's input, for {topic_name}-0, is 20000\d\d bytes as a batch "
        r"of its own, larger than kafka.max.request.size \(1048576\); not sent",
    ):
        write_batches(opts, columns, iter([rows]), task_input=TaskInput([]))


def test_a_bad_topic_name_in_the_topic_column_is_a_typed_error(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # The task itself (no Spark needed): it failed with a bare ValueError from deep in
    # the producer ("invalid topic name 'bad topic!': ..."). Row 1 is fine, row 2 not.
    create_topic(topic_name, 1)
    opts = parse_write_options({"kafka.bootstrap.servers": bootstrap_servers}, streaming=False)
    rows = pa.RecordBatch.from_pylist(
        [{"value": "v", "topic": topic_name}, {"value": "v", "topic": "bad topic!"}]
    )
    columns = WriteColumns(value="value", key=None, topic="topic", partition=None, headers=None)
    with pytest.raises(
        errors.InvalidTopicError,
        match=r"row 2 of the task's input: its topic column holds 'bad topic!': invalid topic",
    ):
        write_batches(opts, columns, iter([rows]), task_input=TaskInput([]))


def test_a_null_topic_is_a_typed_error_naming_the_row(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # The task itself (no Spark needed). Row 3 (the first of the task's second batch)
    # has a null topic and no topic option is set: the task failed with
    # IllegalStateError "a row has a null topic and no topic option is set", which row
    # unsaid (a bad topic name or a row too large say which).
    create_topic(topic_name, 1)
    opts = parse_write_options({"kafka.bootstrap.servers": bootstrap_servers}, streaming=False)
    first = pa.RecordBatch.from_pylist([{"value": v, "topic": topic_name} for v in "ab"])
    second = pa.RecordBatch.from_pylist([{"value": "c", "topic": None}], schema=first.schema)
    columns = WriteColumns(value="value", key=None, topic="topic", partition=None, headers=None)
    with pytest.raises(
        errors.InvalidTopicError,
        match=r"aiokafka_lite data source: row 3 of the task's input has a null topic "
        r"column, and no topic option is set$",
    ):
        write_batches(opts, columns, iter([first, second]), task_input=TaskInput([]))


def test_a_null_header_key_is_a_typed_error_naming_the_row(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # The task itself (no Spark needed). Row 2's second header has a null key: the task
    # failed with IllegalStateError "a header key is null", which row unsaid.
    create_topic(topic_name, 1)
    opts = parse_write_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "topic": topic_name}, streaming=False
    )
    rows = pa.RecordBatch.from_pylist(
        [
            {"value": "a", "headers": [{"key": "h", "value": b"1"}]},
            {"value": "b", "headers": [{"key": "h", "value": b"1"}, {"key": None, "value": b"2"}]},
        ]
    )
    columns = WriteColumns(value="value", key=None, topic=None, partition=None, headers="headers")
    with pytest.raises(
        errors.SerializationError,
        match=r"aiokafka_lite data source: row 2 of the task's input has a header with a "
        r"null key \(header 2 of 2\); Kafka's header keys are strings$",
    ):
        write_batches(opts, columns, iter([rows]), task_input=TaskInput([]))


def test_write_partitions_like_the_producer(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    from aiokafka_lite.producer import murmur2_partition

    create_topic(topic_name, 3)
    keyed = spark.range(3000).selectExpr("concat('user-', id % 97) as key", "'x' as value")
    keyless = spark.range(3000).selectExpr("'y' as value")
    for df in (keyed, keyless):
        df.write.format(FORMAT).mode("append").option(
            "kafka.bootstrap.servers", bootstrap_servers
        ).option("topic", topic_name).option("kafka.batch.size", "4096").save()
    rows = read_back(spark, bootstrap_servers, topic_name).select("key", "value", "partition")
    collected = rows.collect()
    assert len(collected) == 6000
    for r in collected:
        if r["value"] == b"x":
            assert r["partition"] == murmur2_partition(r["key"], 3)
    spread = {r["partition"] for r in collected if r["value"] == b"y"}
    assert len(spread) >= 2  # keyless rows stick to a partition per batch, then move on


# --- timestamps and data loss -----------------------------------------------------------------


def produce_one_by_one(bootstrap: str, topic: str, values: list[bytes], base_ts: int) -> None:
    async def run() -> None:
        producer = Producer(bootstrap_servers=bootstrap, linger_ms=0)
        await producer.start()
        try:
            for i, value in enumerate(values):
                await producer.send_and_wait(
                    topic, value, partition=0, timestamp_ms=base_ts + 1000 * i
                )
        finally:
            await producer.stop(timeout=30)

    asyncio.run(run())


def test_starting_timestamp(
    spark: SparkSession,
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Any,
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    base = int(time.time() * 1000) - 60_000  # recent: old records may fall to retention
    produce_one_by_one(bootstrap_servers, topic_name, [b"r%d" % i for i in range(6)], base)
    df = reader(
        spark, bootstrap_servers, subscribe=topic_name, startingTimestamp=str(base + 2500)
    ).load()
    offsets = sorted(r["offset"] for r in df.collect())
    with expect_deviation(
        "tansu", "Tansu 0.6.0 ignores the timestamp of ListOffsets and answers earliest"
    ):
        assert offsets == [3, 4, 5]


@pytest.fixture
def isolated_bootstrap(bootstrap_servers: str, broker_kind: str) -> Iterator[str]:
    """The session broker, or on Tansu a broker of the test's own: Tansu 0.6.0 panics a
    worker on DeleteRecords, which would take the session broker with it."""
    if broker_kind != "tansu":
        yield bootstrap_servers
        return
    with EmbeddedBroker("tansu") as broker:
        yield broker.bootstrap_servers


def delete_records_before(bootstrap: str, topic: str, offset: int) -> None:
    from aiokafka_lite.admin import AdminClient

    async def run() -> None:
        async with AdminClient(bootstrap) as admin:
            results = await admin.delete_records(
                {TopicPartition(topic, 0): offset}, timeout_ms=10_000
            )
            results.raise_for_errors()

    asyncio.run(run())


def test_deleted_records_follow_fail_on_data_loss(
    spark: SparkSession,
    isolated_bootstrap: str,
    topic_name: str,
    create_topic: Any,
    tmp_path: Path,
    expect_deviation: ExpectDeviation,
) -> None:
    bootstrap_servers = isolated_bootstrap
    create_topic(topic_name, 1, bootstrap=bootstrap_servers)
    produce(bootstrap_servers, topic_name, 100, 1, seal=True)

    # A streaming query reads [0, 100) and checkpoints.
    checkpoint = str(tmp_path / "ckpt")
    sink = BatchCollector()

    def run_stream(fail: str) -> Any:
        query = (
            stream(
                spark,
                bootstrap_servers,
                subscribe=topic_name,
                startingOffsets="earliest",
                failOnDataLoss=fail,
            )
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        return query

    assert run_stream("true").exception() is None
    assert len(sink.rows()) == 100

    produce(bootstrap_servers, topic_name, 100, 1, lambda p, i: b"late-%d" % i, seal=True)
    with expect_deviation(
        "tansu",
        "Tansu 0.6.0 panics on DeleteRecords (not yet implemented) and drops the connection; "
        "the call retries to its deadline, then times out naming the connection error",
        raises=errors.KafkaTimeoutError,
        match=r"^delete_records did not complete within 10000 ms "
        r"\(last error: connection to \S+ closed: connection closed by the broker\)$",
    ):
        delete_records_before(bootstrap_servers, topic_name, 150)  # [100, 150) never read

    ends = offsets_json(topic_name, {0: 200})
    with pytest.raises(PySparkException, match="failOnDataLoss=false"):
        reader(
            spark,
            bootstrap_servers,
            subscribe=topic_name,
            startingOffsets=json.dumps({topic_name: {"0": 120}}),
            endingOffsets=ends,
        ).load().collect()
    batch = reader(
        spark,
        bootstrap_servers,
        subscribe=topic_name,
        failOnDataLoss="false",
        startingOffsets=json.dumps({topic_name: {"0": 120}}),
        endingOffsets=ends,
    ).load()
    assert sorted(r["offset"] for r in batch.collect()) == list(range(150, 200))

    with pytest.raises(PySparkException, match="were deleted before they were read"):
        run_stream("true")
    sink.batches.clear()
    assert run_stream("false").exception() is None
    assert sorted(o for _, o, _ in sink.rows()) == list(range(150, 200))


@pytest.mark.parametrize("fault", ["silence", "cut"])
def test_a_read_task_cut_off_from_the_broker_fails_naming_the_offset(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Any, fault: str
) -> None:
    # The task itself (no Spark needed): after the first 200 KB of responses the broker
    # goes silent (a black hole) or every connection to it is cut. The task fails after
    # pollTimeoutMs with the partition and the offset it waited for; the bound around
    # each step (here 2 s + 60 s) once took that error for its own expiry and said "did
    # not finish within 62 s" after 2 s, without the offset. The cut connections, once
    # only in the worker's log, are in the task's error too.
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    ends = produce(bootstrap, topic_name, 20_000, 1, lambda p, i: b"x" * 100)
    opts = parse_read_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic_name,
            "kafkaConsumer.pollTimeoutMs": "2000",
        },
        streaming=False,
    )
    part = KafkaInputPartition((OffsetRange(topic_name, 0, 0, ends[0]),))
    seen = [0]

    def fail_after_200k(link: int, direction: str, data: bytes) -> bytes | None:
        if direction == "downstream":
            seen[0] += len(data)
        if seen[0] < 200_000:
            return data
        return b"" if fault == "silence" else None

    proxy.set_hook(fail_after_200k)
    started = time.monotonic()
    rows = 0
    with pytest.raises(errors.KafkaTimeoutError) as failure:
        for batch in read_partition(opts, part):
            rows += batch.num_rows
    assert time.monotonic() - started < 30
    cause = "" if fault == "silence" else "; the consumer reports: fetches failing for .*closed.*"
    assert re.fullmatch(
        rf"aiokafka_lite data source: no record of {topic_name}-0 at offset {rows} "
        r"\(reading up to 20000\) within 2000 ms \(kafkaConsumer.pollTimeoutMs\)" + cause,
        str(failure.value),
    ), str(failure.value)


def test_a_range_past_the_log_end_follows_fail_on_data_loss(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # A task whose range lies past the log's end (truncated, or the topic deleted and
    # recreated since the range was planned; here given so): Kafka answers the fetch
    # with OFFSET_OUT_OF_RANGE. That is data loss like any other: failOnDataLoss=false
    # reads what is left (the task's other range), true fails naming the offsets. The
    # task once raised the fetch's OffsetOutOfRangeError either way.
    create_topic(topic_name, 2)
    produce(bootstrap_servers, topic_name, 100, 2, seal=True)
    part = KafkaInputPartition(
        (OffsetRange(topic_name, 0, 200, 300), OffsetRange(topic_name, 1, 50, 100))
    )

    def read(fail: str) -> list[int]:
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": bootstrap_servers,
                "subscribe": topic_name,
                "failOnDataLoss": fail,
            },
            streaming=False,
        )
        offsets: list[int] = []
        for batch in read_partition(opts, part):
            assert set(batch.column("partition").to_pylist()) == {1}
            offsets += batch.column("offset").to_pylist()
        return offsets

    assert sorted(read("false")) == list(range(50, 100))
    with pytest.raises(DataLossError, match=rf"offsets \[200, 300\) of {topic_name}-0 "):
        read("true")


def test_a_topic_deleted_before_its_task_reads_it_is_data_loss(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    # The task itself (no Spark needed): its range was planned, then the topic deleted.
    # The records are gone: data loss, as the docs say, not a wait of pollTimeoutMs
    # (2 min by default) ending in "no record of t-0 at offset 0", whatever
    # failOnDataLoss said (noida and Tansu alike).
    from aiokafka_lite.admin import AdminClient

    create_topic(topic_name, 1)
    produce(bootstrap_servers, topic_name, 100, 1, seal=True)

    async def delete() -> None:
        async with AdminClient(bootstrap_servers) as admin:
            (await admin.delete_topics([topic_name])).raise_for_errors()

    asyncio.run(delete())
    part = KafkaInputPartition((OffsetRange(topic_name, 0, 0, 100),))

    def read(fail: str) -> int:
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": bootstrap_servers,
                "subscribe": topic_name,
                "failOnDataLoss": fail,
                "kafkaConsumer.pollTimeoutMs": "30000",
            },
            streaming=False,
        )
        return sum(batch.num_rows for batch in read_partition(opts, part))

    started = time.monotonic()
    with pytest.raises(
        DataLossError, match=rf"offsets \[0, 100\) of {topic_name}-0 are gone: its topic"
    ):
        read("true")
    assert read("false") == 0
    assert time.monotonic() - started < 25


def test_batch_read_of_a_missing_topic_is_empty_and_creates_nothing(
    spark: SparkSession, bootstrap_servers: str, topic_name: str
) -> None:
    assert reader(spark, bootstrap_servers, subscribe=topic_name).load().count() == 0

    async def exists() -> bool:
        client = KafkaClient(bootstrap_servers, allow_auto_create_topics=False)
        await client.start()
        try:
            cluster = await client.refresh_metadata([topic_name], timeout_ms=10_000)
            return bool(cluster.partitions_for_topic(topic_name))
        finally:
            await client.close()

    assert not asyncio.run(exists())


# --- metadata of a topic being created --------------------------------------------------------


def _front(bootstrap: str) -> ClusterFront:
    """The session broker behind a front whose Metadata answers a test can spoil."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return ClusterFront(host, int(port), {})


@pytest.mark.parametrize("level", ["topic", "partition"])
@pytest.mark.parametrize("read", ["batch", "stream"])
def test_planning_waits_out_leader_not_available(
    bootstrap_servers: str, topic_name: str, create_topic: Any, read: str, level: str
) -> None:
    # The driver side itself (no Spark needed). The next 3 Metadata answers naming the
    # topic say LEADER_NOT_AVAILABLE (a topic just created, its leaders not elected yet):
    # for the whole topic, or for partition 1, leaderless. Planning failed at once
    # ("LeaderNotAvailableError: topic '...'") where a Kafka client asks again.
    create_topic(topic_name, 2)
    ends = produce(bootstrap_servers, topic_name, 10, 2, seal=True)
    spoiled = (topic_name, None if level == "topic" else 1)
    with _front(bootstrap_servers) as front:
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": front.bootstrap,
                "subscribe": topic_name,
                "startingOffsets": "earliest",
            },
            streaming=read == "stream",
        )
        front.metadata_errors[spoiled] = (errors.LeaderNotAvailableError.errno, 3)
        if read == "batch":
            parts = [p for p in KafkaBatchReader(opts).partitions()]
            assert all(isinstance(p, KafkaInputPartition) for p in parts)
            got = {r.partition: (r.start, r.end) for p in parts for r in p.ranges}  # type: ignore[attr-defined]
            assert got == {p: (0, end) for p, end in ends.items()}
        else:
            stream_reader = KafkaStreamReader(opts)
            try:
                start = stream_reader.initialOffset()
                assert start == {topic_name: {"0": 0, "1": 0}}
                assert front.metadata_errors[spoiled][1] == 0
                # ... and again for a micro-batch's offsets, the query running.
                front.metadata_errors[spoiled] = (errors.LeaderNotAvailableError.errno, 3)
                end = stream_reader.latestOffset(start, None)
                assert end == {topic_name: {str(p): e for p, e in ends.items()}}
            finally:
                stream_reader.stop()
        assert front.metadata_errors[spoiled][1] == 0


@pytest.mark.parametrize("level", ["topic", "partition"])
def test_planning_gives_up_on_leader_not_available_naming_it(
    bootstrap_servers: str, topic_name: str, create_topic: Any, level: str
) -> None:
    # Every Metadata answer says LEADER_NOT_AVAILABLE: the lookup asks again until its
    # timeout (2 s here), then fails with the error's own type, naming the partition.
    create_topic(topic_name, 2)
    with _front(bootstrap_servers) as front:
        front.metadata_errors[topic_name, None if level == "topic" else 1] = (
            errors.LeaderNotAvailableError.errno,
            1_000_000,
        )
        opts = parse_read_options(
            {"kafka.bootstrap.servers": front.bootstrap, "subscribe": topic_name},
            streaming=False,
        )

        async def plan() -> list[TopicPartition]:
            resolver = OffsetResolver(opts.client, timeout_ms=2000)
            await resolver.start()
            try:
                return await resolver.partitions(opts.selection)
            finally:
                await resolver.close()

        started = time.monotonic()
        where = f"topic {topic_name}" if level == "topic" else f"{topic_name}-1"
        with pytest.raises(
            errors.LeaderNotAvailableError,
            match=rf"aiokafka_lite data source: {where} has no leader: every metadata answer "
            r"for 2000 ms said LEADER_NOT_AVAILABLE$",
        ):
            asyncio.run(plan())
        assert 1.9 < time.monotonic() - started < 10


def test_min_offsets_per_trigger_waits_for_data_or_max_trigger_delay(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    create_topic(topic_name, 1)
    produce(bootstrap_servers, topic_name, 3, 1, seal=True)
    query = (
        stream(
            spark,
            bootstrap_servers,
            subscribe=topic_name,
            startingOffsets="earliest",
            minOffsetsPerTrigger="10",
            maxTriggerDelay="4s",
        )
        .select(F.col("value").cast("string").alias("value"))
        .writeStream.format("memory")
        .queryName(topic_name.replace("-", "_"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    table = topic_name.replace("-", "_")
    try:

        def rows() -> int:
            return int(spark.sql(f"select count(*) as n from {table}").collect()[0]["n"])

        time.sleep(1.5)
        assert rows() == 0  # 3 new offsets < 10, and 4 s have not passed
        produce(bootstrap_servers, topic_name, 10, 1, seal=True)
        deadline = time.monotonic() + 20
        while rows() < 13 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rows() == 13  # 13 >= 10: one batch took them all
        last_batch = time.monotonic()
        produce(bootstrap_servers, topic_name, 2, 1, seal=True)
        while rows() < 15 and time.monotonic() - last_batch < 20:
            time.sleep(0.2)
        assert rows() == 15
        # The 2 were held back until maxTriggerDelay (4 s) had passed since the batch
        # before: the start times of the two batches with rows, as Spark reports them.
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        assert [p["numInputRows"] for p in batches] == [13, 2]
        started = [
            datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")) for p in batches
        ]
        assert (started[1] - started[0]).total_seconds() >= 3.9
    finally:
        query.stop()
