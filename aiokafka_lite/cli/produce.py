"""The ``produce`` command: lines from stdin or files as records."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import stat
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import IO, Any

from aiokafka_lite import errors
from aiokafka_lite.cli.shared import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    Connection,
    Leaf,
    StopSignal,
    UsageError,
    check_topics,
    describe_error,
    err,
    error_line,
    exit_code_for,
    non_negative_int,
    parse_key_value,
    positive_int,
    rate_summary,
    resolve_connection,
)

__all__ = [
    "CODECS",
    "PRODUCER_FLAGS",
    "PRODUCE_DEFAULTS",
    "add_produce_parser",
    "add_producer_flags",
    "cmd_produce",
    "parse_acks",
    "producer_kwargs",
]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_READ_CHUNK = 1 << 16


def parse_acks(text: str) -> int:
    value = text.strip().lower()
    if value in ("all", "-1"):
        return -1
    if value in ("0", "1"):
        return int(value)
    raise argparse.ArgumentTypeError(f"--acks must be 0, 1, all or -1, got {text!r}")


#: The producer settings produce's flags set (a flag given wins over the config file).
PRODUCER_FLAGS = ("acks", "compression_type", "linger_ms", "max_batch_size")
#: produce's settings where neither a flag nor the config file gives them.
PRODUCE_DEFAULTS: Mapping[str, Any] = {
    "acks": -1,
    "compression_type": "none",
    "linger_ms": 5.0,
    "max_batch_size": 16384,
}


def producer_kwargs(
    conn: Connection, args: argparse.Namespace, defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """The producer's keywords: flags given, over the config file, over ``defaults``."""
    kwargs = {**defaults, **conn.client_kwargs("producer")}
    for key in PRODUCER_FLAGS:
        if getattr(args, key, None) is not None:
            kwargs[key] = getattr(args, key)
    return kwargs


# --- produce -----------------------------------------------------------------------------


