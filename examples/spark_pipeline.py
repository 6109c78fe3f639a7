"""The data pipeline demo: ``make demo``, or ``python examples/spark_pipeline.py``.

A small, real streaming pipeline, with aiokafka_lite doing every byte of Kafka I/O:

1. an asyncio "web service" produces page-view events (JSON: user, url, latency) with
   our idempotent :class:`~aiokafka_lite.producer.Producer`;
2. a Spark Structured Streaming query reads them through the ``aiokafka_lite`` data
   source, counts views and latency per URL in event-time windows, and writes each
   finished window to a results topic through the ``aiokafka_lite`` sink;
3. an asyncio "dashboard" in a consumer group reads the results with our
   :class:`~aiokafka_lite.consumer.Consumer` and prints them;

and at the end the demo checks every window's count against what the service produced.

With ``KAFKA_BOOTSTRAP_SERVERS`` set it runs against that cluster; otherwise it starts an
embedded broker. It creates its own topics (unique names) and deletes them afterwards.
Exit status 0 when the check passes. This is a front end: it prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka_lite._aio import wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

URLS = ("/", "/search", "/product/42", "/product/7", "/cart", "/checkout", "/account")
USERS = 500
#: How far past the last event the end-of-stream markers are stamped: they move Spark's
#: event-time watermark beyond every window, so the last windows are closed and written.
MARKER_AHEAD_MS = 60_000
WATERMARK_DELAY = "10 seconds"
#: Bound of each status call into Spark's JVM.
SPARK_CALL_TIMEOUT_S = 60

_started = time.monotonic()


def say(stage: str, message: str) -> None:
    """One line of demo output: elapsed seconds, the stage, the message."""
    print(f"[{time.monotonic() - _started:6.1f}s] {stage:<9} {message}", flush=True)


@dataclass
class Tally:
    """What the service produced, per (window start ms, url)."""

    window_ms: int
    views: Counter[tuple[int, str]] = field(default_factory=Counter)
    sent: int = 0
    seconds: float = 0.0

    def add(self, ts_ms: int, url: str) -> None:
        self.views[(ts_ms - ts_ms % self.window_ms, url)] += 1
        self.sent += 1


@dataclass
class Dashboard:
    """What the dashboard consumer received, per (window start ms, url)."""

    views: dict[tuple[int, str], int] = field(default_factory=dict)
    duplicates: int = 0
    records: int = 0

    @property
    def total(self) -> int:
        return sum(self.views.values())


# --- the broker -----------------------------------------------------------------------------


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[tuple[str, str]]:
    """The cluster to use: ``(bootstrap servers, description)``."""
    if bootstrap:
        yield bootstrap, f"external cluster at {bootstrap}"
        return
    from aiokafka_lite.testing import EmbeddedBroker

    say("broker", "starting the embedded broker (Tansu) ...")
    with EmbeddedBroker("tansu") as broker:
        yield broker.bootstrap_servers, f"embedded Tansu broker at {broker.bootstrap_servers}"
    say("broker", "embedded broker stopped")


async def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from aiokafka_lite.admin import AdminClient, NewTopic

    async with AdminClient(bootstrap) as admin:
        results = await admin.create_topics(
            [NewTopic(name, partitions) for name, partitions in topics.items()], timeout_ms=30_000
        )
        results.raise_for_errors()
        for name in topics:
            await admin.client.wait_for_metadata(name, 30_000)


async def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from aiokafka_lite.admin import AdminClient

    async with AdminClient(bootstrap) as admin:
        await admin.delete_topics(topics, timeout_ms=30_000)


# --- 1. the service ---------------------------------------------------------------------------


async def service(
    bootstrap: str, topic: str, partitions: int, duration: float, rate: int, tally: Tally
) -> None:
    """Produce page views for ``duration`` seconds at about ``rate`` per second."""
    from aiokafka_lite.producer import Producer

    rng = random.Random(42)
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=20, client_id="demo-service")
    await producer.start()
    failures: list[BaseException] = []

    def delivered(fut: asyncio.Future[Any]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            failures.append(fut.exception())  # type: ignore[arg-type]

    try:
        start = time.monotonic()
        tick = 0.05
        next_report = start + 3
        while (now := time.monotonic()) - start < duration:
            target = int((now - start) * rate)
            while tally.sent < target:
                url = rng.choice(URLS)
                user = f"user-{rng.randrange(USERS):03d}"
                latency = int(rng.lognormvariate(4.0, 0.6)) + (300 if url == "/checkout" else 0)
                ts_ms = int(time.time() * 1000)
                event = {
                    "type": "view",
                    "user": user,
                    "url": url,
                    "latency_ms": latency,
                    "ts": ts_ms,
                }
                fut = await producer.send(topic, json.dumps(event).encode(), key=user.encode())
                fut.add_done_callback(delivered)
                tally.add(ts_ms, url)
            if now >= next_report:
                say(
                    "service",
                    f"{tally.sent:>7,} page views sent ({tally.sent / (now - start):,.0f}/s)",
                )
                next_report += 3
            await asyncio.sleep(tick)
        await producer.flush(timeout=60)
        tally.seconds = time.monotonic() - start
        # One end-of-stream marker per partition, each alone in its batch and stamped
        # after every window: it moves the event-time watermark past the last window.
        marker_ts = int(time.time() * 1000) + MARKER_AHEAD_MS
        for partition in range(partitions):
            marker = {"type": "end-of-stream", "url": "(end)", "ts": marker_ts}
            await producer.send_and_wait(topic, json.dumps(marker).encode(), partition=partition)
        if failures:
            raise RuntimeError(f"{len(failures)} event(s) were not delivered: {failures[0]!r}")
        say(
            "service",
            f"done: {tally.sent:,} page views in {tally.seconds:.1f} s "
            f"({tally.sent / tally.seconds:,.0f}/s), every delivery acknowledged; "
            f"end-of-stream markers sent",
        )
    finally:
        await producer.stop(timeout=30)


# --- 2. the Spark query -----------------------------------------------------------------------


def start_query(
    spark: SparkSession,
    bootstrap: str,
    events: str,
    results: str,
    window_s: int,
    checkpoint: str,
) -> StreamingQuery:
    from pyspark.sql import functions as F

    schema = "type string, user string, url string, latency_ms int, ts long"
    views = (
        spark.readStream.format("aiokafka_lite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", events)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", WATERMARK_DELAY)
    )
    # No filter before the aggregation: Spark would push it below the watermark and the
    # end markers would no longer move it. A marker's own window never closes, so it is
    # never written.
    per_window = views.groupBy(F.window("event_time", f"{window_s} seconds"), "url").agg(
        F.count(F.when(F.col("type") == "view", True)).alias("views"),
        F.round(F.avg("latency_ms"), 1).alias("avg_latency_ms"),
        F.max("latency_ms").alias("max_latency_ms"),
        F.approx_count_distinct("user").alias("users"),
    )
    out = per_window.select(
        F.col("url").alias("key"),
        F.to_json(
            F.struct(
                F.unix_millis(F.col("window.start")).alias("window_start_ms"),
                F.date_format("window.start", "HH:mm:ss").alias("from"),
                F.date_format("window.end", "HH:mm:ss").alias("to"),
                "url",
                "views",
                "avg_latency_ms",
                "max_latency_ms",
                "users",
            )
        ).alias("value"),
    )
    return (
        out.writeStream.format("aiokafka_lite")
        .queryName("pageviews_per_window")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", results)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(processingTime="2 seconds")
        .start()
    )


async def watch_query(query: StreamingQuery, stop: asyncio.Event) -> dict[str, float]:
    """Print the query's progress now and then; returns the totals."""
    seen: set[str] = set()
    totals = {"batches": 0.0, "rows": 0.0, "peak": 0.0}
    while True:
        progress = await wait_for(
            asyncio.to_thread(lambda: list(query.recentProgress)), SPARK_CALL_TIMEOUT_S
        )
        for p in progress:
            if p["id"] + str(p["batchId"]) in seen or p["id"] is None:
                continue
            seen.add(p["id"] + str(p["batchId"]))
            rows = int(p.get("numInputRows") or 0)
            totals["batches"] += 1
            totals["rows"] += rows
            rate = float(p.get("processedRowsPerSecond") or 0.0)
            totals["peak"] = max(totals["peak"], rate)
            if rows:
                say(
                    "spark",
                    f"micro-batch {p['batchId']:>3}: {rows:>6,} events read, "
                    f"{rate:>8,.0f} rows/s, {totals['rows']:>8,.0f} so far",
                )
        exc = await wait_for(asyncio.to_thread(query.exception), SPARK_CALL_TIMEOUT_S)
        if exc is not None:
            raise RuntimeError(f"the Spark query failed: {exc}")
        if stop.is_set():
            return totals
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(stop.wait(), 2)


