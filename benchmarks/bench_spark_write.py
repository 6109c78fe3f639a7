"""Spark batch writes of the `service` workload: the exactly-once sink, the at-least-once
sink, and what a user writes without this library (confluent-kafka in
``foreachPartition``).

    python benchmarks/bench_spark_write.py [--rows N] [--repeat R] [--master URL]

Rows are made in Spark like the `service` workload's records (benchmarks/_workloads.py):
key ``user-<n>``, a JSON value of 60-700 bytes, two headers (``trace-id``: 16 bytes,
``content-type``), into a topic of 8 partitions by key; ``--rows`` (1,000,000) per run,
in 8 Spark partitions. Each mode writes them to a fresh topic; the modes take turns,
``--repeat`` rounds, order rotated; reported: rows/s of the Spark job's wall clock
(median of the rounds, lowest and highest). Spark: ``local[2]`` unless ``--master``
names a cluster. Broker: ``$KAFKA_BOOTSTRAP_SERVERS``, else an embedded Tansu.

Writes benchmarks/results/spark-write.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

import _harness as h

MODES = ("ours-at-least-once", "ours-exactly-once", "confluent-foreachPartition")


def service_rows(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as F

    user = (F.abs(F.hash(F.col("id"), F.lit(7))) % 100_000).cast("string")
    value = F.concat(
        F.lit('{"event":"click","user":"user-'),
        user,
        F.lit('","pad":"'),
        # padding to a value of 60-700 bytes, deterministic per row
        F.expr("repeat('x', greatest(60 + abs(hash(id)) % 641 - 45, 0))"),
        F.lit('"}'),
    )
    return spark.range(rows, numPartitions=8).select(
        F.concat(F.lit("user-"), user).cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.array(
            F.struct(
                F.lit("trace-id").alias("key"),
                F.unhex(F.md5(F.col("id").cast("string"))).alias("value"),
            ),
            F.struct(
                F.lit("content-type").alias("key"),
                F.lit("application/json").cast("binary").alias("value"),
            ),
        ).alias("headers"),
    )


def write_ours(df: Any, bootstrap: str, topic: str, exactly_once: bool) -> None:
    (
        df.write.format("aiokafka_lite")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .save()
    )


def write_confluent(
    df: Any, bootstrap: str, topic: str, config: dict[str, Any] | None = None
) -> None:
    """What a user writes without this library: confluent-kafka's producer in
    ``foreachPartition`` (idempotent, linger 5 ms, plus ``config``), flushed at the end
    of each partition; any failed delivery fails the task."""
    settings = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    settings.update(config or {})

    def send_partition(rows: Any) -> None:
        from confluent_kafka import Producer

        producer = Producer(settings)
        failed: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        for row in rows:
            headers = [(h["key"], bytes(h["value"])) for h in row["headers"]]
            while True:
                try:
                    producer.produce(
                        topic,
                        bytes(row["value"]),
                        bytes(row["key"]),
                        headers=headers,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        if producer.flush(120) or failed:
            raise RuntimeError(f"confluent-kafka: {len(failed)} deliveries failed")

    df.foreachPartition(send_partition)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default=None, help="a Spark master URL (default local[2])")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="start a standalone cluster (master + 2 workers of 1 core) on 127.0.0.1 and use it",
    )
    parser.add_argument("--out", default=str(h.RESULTS))
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import KafkaDataSource

    started = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results = h.run_header("spark-write", False, rows=args.rows, repeat=args.repeat)
    results["master"] = args.master or "local[2]"
    stem = "spark-write-cluster" if args.cluster else "spark-write"
    with ExitStack() as stack:
        if args.cluster:
            import tempfile

            from aiokafka_lite.testing.spark_cluster import standalone_cluster

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            args.master = stack.enter_context(standalone_cluster(workdir, workers=2)).master_url
            results["master"] = "standalone: 2 workers x 1 core on 127.0.0.1"
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            handle = stack.enter_context(h.broker(None, "tansu"))
            bootstrap = handle.bootstrap_servers
            results["broker"] = handle.kind
        builder = (
            SparkSession.builder.master(args.master or "local[2]")
            .appName("bench-spark-write")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.executor.memory", "1g")
        )
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaDataSource)
        df = service_rows(spark, args.rows).cache()
        df.count()  # made once, before any clock runs
        runs: dict[str, list[float]] = {m: [] for m in MODES}
        for rnd in range(args.repeat + 1):  # round 0 warms every path up, not counted
            order = h.rotated(MODES, rnd)
            for mode in order:
                topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
                h.create_topic(bootstrap, topic, 8)
                t0 = time.perf_counter()
                if mode == "confluent-foreachPartition":
                    write_confluent(df, bootstrap, topic)
                else:
                    write_ours(df, bootstrap, topic, mode == "ours-exactly-once")
                seconds = time.perf_counter() - t0
                if rnd:
                    runs[mode].append(args.rows / seconds)
                label = f"{rnd}" if rnd else "0 warm-up"
                print(f"  [{label}] {mode:28} {args.rows / seconds:10,.0f} rows/s", flush=True)
        spark.stop()
    results["statistics"] = (
        "rows/s of the Spark job's wall clock; median, lowest, highest of the rounds"
    )
    results["modes"] = {
        m: {
            "median": statistics.median(v),
            "min": min(v),
            "max": max(v),
            "runs": v,
        }
        for m, v in runs.items()
    }
    med = {m: results["modes"][m]["median"] for m in MODES}
    results["ratios"] = {
        "exactly_once_vs_at_least_once": med["ours-exactly-once"] / med["ours-at-least-once"],
        "ours_at_least_once_vs_confluent": med["ours-at-least-once"]
        / med["confluent-foreachPartition"],
        "ours_exactly_once_vs_confluent": med["ours-exactly-once"]
        / med["confluent-foreachPartition"],
    }
    h.finish(results, started)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = h.write_json(results, out, stem)
    for m in MODES:
        e = results["modes"][m]
        print(f"{m:28} {e['median']:10,.0f} rows/s ({e['min']:,.0f}-{e['max']:,.0f})")
    for k, v in results["ratios"].items():
        print(f"{k}: {v:.2f}x")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
