"""The data source on a standalone Spark cluster: a master and two workers started from
the installed pyspark (tests/integration/_spark_cluster.py), executors in JVMs of their
own with their own Python workers, on 127.0.0.1.

The exactly-once sink is checked where a real cluster differs from local mode: an
executor process killed (SIGKILL) in the middle of a write, its tasks run again on the
other executor. Broker: noida-db (started here) or ``KAFKA_BOOTSTRAP_SERVERS``, as in
test_spark_exactly_once.py (Tansu's read_committed returns aborted records).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pyarrow")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from aiokafka_lite.spark import FORMAT, KafkaDataSource
from aiokafka_lite.testing.spark_cluster import StandaloneCluster, standalone_cluster
from tests.integration.test_spark_exactly_once import (
    PARTITIONS,
    check_read_back,
    read_all,
    slow_rows,
)

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.spark_cluster,
    pytest.mark.requires_tool(
        "java", install="Spark needs Java 17+: apt-get install openjdk-17-jre-headless"
    ),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def spark(cluster: StandaloneCluster) -> Iterator[SparkSession]:
    # The driver's own Python workers (data source planning) start from this variable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(cluster.master_url)
        .appName("aiokafka_lite-cluster")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .config("spark.task.maxFailures", "4")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    yield session
    session.stop()


def test_write_and_read_back_on_the_cluster(
    spark: SparkSession,
    cluster: StandaloneCluster,
    eos_bootstrap: str,
    topic_name: str,
    create_topic: Any,
) -> None:
    create_topic(topic_name, PARTITIONS, bootstrap=eos_bootstrap)
    n = 30_000
    (
        spark.range(n)
        .selectExpr("cast(cast(id as string) as binary) as value")
        .repartition(4)
        .write.format(FORMAT)
        .mode("append")
        .option("kafka.bootstrap.servers", eos_bootstrap)
        .option("topic", topic_name)
        .option("exactlyOnce", "true")
        .save()
    )
    assert len(cluster.executor_pids()) == 2  # the tasks ran in executors of their own
    back = (
        spark.read.format(FORMAT)
        .option("kafka.bootstrap.servers", eos_bootstrap)
        .option("subscribe", topic_name)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select(F.col("value").cast("string").alias("v"))
    )
    values = [r["v"] for r in back.collect()]
    assert len(values) == n and len(set(values)) == n


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_an_executor_killed_mid_write(
    spark: SparkSession,
    cluster: StandaloneCluster,
    eos_bootstrap: str,
    topic_name: str,
    create_topic: Any,
    exactly_once: bool,
) -> None:
    create_topic(topic_name, PARTITIONS, bootstrap=eos_bootstrap)
    n = 40_000

    df = slow_rows(spark, n)
    killed: list[int] = []

    def kill_when_writing() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Some rows in the topic: the tasks are writing.
            if len(read_all(eos_bootstrap, topic_name, committed=False, quiet=0.0)) > 1000:
                killed.append(cluster.kill_an_executor())
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_when_writing, daemon=True)
    killer.start()
    (
        df.write.format(FORMAT)
        .mode("append")
        .option("kafka.bootstrap.servers", eos_bootstrap)
        .option("kafka.batch.size", "16384")
        .option("topic", topic_name)
        .option("exactlyOnce", str(exactly_once).lower())
        .save()
    )
    killer.join(60)
    assert killed, "no executor was killed while the tasks wrote"

    # Whether the killed executor's running task had rows in Kafka depends on timing: a
    # task's rows reach the writer and the topic in a burst (measured: 0, then 20,000
    # rows within one poll), so the kill may land between bursts. At-least-once then
    # writes no row twice, which it allows; no row may be missing either way.
    check_read_back(
        eos_bootstrap,
        topic_name,
        n,
        exactly_once=exactly_once,
        what=f"executor {killed[0]} killed",
        resent=False,
    )