async def _read_chunks(stream: IO[bytes], stop: StopSignal) -> AsyncIterator[bytes]:
    """Chunks of a binary stream until its end or a stop signal.

    Terminals and pipes are watched by the event loop, so Ctrl-C works while nothing is
    typed; regular files never block and are read directly.
    """
    loop = asyncio.get_running_loop()
    try:
        fd = stream.fileno()
        waitable = not stat.S_ISREG(os.fstat(fd).st_mode) and sys.platform != "win32"
    except (OSError, ValueError, io.UnsupportedOperation):
        waitable = False
    if waitable:
        # What epoll cannot watch (/dev/null, other character devices: EPERM) never
        # blocks for long either: read it directly, as a regular file.
        try:
            loop.add_reader(fd, lambda: None)
        except (OSError, ValueError):
            waitable = False
        else:
            loop.remove_reader(fd)
    if not waitable:
        read = getattr(stream, "read1", stream.read)
        while not stop.stopped:
            chunk: bytes = read(_READ_CHUNK)
            if not chunk:
                return
            yield chunk
            await asyncio.sleep(0)
        return
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.event.wait())

    def wake(future: asyncio.Future[Any]) -> None:
        if not future.done():
            future.set_result(None)

    try:
        while not stop.stopped:
            readable: asyncio.Future[Any] = loop.create_future()
            loop.add_reader(fd, wake, readable)
            try:
                await asyncio.wait({readable, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                loop.remove_reader(fd)
            if stop.stopped:
                return
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        stopped.cancel()


async def _read_lines(stream: IO[bytes], stop: StopSignal) -> AsyncIterator[bytes]:
    """Lines of a binary stream (without the newline and a trailing carriage return)."""
    # The pieces of an unfinished line, joined once it ends: appending each chunk to
    # one buffer and splitting it again made a long line cost quadratic time (a 30 MB
    # line without a newline took 8 s, 100 MB minutes).
    pending: list[bytes] = []
    async for chunk in _read_chunks(stream, stop):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            line = b"".join((*pending, chunk[start:end]))
            pending.clear()
            yield line[:-1] if line.endswith(b"\r") else line
            start = end + 1
        if start < len(chunk):
            pending.append(chunk[start:])
    if pending and not stop.stopped:
        line = b"".join(pending)
        yield line[:-1] if line.endswith(b"\r") else line


def _open_inputs(files: Sequence[str]) -> list[tuple[str, IO[bytes]]]:
    streams: list[tuple[str, IO[bytes]]] = []
    for name in files:
        if name == "-":
            if sys.stdin is None:  # run with stdin closed (`<&-`)
                raise UsageError("cannot read <stdin>: standard input is closed")
            streams.append(("<stdin>", sys.stdin.buffer))
            continue
        try:
            streams.append((name, open(name, "rb")))
        except OSError as exc:
            for opened, stream in streams:
                if opened != "<stdin>":
                    stream.close()
            raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    return streams


async def cmd_produce(args: argparse.Namespace) -> int:
    conn = resolve_connection(args, "aiokafka-lite-producer")
    headers = [
        (key, value.encode())
        for key, value in (parse_key_value(h, "--header") for h in args.header or ())
    ]
    separator = args.key_separator.encode() if args.key_separator is not None else None
    if separator == b"":
        raise UsageError("--key-separator must not be empty")
    streams = _open_inputs(args.files or ["-"])
    try:
        await check_topics(conn, [args.topic], create=args.create)
        return await _produce(args, conn, streams, separator, headers)
    finally:
        for name, stream in streams:
            if name != "<stdin>":
                stream.close()


async def _produce(
    args: argparse.Namespace,
    conn: Connection,
    streams: list[tuple[str, IO[bytes]]],
    separator: bytes | None,
    headers: list[tuple[str, bytes]],
) -> int:
    from aiokafka_lite.producer import Producer

    producer = Producer(**producer_kwargs(conn, args, PRODUCE_DEFAULTS))
    await producer.start()
    sent = delivered = size = 0
    failures: list[BaseException] = []

    def on_done(fut: asyncio.Future[Any]) -> None:
        nonlocal delivered
        if fut.cancelled():
            failures.append(errors.KafkaError("send cancelled"))
        elif fut.exception() is not None:
            failures.append(fut.exception())  # type: ignore[arg-type]
        else:
            delivered += 1

    started = time.monotonic()
    interrupted = False
    # A line that cannot be sent stops the input; the lines before it are still
    # delivered, and the error says where it stopped and how many were, so a rerun
    # does not produce them twice unknowingly.
    bad_line: tuple[str, BaseException] | None = None
    with StopSignal() as stop:
        try:
            for name, stream in streams:
                number = 0
                async for line in _read_lines(stream, stop):
                    number += 1
                    key: bytes | None = None
                    value = line
                    if separator is not None:
                        key, sep, value = line.partition(separator)
                        if not sep:
                            bad_line = (
                                f"{name}:{number}",
                                CliError(
                                    "no key separator "
                                    f"{separator.decode(errors='replace')!r} in the line"
                                ),
                            )
                            break
                    try:
                        fut = await producer.send(
                            args.topic,
                            value,
                            key=key,
                            partition=args.partition,
                            headers=headers or None,
                        )
                    except errors.KafkaError as exc:
                        bad_line = (f"{name}:{number}", exc)
                        break
                    fut.add_done_callback(on_done)
                    sent += 1
                    size += len(value) + (len(key) if key else 0)
                    if failures:
                        break
                if failures or bad_line or stop.stopped:
                    break
            interrupted = stop.stopped
            await producer.flush()
        finally:
            await producer.stop()
    elapsed = time.monotonic() - started
    if bad_line is not None:
        where, problem = bad_line
        lost = f", {len(failures)} not delivered" if failures else ""
        error_line(
            f"{where}: {describe_error(problem)} (stopped there; {delivered} record"
            f"{'s' if delivered != 1 else ''} before it delivered{lost})"
        )
        return exit_code_for(failures[0] if failures else problem)
    if failures:
        error_line(
            f"{len(failures)} of {sent} records were not delivered: {describe_error(failures[0])}"
        )
        return exit_code_for(failures[0])
    if not args.quiet:
        err(rate_summary("Produced", delivered, size, elapsed, to=args.topic))
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def add_producer_flags(p: argparse.ArgumentParser, defaults: Mapping[str, Any]) -> None:
    """The flags of PRODUCER_FLAGS; the help shows ``defaults``."""
    acks = {-1: "all"}.get(defaults["acks"], defaults["acks"])
    p.add_argument(
        "-z",
        "--codec",
        "--compression",
        dest="compression_type",
        choices=CODECS,
        help=f"compression (default {defaults['compression_type']})",
    )
    p.add_argument("--acks", type=parse_acks, metavar="{0,1,all}", help=f"default {acks}")
    p.add_argument(
        "--linger-ms", type=float, help=f"batching delay (default {defaults['linger_ms']:g})"
    )
    p.add_argument(
        "--batch-size",
        dest="max_batch_size",
        metavar="BATCH_SIZE",
        type=positive_int,
        help=f"bytes per batch (default {defaults['max_batch_size']})",
    )


def add_produce_parser(commands: Any, leaf: Leaf) -> None:
    p = leaf(
        commands,
        "produce",
        cmd_produce,
        "send lines from stdin or files as records",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("files", nargs="*", metavar="FILE", help="input files ('-' or none: stdin)")
    p.add_argument(
        "-k",
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value",
    )
    p.add_argument(
        "-H", "--header", action="append", metavar="KEY=VALUE", help="add a header (repeatable)"
    )
    p.add_argument(
        "-p",
        "--partition",
        type=non_negative_int,
        help="send every record to this partition",
    )
    add_producer_flags(p, PRODUCE_DEFAULTS)
    p.add_argument("--create", action="store_true", help="create the topic if it does not exist")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
