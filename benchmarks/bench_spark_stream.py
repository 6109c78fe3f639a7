"""Spark streaming at a steady rate: end-to-end latency per record of a Structured
Streaming query through the aiokafka_lite source and sink (at-least-once and
``exactlyOnce=true``), against what a user writes without this library (a driver loop
of confluent-kafka's consumer, ``createDataFrame`` and confluent-kafka's producer in
``foreachPartition``).

    python benchmarks/bench_spark_stream.py [--rate 2000] [--duration 60] [--repeat 2]
                                            [--cluster | --master URL] [--broker noida]

The traffic: a producer outside Spark (our ``Producer``, acks=all, linger 0, in a child
process of its own with its own event loop) sends the ``service`` workload
(benchmarks/_workloads.py: key ``user-<n>``, a JSON value of 60-700 bytes, headers
``trace-id`` and ``content-type``) at a steady ``--rate`` (2,000 records/s) into an input
topic of 8 partitions, for ``--warmup`` (10 s, not counted) and then ``--duration``
(60 s) seconds. Each record carries a third header, ``bench-sent``: 16 bytes, its
sequence number and the wall-clock time (``time.time_ns()``) just before the send call;
key, value and the two service headers are the workload's own. In the same child
process our ``Consumer`` (assigned all 8 partitions of the output topic,
``read_committed``) reads what the pipeline wrote; a record's latency is the time it is
in the consumer's hands minus its ``bench-sent`` time. After the last send the child
waits until every record has come out, or ``--grace`` (30 s) at most.

The pipelines, each from the input topic to an output topic of 8 partitions, the same
pass-through projection (``key``, ``value``, ``headers``: the service headers and
``bench-sent`` go through as they came):

* ``ours-at-least-once`` / ``ours-exactly-once``: ``spark.readStream.format
  ("aiokafka_lite")`` (``includeHeaders=true``, from the earliest offset) ->
  ``select("key", "value", "headers")`` -> ``writeStream.format("aiokafka_lite")``
  with ``exactlyOnce`` false / true. Trigger: the default (a micro-batch as soon as the
  previous one is done and new offsets are there; ``--trigger`` sets a processing-time
  interval). The default gives the lowest latency: an interval can only hold the next
  batch back until its next tick, and changes nothing when the batches take longer
  than the interval, as they do here (over a second, against the 100-500 ms one would
  pick).
* ``confluent-driver-loop``: there is no Spark Kafka connector without its JVM jar
  (``--packages ...spark-sql-kafka``), so a user without this library who wants a
  stream in Spark writes a driver loop: confluent-kafka's ``Consumer`` (a consumer
  group, auto-commit off) polls what has arrived (``poll`` for the first record, then
  ``consume(timeout=0)`` for the rest of what is queued), ``spark.createDataFrame`` of
  those records, the same projection, confluent-kafka's ``Producer`` in
  ``foreachPartition`` (idempotent, linger 5 ms, murmur2 partitioner, ``flush()`` at
  the end of each partition), then a synchronous commit of the consumer's offsets; and
  again, as fast as it goes. It is at-least-once (a crash between the write and the
  commit sends the batch again). Structured Streaming has no source that could stand in
  for Kafka here (``foreachBatch`` needs one), so this loop is the natural shape.

Broker: noida-db (``--broker noida``, the default), a fresh one for every run, or
``$KAFKA_BOOTSTRAP_SERVERS``. Not Tansu, for three reasons that would measure the broker
rather than the pipelines: Tansu's fetch long-poll does not wake on new data (the
measuring consumer's latency would be its fetch wait, as bench_latency.py notes);
Tansu's ListOffsets(latest) stops at the last batch's base offset + 1 when that batch
holds several records (docs/spark.md), so the source's micro-batches would end short of
the log and records would wait for a later batch; and Tansu's read_committed readers
see the rows of aborted transactions. bench_latency.py runs on noida-db too. A fresh broker per run
because noida-db's latency drifts as its log grows (benchmarks/README.md); the Spark
session is shared by all runs. ``--broker tansu`` is accepted, for comparison.

The modes take turns, ``--repeat`` rounds (2), the order rotated each round, fresh
topics every run, after a round 0 that runs each mode for 15 s and is not counted (a
fresh session's first micro-batches take seconds: Spark starts its Python workers).
Reported per mode: latency p50, p99 and max (ms, nearest rank over the records sent
after the warm-up), rows/s delivered (those records over the time from the first to
the last one received), lost (sent after the warm-up, never received within the grace
period), duplicates (received more than once); and for the Spark side, the
micro-batches (or loop iterations) and their median duration. Per mode: the median
over the rounds with the lowest and highest. Spark: ``local[2]``, ``--master URL``, or
``--cluster`` (a standalone cluster of 2 workers x 1 core on 127.0.0.1). ``--coalesce
N`` adds ``coalesce(N)`` before our sink (fewer, larger tasks per micro-batch; not part
of the default comparison).

Writes benchmarks/results/spark-stream.json (``--cluster``: spark-stream-cluster.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
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
import _workloads as w
from bench_spark_write import write_confluent

MODES = ("ours-at-least-once", "ours-exactly-once", "confluent-driver-loop")
PARTITIONS = 8
SENT_HEADER = "bench-sent"
_STAMP = struct.Struct(">qq")  # sequence number, time.time_ns() at the send call
WARMUP_ROUND_S = 15.0
FIELDS = (
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "mean_ms",
    "delivered_rate",
    "sent_rate",
    "samples",
    "lost",
    "duplicates",
    "batches",
    "batch_ms_median",
    "batch_rows_median",
)


def percentiles(latencies_ns: list[int]) -> dict[str, float]:
    """Nearest-rank percentiles of latencies in ns, in ms (as bench_latency.py)."""
    if not latencies_ns:
        return {}
    ordered = sorted(latencies_ns)
    n = len(ordered)

    def pct(p: float) -> float:
        return ordered[min(n - 1, int(p / 100 * n))] / 1e6

    return {
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "p99_9_ms": pct(99.9),
        "max_ms": ordered[-1] / 1e6,
        "mean_ms": statistics.fmean(ordered) / 1e6,
    }


# --- the child: a steady producer and the measuring consumer ------------------------------


async def _traffic(spec: dict[str, Any]) -> dict[str, Any]:
    from aiokafka_lite.consumer import Consumer
    from aiokafka_lite.producer import Producer
    from aiokafka_lite.structs import TopicPartition

    bootstrap = spec["bootstrap"]
    rate = spec["rate"]
    warm = int(rate * spec["warmup"])
    total = warm + int(rate * spec["duration"])
    producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_poll_records=10_000,
    )
    await producer.start()
    await consumer.start()
    consumer.assign([TopicPartition(spec["out_topic"], p) for p in range(PARTITIONS)])
    seen = bytearray(total)
    latencies: list[int] = []  # ns, records sent after the warm-up, first receipt
    state = {"unique": 0, "duplicates": 0, "first": 0, "last": 0}
    all_in = asyncio.Event()

    async def consume() -> None:
        unpack = _STAMP.unpack
        now = time.time_ns
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                arrived = now()
                for record in records:
                    stamp = next(v for k, v in record.headers if k == SENT_HEADER)
                    seq, sent = unpack(stamp or b"")
                    if seen[seq]:
                        state["duplicates"] += 1
                        continue
                    seen[seq] = 1
                    state["unique"] += 1
                    if seq >= warm:
                        latencies.append(arrived - sent)
                        state["first"] = state["first"] or arrived
                        state["last"] = arrived
            if state["unique"] >= total:
                all_in.set()

    task = asyncio.create_task(consume())
    try:
        interval = 1.0 / rate
        send = producer.send
        start = time.perf_counter()
        started_at = time.time()
        due = start
        for seq, (key, value, headers) in enumerate(w.iter_records("service", total)):
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            assert headers is not None
            stamp = _STAMP.pack(seq, time.time_ns())
            await send(spec["in_topic"], value, key=key, headers=[*headers, (SENT_HEADER, stamp)])
            due += interval
        sent_seconds = time.perf_counter() - start
        await producer.flush()
        try:
            await asyncio.wait_for(all_in.wait(), spec["grace"])
        except asyncio.TimeoutError:
            pass
        # A last look for duplicates that come after the final record.
        await asyncio.sleep(1.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await consumer.stop()
        await producer.stop()
    result: dict[str, Any] = percentiles(latencies)
    measured = total - warm
    span = (state["last"] - state["first"]) / 1e9
    result.update(
        samples=len(latencies),
        traffic_started=time.strftime("%H:%M:%S", time.gmtime(started_at))
        + f".{int(started_at % 1 * 1000):03d}Z",
        sent=total,
        sent_rate=total / sent_seconds,
        lost=measured - len(latencies),
        lost_in_warmup=warm - (state["unique"] - len(latencies)),
        duplicates=state["duplicates"],
        delivered_rate=len(latencies) / span if span > 0 else None,
    )
    return result


def child(spec: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_traffic(spec))


def start_traffic(spec: dict[str, Any], stderr: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=h.worker_env(),
    )


def stop_traffic(proc: subprocess.Popen[str]) -> None:
    """Kill the traffic process if it still runs (the pipeline failed)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def traffic_result(proc: subprocess.Popen[str], stderr: Any) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        stderr.seek(0)
        tail = stderr.read().strip().splitlines()[-1:] or ["failed"]
        return {"error": f"traffic: {tail[0][:300]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- the pipelines --------------------------------------------------------------------


def run_ours(
    spark: Any,
    bootstrap: str,
    spec: dict[str, Any],
    exactly_once: bool,
    trigger: str | None,
    coalesce: int | None = None,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as checkpoint, tempfile.TemporaryFile("w+") as err:
        stream = (
            spark.readStream.format("aiokafka_lite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", spec["in_topic"])
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
            .select("key", "value", "headers")
        )
        if coalesce:
            stream = stream.coalesce(coalesce)
        writer = (
            stream.writeStream.format("aiokafka_lite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", spec["out_topic"])
            .option("exactlyOnce", str(exactly_once).lower())
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
        )
        if trigger:
            writer = writer.trigger(processingTime=trigger)
        query = writer.start()
        try:
            # Ready once the first trigger has run (the source's planning worker is
            # up and has resolved the starting offsets): it reports a progress.
            deadline = time.monotonic() + 120
            while query.lastProgress is None:
                if time.monotonic() > deadline or not query.isActive:
                    return {"error": f"query did not start: {query.exception()}"}
                time.sleep(0.1)
            proc = start_traffic(spec, err)
            try:
                while proc.poll() is None:
                    if not query.isActive:
                        return {"error": f"query failed: {str(query.exception())[:300]}"}
                    time.sleep(0.5)
                result = traffic_result(proc, err)
            finally:
                stop_traffic(proc)
            progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        finally:
            query.stop()
    result.update(batch_stats(progress))
    # The first micro-batches with rows: when each began, its rows and duration (ms).
    result["first_batches"] = [
        [p["timestamp"], p["numInputRows"], p["durationMs"].get("triggerExecution")]
        for p in progress[:5]
    ]
    return result


def batch_stats(progress: list[Any]) -> dict[str, Any]:
    """Micro-batches that had rows: how many, their median duration and rows."""
    if not progress:
        return {"batches": 0}
    durations = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    return {
        "batches": len(progress),
        "batch_ms_median": statistics.median(durations),
        "batch_rows_median": statistics.median(p["numInputRows"] for p in progress),
        "batch_phases_ms_median": {
            phase: statistics.median(p["durationMs"].get(phase, 0) for p in progress)
            for phase in progress[-1]["durationMs"]
        },
    }


def run_confluent(spark: Any, bootstrap: str, spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            ),
        ]
    )
    out_topic = spec["out_topic"]

    consumer: Any = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-stream-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([spec["in_topic"]])
    durations: list[float] = []
    sizes: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            if consumer.poll(0.1) is not None:
                return {"error": "a record before the traffic started"}
            if time.monotonic() > deadline:
                return {"error": "the consumer group got no assignment within 60 s"}
        with tempfile.TemporaryFile("w+") as err:
            proc = start_traffic(spec, err)
            try:
                while proc.poll() is None:
                    first = consumer.poll(0.1)
                    if first is None:
                        continue
                    t0 = time.perf_counter()
                    messages = [first, *consumer.consume(100_000, 0)]
                    rows = []
                    for m in messages:
                        if m.error():
                            raise RuntimeError(str(m.error()))
                        rows.append((m.key(), m.value(), list(m.headers() or ())))
                    df = spark.createDataFrame(rows, schema).select("key", "value", "headers")
                    write_confluent(df, bootstrap, out_topic, {"partitioner": "murmur2_random"})
                    consumer.commit(asynchronous=False)
                    durations.append((time.perf_counter() - t0) * 1000)
                    sizes.append(len(rows))
                result = traffic_result(proc, err)
            finally:
                stop_traffic(proc)
    finally:
        consumer.close()
    if durations:
        result.update(
            batches=len(durations),
            batch_ms_median=statistics.median(durations),
            batch_rows_median=statistics.median(sizes),
        )
    return result


