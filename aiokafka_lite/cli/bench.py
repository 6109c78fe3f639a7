"""The ``bench produce`` and ``bench consume`` commands, and their progress bar."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.cli.produce import add_producer_flags, producer_kwargs
from aiokafka_lite.cli.shared import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    Leaf,
    Parser,
    StopSignal,
    UsageError,
    check_topics,
    describe_error,
    error_line,
    exit_code_for,
    non_negative_seconds,
    out,
    positive_int,
    rate_summary,
    resolve_connection,
)
from aiokafka_lite.structs import TopicPartition

__all__ = ["ProgressBar", "add_bench_parser", "cmd_bench_consume", "cmd_bench_produce"]

#: bench produce's producer settings where neither a flag nor the config file gives them.
BENCH_PRODUCE_DEFAULTS: Mapping[str, Any] = {
    "acks": 1,
    "compression_type": "none",
    "linger_ms": 5.0,
    "max_batch_size": 65536,
}


class ProgressBar:
    """A one-line progress bar redrawn in place on a terminal (nothing when disabled)."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: IO[str] | None = None,
        enabled: bool = True,
        width: int = 30,
        interval: float = 0.1,
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.width = width
        self.interval = interval
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._last_len = 0

    def line(self, done: int, size: int, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        fraction = min(done / self.total, 1.0)
        filled = int(fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        rate = done / elapsed
        if done >= self.total:
            eta = "0s"
        elif rate > 0:
            eta = f"{(self.total - done) / rate:.0f}s"
        else:
            eta = "--"
        return (
            f"{self.label} [{bar}] {fraction * 100:3.0f}% {done:,}/{self.total:,} records "
            f"{rate:,.0f} records/s {size / elapsed / 1e6:.2f} MB/s ETA {eta}"
        )

    def update(self, done: int, size: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        text = self.line(done, size, now)
        pad = max(self._last_len - len(text), 0)
        self._last_len = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def finish(self, done: int, size: int) -> None:
        if not self.enabled:
            return
        self.update(done, size, force=True)
        self.stream.write("\n")
        self.stream.flush()


def _progress_enabled(choice: str) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    return sys.stderr.isatty()


async def _ticker(stop: asyncio.Event, draw: Callable[[], None], interval: float = 0.1) -> None:
    while not stop.is_set():
        draw()
        try:
            await wait_for(stop.wait(), interval)
        except asyncio.TimeoutError:
            pass


async def cmd_bench_produce(args: argparse.Namespace) -> int:
    from aiokafka_lite.producer import Producer

    conn = resolve_connection(args, "aiokafka-lite-bench")
    producer = Producer(**producer_kwargs(conn, args, BENCH_PRODUCE_DEFAULTS))
    limit = producer.config.max_request_size
    if args.record_size > limit:
        # Checked before the payload is made: a huge size was a MemoryError traceback.
        raise UsageError(
            f"--record-size {args.record_size} is larger than max_request_size "
            f"({limit} bytes): no such record can be sent"
        )
    await check_topics(conn, [args.topic], create=args.create)
    payload = os.urandom(args.record_size)
    await producer.start()
    delivered = 0
    failures: list[BaseException] = []

    def on_done(fut: asyncio.Future[Any]) -> None:
        nonlocal delivered
        exc = None if fut.cancelled() else fut.exception()
        if fut.cancelled() or exc is not None:
            failures.append(exc or errors.KafkaError("send cancelled"))
        else:
            delivered += 1

    bar = ProgressBar(args.records, "produce", enabled=_progress_enabled(args.progress))
    done_drawing = asyncio.Event()
    ticker = asyncio.create_task(
        _ticker(done_drawing, lambda: bar.update(delivered, delivered * args.record_size))
    )
    interrupted = False
    try:
        with StopSignal() as stop:
            for _ in range(args.records):
                if stop.stopped or failures:
                    break
                fut = await producer.send(args.topic, payload)
                fut.add_done_callback(on_done)
            await producer.flush()
            interrupted = stop.stopped
    finally:
        done_drawing.set()
        await ticker
        await producer.stop()
    elapsed = time.monotonic() - bar.started
    bar.finish(delivered, delivered * args.record_size)
    if failures:
        error_line(f"{len(failures)} records were not delivered: {describe_error(failures[0])}")
        return exit_code_for(failures[0])
    out(rate_summary("Produced", delivered, delivered * args.record_size, elapsed, args.topic))
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


async def cmd_bench_consume(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import AdminClient
    from aiokafka_lite.consumer import Consumer

    conn = resolve_connection(args, "aiokafka-lite-bench")
    async with AdminClient(**conn.client_kwargs()) as admin:
        described = (await admin.describe_topics([args.topic]))[args.topic]
        if described.error is not None:
            raise described.error
        tps = [TopicPartition(args.topic, p.partition) for p in described.partitions]
        total = args.records
        if total is None:
            lows = await admin.list_offsets({tp: "earliest" for tp in tps})
            highs = await admin.list_offsets({tp: "latest" for tp in tps})
            total = sum((highs[tp].offset or 0) - (lows[tp].offset or 0) for tp in tps)
            if total <= 0:
                raise CliError(f"topic {args.topic!r} is empty: nothing to consume")
    # Every partition from its beginning, outside any group (the config file's group
    # options do not apply).
    kwargs = conn.client_kwargs("consumer")
    for key in ("group_id", "group_instance_id"):
        kwargs.pop(key, None)
    kwargs.update(enable_auto_commit=False, auto_offset_reset="earliest")
    consumer = Consumer(**kwargs)
    await consumer.start()
    count = size = 0
    bar = ProgressBar(total, "consume", enabled=_progress_enabled(args.progress))
    interrupted = False
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        last_record = time.monotonic()
        with StopSignal() as stop:
            while count < total and not stop.stopped:
                batches = await consumer.getmany(timeout_ms=200, max_records=total - count)
                for records in batches.values():
                    for record in records:
                        count += 1
                        size += len(record.value or b"") + len(record.key or b"")
                now = time.monotonic()
                if batches:
                    last_record = now
                elif now - last_record > args.idle_timeout:
                    break
                bar.update(count, size)
            interrupted = stop.stopped
    finally:
        await consumer.stop()
    elapsed = time.monotonic() - bar.started
    bar.finish(count, size)
    out(rate_summary("Consumed", count, size, elapsed, args.topic))
    if interrupted:
        return EXIT_INTERRUPTED
    if count < total:
        error_line(f"only {count} of {total} records arrived (idle for {args.idle_timeout:g} s)")
        return 1
    return EXIT_OK


def add_bench_parser(commands: Any, leaf: Leaf) -> None:
    bench = commands.add_parser("bench", help="measure produce or consume throughput")
    actions = bench.add_subparsers(dest="bench_command", metavar="ACTION", parser_class=Parser)
    actions.required = True

    def add_progress(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--progress",
            choices=("auto", "always", "never"),
            default="auto",
            help="progress bar on stderr (auto: when it is a terminal)",
        )

    p = leaf(actions, "produce", cmd_bench_produce, "send N records of a given size")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-n", "--records", type=positive_int, default=100_000)
    p.add_argument("-s", "--record-size", type=positive_int, default=100, help="value bytes")
    add_producer_flags(p, BENCH_PRODUCE_DEFAULTS)
    p.add_argument("--create", action="store_true", help="create the topic if it does not exist")
    add_progress(p)
    p = leaf(actions, "consume", cmd_bench_consume, "read a topic from the beginning")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-n", "--records", type=positive_int, help="default: all records there now")
    p.add_argument("--idle-timeout", type=non_negative_seconds, default=10.0, metavar="SECONDS")
    add_progress(p)
