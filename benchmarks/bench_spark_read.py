"""Spark batch reads of the `service` workload: the aiokafka_lite source against what a
user writes without this library (confluent-kafka's consumer in ``mapPartitions``).

    python benchmarks/bench_spark_read.py [--rows N] [--repeat R] [--cluster]

A topic of 8 partitions is filled once with ``--rows`` (1,000,000) rows shaped like the
`service` workload (bench_spark_write.service_rows: key, JSON value of 60-700 bytes, two
headers). Each mode then reads all of it and reduces every row to its key, value and
header sizes (so every byte crosses into Spark), in turns, ``--repeat`` rounds after a
warm-up; reported: rows/s of the Spark job's wall clock (median, lowest, highest). The
log ends come from a fetch's high watermark (Tansu's ListOffsets(latest) is short of
them), and both modes read to exactly those ends. Spark: ``local[2]``, or with
``--cluster`` a standalone cluster of 2 workers x 1 core. Broker: an embedded Tansu.

Writes benchmarks/results/spark-read.json (``--cluster``: spark-read-cluster.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h
from bench_spark import log_ends
from bench_spark_write import service_rows, write_ours

MODES = ("ours", "confluent-mapPartitions")
PARTITIONS = 8


def read_ours(spark: Any, bootstrap: str, topic: str, ends: dict[int, int]) -> tuple[int, int]:
    from pyspark.sql import functions as F

    row = (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("endingOffsets", json.dumps({topic: {str(p): e for p, e in ends.items()}}))
        .load()
        .select(
            (
                F.length("key")
                + F.length("value")
                + F.aggregate("headers", F.lit(0), lambda acc, x: acc + F.length(x["value"]))
            ).alias("size")
        )
        .agg(F.count("*").alias("n"), F.sum("size").alias("bytes"))
        .collect()[0]
    )
    return int(row["n"]), int(row["bytes"])


def read_confluent(spark: Any, bootstrap: str, topic: str, ends: dict[int, int]) -> tuple[int, int]:
    def read_partition(partitions: Any) -> Any:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        for p in partitions:
            end = ends[p]
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "fetch.queue.backoff.ms": 10,
                }
            )
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            count = size = 0
            try:
                while count < end:
                    for msg in consumer.consume(10_000, 1.0):
                        if msg.error():
                            raise RuntimeError(str(msg.error()))
                        if msg.offset() >= end:
                            continue
                        key, value = msg.key(), msg.value()
                        size += (len(key) if key else 0) + (len(value) if value else 0)
                        size += sum(len(v or b"") for _, v in msg.headers() or ())
                        count += 1
            finally:
                consumer.close()
            yield count, size

    sums = (
        spark.sparkContext.parallelize(range(PARTITIONS), PARTITIONS)
        .mapPartitions(read_partition)
        .reduce(lambda a, b: (a[0] + b[0], a[1] + b[1]))
    )
    return int(sums[0]), int(sums[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--out", default=str(h.RESULTS))
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import KafkaDataSource

    started = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results = h.run_header("spark-read", False, rows=args.rows, repeat=args.repeat)
    results["master"] = "local[2]"
    with ExitStack() as stack:
        master = "local[2]"
        if args.cluster:
            from aiokafka_lite.testing.spark_cluster import standalone_cluster

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            master = stack.enter_context(standalone_cluster(workdir, workers=2)).master_url
            results["master"] = "standalone: 2 workers x 1 core on 127.0.0.1"
        handle = stack.enter_context(h.broker(None, "tansu"))
        bootstrap = handle.bootstrap_servers
        results["broker"] = handle.kind
        spark = (
            SparkSession.builder.master(master)
            .appName("bench-spark-read")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.executor.memory", "1g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaDataSource)
        topic = f"bench-spark-read-{uuid.uuid4().hex[:8]}"
        h.create_topic(bootstrap, topic, PARTITIONS)
        write_ours(service_rows(spark, args.rows), bootstrap, topic, False)
        ends = asyncio.run(log_ends(bootstrap, topic, PARTITIONS))
        if sum(ends.values()) != args.rows:
            raise SystemExit(f"filled {sum(ends.values())} rows, expected {args.rows}")
        runs: dict[str, list[float]] = {m: [] for m in MODES}
        totals: dict[str, tuple[int, int]] = {}
        for rnd in range(args.repeat + 1):  # round 0 warms every path up, not counted
            order = h.rotated(MODES, rnd)
            for mode in order:
                t0 = time.perf_counter()
                if mode == "ours":
                    totals[mode] = read_ours(spark, bootstrap, topic, ends)
                else:
                    totals[mode] = read_confluent(spark, bootstrap, topic, ends)
                seconds = time.perf_counter() - t0
                if totals[mode][0] != args.rows:
                    raise SystemExit(f"{mode} read {totals[mode][0]} rows of {args.rows}")
                if rnd:
                    runs[mode].append(args.rows / seconds)
                label = f"{rnd}" if rnd else "0 warm-up"
                print(f"  [{label}] {mode:24} {args.rows / seconds:10,.0f} rows/s", flush=True)
        if len(set(totals.values())) != 1:
            raise SystemExit(f"the modes read different data: {totals}")
        spark.stop()
    results["statistics"] = (
        "rows/s of the Spark job's wall clock; median, lowest, highest of the rounds"
    )
    results["bytes_touched"] = totals["ours"][1]
    results["modes"] = {
        m: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
        for m, v in runs.items()
    }
    results["ratios"] = {
        "ours_vs_confluent": results["modes"]["ours"]["median"]
        / results["modes"]["confluent-mapPartitions"]["median"]
    }
    h.finish(results, started)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = h.write_json(results, out, "spark-read-cluster" if args.cluster else "spark-read")
    for m in MODES:
        e = results["modes"][m]
        print(f"{m:24} {e['median']:10,.0f} rows/s ({e['min']:,.0f}-{e['max']:,.0f})")
    print(f"ours_vs_confluent: {results['ratios']['ours_vs_confluent']:.2f}x")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