# --- 3. the dashboard -------------------------------------------------------------------------


async def dashboard(
    bootstrap: str,
    topic: str,
    group: str,
    tally: Tally,
    service_done: asyncio.Event,
    board: Dashboard,
    timeout: float,
) -> None:
    """Print each window as it arrives; stop when every produced view is accounted for."""
    from aiokafka_lite.consumer import Consumer

    consumer = Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        client_id="demo-dashboard",
    )
    await consumer.start()
    deadline: float | None = None
    try:
        await consumer.wait_for_assignment(timeout_ms=60_000)
        while True:
            if service_done.is_set():
                if board.total >= tally.sent:
                    return
                deadline = deadline or time.monotonic() + timeout
                if time.monotonic() > deadline:
                    say("dashboard", f"gave up waiting after {timeout:.0f} s")
                    return
            batch = await consumer.getmany(timeout_ms=1000)
            rows = [json.loads(r.value or b"{}") for records in batch.values() for r in records]
            rows.sort(key=lambda row: (row["window_start_ms"], row["url"]))
            for row in rows:
                key = (int(row["window_start_ms"]), row["url"])
                board.records += 1
                if key in board.views:
                    board.duplicates += 1
                board.views[key] = int(row["views"])
                say(
                    "dashboard",
                    f"{row['from']}-{row['to']} {row['url']:<12} "
                    f"views={row['views']:>5}  users={row['users']:>4}  "
                    f"avg={row['avg_latency_ms']:>6} ms  "
                    f"max={row['max_latency_ms']:>5} ms",
                )
            if batch:
                await consumer.commit(timeout_ms=30_000)
    finally:
        await consumer.stop(timeout_ms=30_000)