# --- the run --------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="records/s sent (2,000)")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds (60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds not counted (10)")
    parser.add_argument("--grace", type=float, default=30.0, help="wait for stragglers (30 s)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--no-warmup-round",
        dest="warmup_round",
        action="store_false",
        help=f"skip round 0 (each mode {WARMUP_ROUND_S:.0f} s, not counted)",
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--trigger", default=None, help="processingTime interval (default ASAP)")
    parser.add_argument(
        "--coalesce",
        type=int,
        default=None,
        help="ours: coalesce(N) the stream before the sink (not by default)",
    )
    parser.add_argument("--broker", default="noida", help="noida (default) or tansu")
    parser.add_argument("--master", default=None, help="a Spark master URL (default local[2])")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="start a standalone cluster (master + 2 workers of 1 core) on 127.0.0.1 and use it",
    )
    parser.add_argument("--out", default=str(h.RESULTS))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(child(json.loads(args.worker))))
        return 0

    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import KafkaDataSource

    modes = [m for m in args.modes.split(",") if m]
    started = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results = h.run_header(
        "spark-stream",
        False,
        rate=args.rate,
        duration_s=args.duration,
        warmup_s=args.warmup,
        grace_s=args.grace,
        repeat=args.repeat,
        partitions=PARTITIONS,
        trigger=args.trigger or "default (as soon as possible)",
        coalesce=args.coalesce,
        workload=w.workload("service").description + f", plus header {SENT_HEADER} (16 B)",
    )
    results["master"] = args.master or "local[2]"
    stem = "spark-stream-cluster" if args.cluster else "spark-stream"
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    results["broker"] = "external" if external else args.broker
    results["broker_per_run"] = not external
    rounds: list[dict[str, Any]] = []
    warm_runs: list[dict[str, Any]] = []
    with ExitStack() as stack:
        if args.cluster:
            from aiokafka_lite.testing.spark_cluster import standalone_cluster

            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            args.master = stack.enter_context(standalone_cluster(workdir, workers=2)).master_url
            results["master"] = "standalone: 2 workers x 1 core on 127.0.0.1"
        spark = (
            SparkSession.builder.master(args.master or "local[2]")
            .appName("bench-spark-stream")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.executor.memory", "1g")
            .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
            .getOrCreate()
        )
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaDataSource)
        # Round 0 warms every path up (Python workers, the JVM's code), not counted: a
        # fresh session's first micro-batches take seconds.
        first = 0 if args.warmup_round else 1
        for rnd in range(first, args.repeat + 1):
            order = h.rotated(modes, rnd)
            for mode in order:
                with h.broker(external, args.broker) as handle:
                    bootstrap = handle.bootstrap_servers
                    tag = uuid.uuid4().hex[:8]
                    spec = {
                        "bootstrap": bootstrap,
                        "in_topic": f"bench-stream-in-{tag}",
                        "out_topic": f"bench-stream-out-{tag}",
                        "rate": args.rate,
                        "warmup": args.warmup if rnd else 0.0,
                        "duration": args.duration if rnd else WARMUP_ROUND_S,
                        "grace": args.grace,
                    }
                    h.create_topic(bootstrap, spec["in_topic"], PARTITIONS)
                    h.create_topic(bootstrap, spec["out_topic"], PARTITIONS)
                    load = h.load_average()
                    try:
                        if mode == "confluent-driver-loop":
                            result = run_confluent(spark, bootstrap, spec)
                        else:
                            result = run_ours(
                                spark,
                                bootstrap,
                                spec,
                                mode == "ours-exactly-once",
                                args.trigger,
                                args.coalesce,
                            )
                    except Exception as exc:  # one failed run does not end the benchmark
                        result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                result.update(mode=mode, round=rnd, load_average=load)
                (rounds if rnd else warm_runs).append(result)
                label = f"{rnd}" if rnd else "0 warm-up"
                if "error" in result:
                    print(f"  [{label}] {mode:22} failed: {result['error']}", flush=True)
                else:
                    print(
                        f"  [{label}] {mode:22} p50 {result.get('p50_ms', 0):8.1f} ms  "
                        f"p99 {result.get('p99_ms', 0):8.1f}  max {result.get('max_ms', 0):8.1f}  "
                        f"{result.get('delivered_rate') or 0:7,.0f} rows/s  "
                        f"lost {result['lost']}  dup {result['duplicates']}  "
                        f"batches {result.get('batches')} "
                        f"(median {result.get('batch_ms_median', 0):.0f} ms, "
                        f"{result.get('batch_rows_median', 0):.0f} rows)",
                        flush=True,
                    )
    results["statistics"] = (
        "per run: nearest-rank percentiles of the latencies of the records sent after the "
        "warm-up, ms; per mode: median, lowest, highest over the rounds"
    )
    results["rounds"] = rounds
    results["warmup_round"] = warm_runs
    results["modes"] = {m: h.summary([r for r in rounds if r["mode"] == m], FIELDS) for m in modes}
    h.finish(results, started)
    out = Path(args.out)
    path = h.write_json(results, out, stem)
    print()
    for m in modes:
        e = results["modes"][m]
        if "p50_ms" not in e:
            print(f"{m:22} failed: {e.get('error')}")
            continue

        def cell(name: str, fmt: str, e: dict[str, Any] = e) -> str:
            s = e.get(name)
            if not s:
                return "-"
            return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"

        print(
            f"{m:22} p50 {cell('p50_ms', '.0f')} ms  p99 {cell('p99_ms', '.0f')}  "
            f"max {cell('max_ms', '.0f')}  {cell('delivered_rate', ',.0f')} rows/s  "
            f"lost {cell('lost', '.0f')}  dup {cell('duplicates', '.0f')}"
        )
    print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
