"""The exactly-once sink (``exactlyOnce=true``) against the real broker, on local Spark
with task retries (``local[2,4]``: up to 4 attempts per task).

The broker is noida-db (started here) or ``KAFKA_BOOTSTRAP_SERVERS``, not the session's
Tansu: Tansu 0.6.0's read_committed fetches return aborted records (docs/testing.md),
and whether a failed attempt's transaction is aborted or committed cut short (see
writer.py) depends on how fast Spark stops its Python worker, so a strict xfail could
not name the failure.

Each failure is injected where it hurts: a task that fails after half of its rows went
out in a transaction, and a streaming micro-batch whose tasks committed but whose end
Spark never recorded (the checkpoint's commit file removed, as a crash between the two
leaves it), so the restarted query runs the batch again. Every row is read back with
our consumer, ``read_committed`` (what an exactly-once pipeline's readers use) and
``read_uncommitted`` (what reached the log at all), and the at-least-once sink runs the
same failure for contrast.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pyarrow")

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.spark import FORMAT, KafkaDataSource
from aiokafka_lite.structs import TopicPartition

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.requires_tool(
        "java", install="Spark needs Java 17+: apt-get install openjdk-17-jre-headless"
    ),
]

ROWS = 8_000
PARTITIONS = 3


def _forget_last_commit(checkpoint: Path) -> Path:
    """A crash after the last micro-batch's tasks committed, before Spark recorded its
    end: its commit file (and Hadoop's checksum of it) removed, so that a restarted query
    runs that batch again. The file removed."""
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    return last


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2,4]")  # 2 cores, 4 attempts per task
        .appName("aiokafka_lite-exactly-once")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.pollingDelay", "50ms")
        # Small Arrow batches to the writer: rows go out while the task still reads more.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    yield session
    session.stop()


def read_all(bootstrap: str, topic: str, *, committed: bool, quiet: float = 1.0) -> list[str]:
    """Every value in ``topic`` (read_committed or not), from the start to its end (no
    new record for ``quiet`` seconds once caught up)."""

    async def run() -> list[str]:
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed" if committed else "read_uncommitted",
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            values: list[str] = []
            deadline = time.monotonic() + 60
            quiet_since = time.monotonic()
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                for records in batch.values():
                    values.extend(r.value.decode() for r in records if r.value is not None)
                if batch:
                    quiet_since = time.monotonic()
                    continue
                caught_up = True
                for tp in tps:
                    end = consumer.last_stable_offset(tp)
                    if end is None or await consumer.position(tp) < end:
                        caught_up = False
                if caught_up and time.monotonic() - quiet_since >= quiet:
                    return values
            raise AssertionError(f"{topic}: not read to its end within 60 s")
        finally:
            await consumer.stop()

    return asyncio.run(run())


def rows(spark: SparkSession, n: int = ROWS) -> DataFrame:
    # ~200 bytes a row, so that 16 KiB batches go out while the task is still writing.
    return spark.range(n).selectExpr(
        "cast(id as string) as key",
        "cast(concat(cast(id as string), ':', repeat('x', 200)) as binary) as value",
    )


def slow_rows(spark: SparkSession, n: int) -> DataFrame:
    """``n`` rows of ~200 bytes in 4 partitions, each made with a short sleep (a task
    takes seconds: time to break something while it writes)."""

    def slow(value: str) -> str:
        time.sleep(0.0003)
        return value

    slow_udf = F.udf(slow, "string")
    return (
        spark.range(n)
        .repartition(4)
        .select(
            F.concat(slow_udf(F.col("id").cast("string")), F.lit(":" + "x" * 200))
            .cast("binary")
            .alias("value")
        )
    )


def check_read_back(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    exactly_once: bool,
    what: str,
    resent: bool = True,
) -> None:
    """Rows ``0..n-1`` all there for a read_committed reader: each once with the
    exactly-once sink; with the at-least-once one, some twice when the failure made
    Spark run a task again (``resent``)."""
    seen = ids(read_all(bootstrap, topic, committed=True))
    in_log = ids(read_all(bootstrap, topic, committed=False))
    print(
        f"{'exactly-once' if exactly_once else 'at-least-once'}: {what}: {n} rows, "
        f"read_committed {sum(seen.values())} ({len(seen)} distinct), "
        f"in the log {sum(in_log.values())}"
    )
    missing = sorted(set(range(n)) - set(seen))
    assert not missing, f"{len(missing)} rows lost: {spans(missing)}"
    assert set(seen) <= set(range(n))
    if exactly_once:
        twice = sorted(i for i, count in seen.items() if count > 1)
        assert not twice, f"{len(twice)} rows committed more than once: {spans(twice)}"
    elif resent:
        assert sum(seen.values()) > n


def spans(ids: list[int], limit: int = 10) -> str:
    """Sorted ids as ranges, the first ``limit`` of them ("3-7, 12, ...")."""
    out: list[list[int]] = []
    for i in ids:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    text = [f"{a}-{b}" if a != b else f"{a}" for a, b in out[:limit]]
    return ", ".join(text) + (", ..." if len(out) > limit else "")


def write(df: DataFrame, bootstrap: str, topic: str, *, exactly_once: bool) -> None:
    (
        df.write.format(FORMAT)
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.batch.size", "16384")
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .save()
    )


def ids(values: list[str]) -> Counter[int]:
    return Counter(int(v.split(":", 1)[0]) for v in values)


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_task_failing_mid_write_is_retried(
    spark: SparkSession,
    eos_bootstrap: str,
    topic_name: str,
    create_topic: Any,
    exactly_once: bool,
) -> None:
    bootstrap_servers = eos_bootstrap
    create_topic(topic_name, PARTITIONS, bootstrap=bootstrap_servers)

    seen_in_task: dict[tuple[int, int], int] = {}

    def fail_first_attempt_midway(key: str) -> str:
        # (A closure: cloudpickle ships it, and its counter, by value to the workers.)
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.partitionId() == 1 and context.attemptNumber() == 0:
            task = (context.stageId(), context.partitionId())
            seen_in_task[task] = seen_in_task.get(task, 0) + 1
            if seen_in_task[task] > ROWS // 8:
                raise RuntimeError("injected: the task dies in the middle of its write")
        return key

    fail = F.udf(fail_first_attempt_midway, "string")
    df = rows(spark).repartition(4).select(fail("key").alias("key"), "value")
    write(df, bootstrap_servers, topic_name, exactly_once=exactly_once)

    # Exactly-once: the failed attempt's input, cut short, looked like its end to the
    # writer, which aborted it (the rows it had sent by then stay in the log, aborted;
    # how many depends on how soon Spark stops the worker, none in some runs), and the
    # retry wrote every row. The cut itself is certain in the writer-alone tests below.
    check_read_back(
        bootstrap_servers, topic_name, ROWS, exactly_once=exactly_once, what="a task failed"
    )


def test_exactly_once_options_are_checked(spark: SparkSession, eos_bootstrap: str) -> None:
    bootstrap_servers = eos_bootstrap
    from pyspark.errors import PySparkException

    for option, value in (("exactlyOnce", "maybe"), ("transactionalIdPrefix", "a b")):
        with pytest.raises((PySparkException, Exception), match=option):
            (
                spark.range(1)
                .selectExpr("cast(cast(id as string) as binary) as value")
                .write.format(FORMAT)
                .mode("append")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("topic", "t")
                .option(option, value)
                .save()
            )


def produce_input(bootstrap: str, topic: str, n: int) -> None:
    async def run() -> None:
        producer = Producer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            for i in range(n - PARTITIONS):
                await producer.send(topic, b"%d" % i, partition=i % PARTITIONS)
            await producer.flush(timeout=60)
            # Each partition ends with a one-record batch: Tansu's ListOffsets(latest) is
            # the last batch's base offset + 1 (see test_spark.py), right for these.
            for i in range(n - PARTITIONS, n):
                await producer.send(topic, b"%d" % i, partition=i % PARTITIONS)
                await producer.flush(timeout=30)
        finally:
            await producer.stop(timeout=30)

    asyncio.run(run())


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_micro_batch_replayed_after_a_restart(
    spark: SparkSession,
    eos_bootstrap: str,
    topic_name: str,
    create_topic: Any,
    tmp_path: Path,
    exactly_once: bool,
) -> None:
    bootstrap_servers = eos_bootstrap
    source, sink = topic_name + "-in", topic_name + "-out"
    create_topic(source, PARTITIONS, bootstrap=bootstrap_servers)
    create_topic(sink, PARTITIONS, bootstrap=bootstrap_servers)
    n = 3_000
    produce_input(bootstrap_servers, source, n)
    checkpoint = tmp_path / "ckpt"

    def run_query() -> None:
        query = (
            spark.readStream.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "1000")
            .load()
            .select(F.concat(F.col("value").cast("string"), F.lit(":")).alias("value"))
            .writeStream.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", sink)
            .option("exactlyOnce", str(exactly_once).lower())
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None

    run_query()
    last = _forget_last_commit(checkpoint)
    run_query()  # the restarted query runs that batch again

    check_read_back(
        bootstrap_servers, sink, n, exactly_once=exactly_once, what=f"batch {last.name} replayed"
    )


def test_a_replay_routed_by_a_topic_column_in_another_order(
    spark: SparkSession, eos_bootstrap: str, topic_name: str, create_topic: Any, tmp_path: Path
) -> None:
    """A replayed micro-batch whose rows go to two topics by a ``topic`` column and come
    in another order (as a shuffle's blocks can): its first row is of the other topic.
    The marker of the first run was committed to partition 0 of its first row's topic;
    the replay must find it there, not only in its own first row's topic (it did not:
    1,000 rows, the whole replayed batch, were committed twice)."""
    from pyspark.sql.functions import udtf

    bootstrap_servers = eos_bootstrap
    source, low, high = topic_name + "-in", topic_name + "-low", topic_name + "-high"
    for topic in (source, low, high):
        create_topic(topic, PARTITIONS, bootstrap=bootstrap_servers)
    n = 3_000
    produce_input(bootstrap_servers, source, n)
    checkpoint = tmp_path / "ckpt"
    reverse_flag = str(tmp_path / "reverse")

    @udtf(returnType="topic string, value string")
    class ReversedOnReplay:
        """The task's rows, in the reverse order once the flag file exists (streaming
        cannot sort; this stands for a shuffle's blocks coming in another order)."""

        def __init__(self) -> None:
            self.rows: list[tuple[str, str]] = []

        def eval(self, row: Any) -> None:
            self.rows.append((row["topic"], row["value"]))

        def terminate(self) -> Iterator[tuple[str, str]]:
            yield from self.rows[::-1] if os.path.exists(reverse_flag) else self.rows

    def run_query() -> None:
        value = F.col("value").cast("string")
        routed = (
            spark.readStream.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "1000")
            .load()
            .select(
                # Each batch of 1,000 ids starts in one topic and ends in the other.
                F.when(value.cast("int") % 1000 < 500, F.lit(low))
                .otherwise(F.lit(high))
                .alias("topic"),
                F.concat(value, F.lit(":")).alias("value"),
            )
        )
        query = (
            ReversedOnReplay(routed.asTable())
            .writeStream.format(FORMAT)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("exactlyOnce", "true")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None

    run_query()
    last = _forget_last_commit(checkpoint)
    Path(reverse_flag).touch()
    run_query()  # the restarted query runs that batch again, its rows reversed

    seen = ids(read_all(bootstrap_servers, low, committed=True))
    seen.update(ids(read_all(bootstrap_servers, high, committed=True)))
    print(f"replayed batch {last.name}: {n} rows, read_committed {sum(seen.values())}")
    assert sorted(seen) == list(range(n)), "rows lost"
    twice = sorted(i for i, count in seen.items() if count > 1)
    assert not twice, f"{len(twice)} rows committed more than once: {spans(twice)}"


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_brokers_going_down_mid_transaction(
    spark: SparkSession,
    eos_bootstrap: str,
    topic_name: str,
    create_topic: Any,
    exactly_once: bool,
) -> None:
    """Three simulated brokers in front of the real one (aiokafka_lite.testing's
    SimulatedCluster); while the tasks write, one broker at a time goes down: every
    connection to it is cut in the middle of the tasks' transactions (or, at least
    once, of their idempotent sends), and its partition leaderships and coordinators
    move to the others. Then it comes back. The producers retry; no task fails, so the
    at-least-once sink need not send anything twice either (not asserted: a retry that
    outlasts the delivery timeout would fail a task and Spark would run it again)."""
    from aiokafka_lite.testing import SimulatedCluster

    create_topic(topic_name, PARTITIONS, bootstrap=eos_bootstrap)
    n = 20_000
    with SimulatedCluster(eos_bootstrap, brokers=3) as cluster:
        stops: list[int] = []

        def break_brokers() -> None:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and len(stops) < 4:
                written = len(read_all(eos_bootstrap, topic_name, committed=False, quiet=0.0))
                if written > 1000 * (len(stops) + 1):
                    node = cluster.node_ids[len(stops) % 3]
                    cluster.stop_broker(node)
                    stops.append(node)
                    time.sleep(0.5)
                    cluster.start_broker(node)
                time.sleep(0.1)

        df = slow_rows(spark, n)
        breaker = threading.Thread(target=break_brokers, daemon=True)
        breaker.start()
        write(df, cluster.bootstrap_servers, topic_name, exactly_once=exactly_once)
        breaker.join(90)
        stats = cluster.stats
    assert stops, "no broker went down while the tasks wrote"
    check_read_back(
        eos_bootstrap,
        topic_name,
        n,
        exactly_once=exactly_once,
        what=f"brokers {stops} went down ({stats})",
        resent=False,
    )


# The task's side of the sink, without Spark: write_batches with the task's identity
# given (as Spark's TaskContext would) and a socket pair for the worker's connection to
# the executor JVM, so that an input cut short and a retry in another order are certain,
# not left to where a kill lands.


def value_batches(ids_: list[int], per_batch: int = 50) -> list[Any]:
    import pyarrow as pa

    return [
        pa.record_batch(
            [pa.array([b"%d:%s" % (i, b"x" * 200) for i in ids_[k : k + per_batch]], pa.binary())],
            names=["value"],
        )
        for k in range(0, len(ids_), per_batch)
    ]


@pytest.fixture
def task_write(
    eos_bootstrap: str, topic_name: str, create_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    import socket

    from aiokafka_lite.spark import writer
    from aiokafka_lite.spark.options import parse_write_options
    from aiokafka_lite.spark.schema import WriteColumns
    from aiokafka_lite.spark.task_input import TaskInput

    create_topic(topic_name, PARTITIONS, bootstrap=eos_bootstrap)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": eos_bootstrap,
            "topic": topic_name,
            "exactlyOnce": "true",
            "kafka.batch.size": "16384",
        },
        streaming=False,
    )
    columns = WriteColumns("value", None, None, None, None)
    identity = writer._TaskTransaction(f"test-{topic_name}-0", 1)
    monkeypatch.setattr(writer, "_task_transaction", lambda opts, write_id: identity)
    opened: list[socket.socket] = []

    def write(batches: list[Any], *, cut_after: int | None = None) -> Any:
        """One attempt of the task; with ``cut_after``, Spark stops sending after that
        many batches (the JVM's side of the connection shut) and the input just ends."""
        worker, jvm = socket.socketpair()
        opened.extend((worker, jvm))

        def feed() -> Iterator[Any]:
            for k, batch in enumerate(batches):
                if k == cut_after:
                    jvm.shutdown(socket.SHUT_WR)
                    return
                yield batch

        return writer.write_batches(
            opts, columns, feed(), "w", task_input=TaskInput([worker.fileno()])
        )

    yield write
    for sock in opened:
        sock.close()