# --- the run ----------------------------------------------------------------------------------


async def pipeline(
    args: argparse.Namespace,
    bootstrap: str,
    query: StreamingQuery,
    events: str,
    results: str,
    tally: Tally,
    board: Dashboard,
    group: str,
) -> dict[str, float]:
    stop_watch = asyncio.Event()
    service_done = asyncio.Event()
    watcher = asyncio.create_task(watch_query(query, stop_watch))

    async def run_service() -> None:
        try:
            await service(bootstrap, events, args.partitions, args.duration, args.rate, tally)
        finally:
            service_done.set()

    try:
        await asyncio.gather(
            run_service(),
            dashboard(bootstrap, results, group, tally, service_done, board, args.timeout),
        )
    finally:
        stop_watch.set()
    return await watcher


def check(tally: Tally, board: Dashboard) -> list[str]:
    """Differences between what was produced and what the pipeline reported."""
    problems = []
    for key in sorted(set(tally.views) | set(board.views)):
        want, got = tally.views.get(key, 0), board.views.get(key)
        if got != want:
            start = time.strftime("%H:%M:%S", time.gmtime(key[0] / 1000))
            problems.append(f"window {start} {key[1]}: produced {want}, reported {got}")
    if board.duplicates:
        problems.append(f"{board.duplicates} window result(s) arrived more than once")
    return problems


