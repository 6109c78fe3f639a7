"""Spark batch write and read throughput through the aiokafka_lite data source.

Run: ``python benchmarks/bench_spark.py [--records N] [--partitions P] [--repeat R]``

Workload: ``--records`` (1,000,000) rows of a 100-byte value and a short key, written
with ``df.write.format("aiokafka_lite")`` into a topic of ``--partitions`` (4)
partitions, then read back with ``spark.read.format("aiokafka_lite")`` and aggregated
(count and total value bytes, so every row crosses into Spark). Spark runs
``local[2]``; each task does its I/O with our producer or consumer on its own event
loop, and rows cross between Python and the JVM as Arrow batches. Times are wall
clock for the Spark job alone (session start-up and a warm-up job are not counted);
each figure is the best of ``--repeat`` runs. The read uses explicit ending offsets
from a fetch's high watermark (see the note on Tansu's ListOffsets in docs/spark.md).

Uses ``$KAFKA_BOOTSTRAP_SERVERS`` when set, else an embedded Tansu broker (in-memory).
Results also go to ``benchmarks/results/spark.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

# The benchmarks' own modules first; the library is what `import aiokafka_lite` finds
# (PYTHONPATH, else the installed package), this checkout only as the last resort.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))

from aiokafka_lite.admin import AdminClient, NewTopic
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.structs import TopicPartition

RESULTS = Path(__file__).resolve().parent / "results" / "spark.json"


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    async with AdminClient(bootstrap) as admin:
        (
            await admin.create_topics([NewTopic(topic, partitions)], timeout_ms=30_000)
        ).raise_for_errors()
        await admin.client.wait_for_metadata(topic, 30_000)


async def delete_topic(bootstrap: str, topic: str) -> None:
    async with AdminClient(bootstrap) as admin:
        await admin.delete_topics([topic], timeout_ms=30_000)


async def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end from a fetch's high watermark."""
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=1024,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 60
        while any(consumer.highwater(tp) is None for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("no fetch answered within 60 s")
            await consumer.getmany(timeout_ms=200)
        return {tp.partition: consumer.highwater(tp) or 0 for tp in tps}
    finally:
        await consumer.stop()


def rows_frame(spark: Any, records: int, slices: int) -> Any:
    from pyspark.sql import functions as F

    # 100-byte values: a zero-padded row number and filler.
    return spark.range(0, records, 1, slices).select(
        F.concat(F.lit("k-"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.rpad(F.format_string("%012d:", F.col("id")), 100, "x").cast("binary").alias("value"),
    )


def bench_write(spark: Any, bootstrap: str, topic: str, records: int, slices: int) -> float:
    df = rows_frame(spark, records, slices).cache()
    df.count()  # build the rows before the clock starts
    start = time.perf_counter()
    (
        df.write.format("aiokafka_lite")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    elapsed = time.perf_counter() - start
    df.unpersist()
    return elapsed


def bench_read(
    spark: Any, bootstrap: str, topic: str, ends: dict[int, int], expected: int
) -> float:
    from pyspark.sql import functions as F

    start = time.perf_counter()
    row = (
        spark.read.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("endingOffsets", json.dumps({topic: {str(p): e for p, e in ends.items()}}))
        .load()
        .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"))
        .collect()[0]
    )
    elapsed = time.perf_counter() - start
    if row["n"] != expected:
        raise AssertionError(f"read {row['n']} rows, expected {expected}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from aiokafka_lite.spark import local_session

    with ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        broker = "external"
        if not bootstrap:
            from aiokafka_lite.testing import EmbeddedBroker

            bootstrap = stack.enter_context(EmbeddedBroker("tansu")).bootstrap_servers
            broker = "tansu (embedded, in-memory)"
        spark = local_session("aiokafka_lite-bench")
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        print(
            f"Spark {spark.version} local[2], broker: {broker}, {args.records:,} records of "
            f"100 bytes, {args.partitions} partitions",
            flush=True,
        )

        # Warm-up: Python workers, JIT, connections.
        warm = f"bench-warm-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topic(bootstrap, warm, args.partitions))
        bench_write(spark, bootstrap, warm, 20_000, args.partitions)
        bench_read(
            spark, bootstrap, warm, asyncio.run(log_ends(bootstrap, warm, args.partitions)), 20_000
        )
        asyncio.run(delete_topic(bootstrap, warm))

        writes, reads = [], []
        for run in range(args.repeat):
            topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
            asyncio.run(create_topic(bootstrap, topic, args.partitions))
            try:
                w = bench_write(spark, bootstrap, topic, args.records, args.partitions)
                ends = asyncio.run(log_ends(bootstrap, topic, args.partitions))
                if sum(ends.values()) != args.records:
                    raise AssertionError(f"topic holds {sum(ends.values())} records")
                r = bench_read(spark, bootstrap, topic, ends, args.records)
            finally:
                asyncio.run(delete_topic(bootstrap, topic))
            writes.append(args.records / w)
            reads.append(args.records / r)
            print(
                f"run {run + 1}: write {args.records / w:>9,.0f} records/s ({w:.1f} s)   "
                f"read {args.records / r:>9,.0f} records/s ({r:.1f} s)",
                flush=True,
            )

    result = {
        "records": args.records,
        "partitions": args.partitions,
        "value_bytes": 100,
        "write_records_per_s": round(max(writes)),
        "read_records_per_s": round(max(reads)),
        "spark": spark.version,
        "broker": broker,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(
        f"best: write {result['write_records_per_s']:,} records/s, "
        f"read {result['read_records_per_s']:,} records/s"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