def test_an_input_cut_short_is_aborted_never_committed(
    task_write: Any, eos_bootstrap: str, topic_name: str
) -> None:
    from aiokafka_lite import errors

    n = 2_000
    batches = value_batches(list(range(n)))
    with pytest.raises(errors.KafkaError, match=r"input ended early.*transaction is aborted"):
        task_write(batches, cut_after=len(batches) // 2)
    assert read_all(eos_bootstrap, topic_name, committed=True) == []
    # The retry gets the whole input, in another order (a shuffle's blocks fetched
    # anew): had the cut attempt committed its half, no count of rows to skip would do.
    task_write(value_batches(list(reversed(range(n)))))
    check_read_back(eos_bootstrap, topic_name, n, exactly_once=True, what="input cut, then retried")


def test_a_retry_after_a_commit_writes_nothing_whatever_the_order(
    task_write: Any, eos_bootstrap: str, topic_name: str
) -> None:
    """A task that committed and failed after (its executor lost before Spark heard of
    the commit) runs again; after a shuffle its rows may come in another order."""
    from aiokafka_lite import errors

    n = 2_000
    task_write(value_batches(list(range(n))))
    message = task_write(value_batches(list(reversed(range(n)))))
    assert message.records == 0
    with pytest.raises(errors.IllegalStateError, match=rf"committed {n} row.*input has {n - 1}"):
        task_write(value_batches(list(range(n - 1))))
    check_read_back(eos_bootstrap, topic_name, n, exactly_once=True, what="retried after commit")
    assert len(read_all(eos_bootstrap, topic_name, committed=False)) == n