def configure_spark_logging(workdir: str) -> None:
    """Keep Spark's JVM quiet (errors only) unless the user set PYSPARK_SUBMIT_ARGS."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ:
        return
    path = os.path.join(workdir, "log4j2.properties")
    with open(path, "w") as f:
        f.write(
            "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        )
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f'--driver-java-options "-Dlog4j2.configurationFile=file:{path}" pyspark-shell'
    )


def run(args: argparse.Namespace) -> int:
    from aiokafka_lite.spark import local_session

    run_id = uuid.uuid4().hex[:8]
    events, results = f"demo-pageviews-{run_id}", f"demo-window-stats-{run_id}"
    group = f"demo-dashboard-{run_id}"
    workdir = tempfile.mkdtemp(prefix="aiokafka-lite-demo-")
    tally = Tally(window_ms=args.window * 1000)
    board = Dashboard()
    ok = False
    try:
        with kafka(os.environ.get("KAFKA_BOOTSTRAP_SERVERS")) as (bootstrap, where):
            say("broker", f"using the {where}")
            asyncio.run(create_topics(bootstrap, {events: args.partitions, results: 2}))
            say("topics", f"created {events} ({args.partitions} partitions) and {results} (2)")
            try:
                configure_spark_logging(workdir)
                say("spark", "starting Spark (local[2]) ...")
                spark = local_session("aiokafka_lite-demo")
                spark.sparkContext.setLogLevel("ERROR")
                query = start_query(
                    spark,
                    bootstrap,
                    events,
                    results,
                    args.window,
                    os.path.join(workdir, "checkpoint"),
                )
                say(
                    "spark",
                    f"Spark {spark.version}: streaming query started: {events} -> "
                    f"views per url per {args.window} s window -> {results}",
                )
                try:
                    totals = asyncio.run(
                        pipeline(args, bootstrap, query, events, results, tally, board, group)
                    )
                finally:
                    query.stop()
                    spark.stop()
                    say("spark", "query and Spark stopped")
            finally:
                with contextlib.suppress(Exception):
                    asyncio.run(delete_topics(bootstrap, [events, results]))
                    say("topics", "deleted the demo topics")
        problems = check(tally, board)
        ok = not problems and board.total == tally.sent
        elapsed = time.monotonic() - _started
        print()
        print("==== summary ====")
        print(f"cluster          {where}")
        print(
            f"service          {tally.sent:,} page views produced in {tally.seconds:.1f} s "
            f"({tally.sent / max(tally.seconds, 1e-9):,.0f}/s), idempotent producer"
        )
        print(
            f"spark            {totals['batches']:.0f} micro-batches, {totals['rows']:,.0f} "
            f"events read (incl. {args.partitions} end markers), peak "
            f"{totals['peak']:,.0f} rows/s"
        )
        print(
            f"windows          {len(tally.views)} (url, {args.window} s window) counts "
            f"expected, {board.records} results consumed by group {group}"
        )
        print(f"views counted    {board.total:,} of {tally.sent:,} produced")
        for problem in problems[:10]:
            print(f"MISMATCH         {problem}")
        print(f"total time       {elapsed:.0f} s")
        print(
            "RESULT: OK - every window's count matches what was produced"
            if ok
            else f"RESULT: FAILED - {len(problems)} mismatch(es)"
        )
        return 0 if ok else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python examples/spark_pipeline.py",
        description="Page views -> Spark windowed counts -> results topic, all through "
        "aiokafka_lite. Uses $KAFKA_BOOTSTRAP_SERVERS, else an embedded broker.",
    )
    parser.add_argument("--duration", type=float, default=30, help="seconds of traffic (30)")
    parser.add_argument("--rate", type=int, default=500, help="page views per second (500)")
    parser.add_argument("--window", type=int, default=5, help="window length in seconds (5)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the event topic")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120,
        help="how long to wait for the last results after the service ends",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log aiokafka_lite at INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
