"""The ``produce`` and ``consume`` commands of the ``aiokafka-lite`` tool."""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import IO, Any

from aiokafka_lite import errors
from aiokafka_lite.cli import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    Connection,
    StopSignal,
    UsageError,
    _positive_int,
    _timestamp_arg,
    describe_error,
    err,
    error_line,
    exit_code_for,
    parse_key_value,
    resolve_connection,
)
from aiokafka_lite.structs import TopicPartition

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_READ_CHUNK = 1 << 16


# --- shared ------------------------------------------------------------------------------


def format_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop always returns


def rate_summary(verb: str, records: int, size: int, seconds: float, to: str = "") -> str:
    """``Produced 10 records (1.2 KiB) to t in 0.05 s: 200 records/s, 0.02 MB/s``."""
    seconds = max(seconds, 1e-9)
    where = f" {'to' if verb == 'Produced' else 'from'} {to}" if to else ""
    return (
        f"{verb} {records} record{'s' if records != 1 else ''} ({format_size(size)}){where} "
        f"in {seconds:.2f} s: {records / seconds:,.0f} records/s, "
        f"{size / seconds / 1e6:.2f} MB/s"
    )


def parse_acks(text: str) -> int:
    value = text.strip().lower()
    if value in ("all", "-1"):
        return -1
    if value in ("0", "1"):
        return int(value)
    raise argparse.ArgumentTypeError(f"--acks must be 0, 1, all or -1, got {text!r}")


async def check_topics(conn: Connection, topics: Sequence[str], create: bool = False) -> None:
    """Fail with a clear error for topics that do not exist (or create them)."""
    from aiokafka_lite.admin import AdminClient, NewTopic

    async with AdminClient(**conn.client_kwargs()) as admin:
        described = await admin.describe_topics(topics)
        missing = [
            name
            for name, d in described.items()
            if isinstance(d.error, errors.UnknownTopicOrPartitionError)
        ]
        for d in described.values():
            if d.error is not None and d.name not in missing:
                raise d.error
        if missing and create:
            created = await admin.create_topics([NewTopic(name) for name in missing])
            for result in created.values():
                if result.error is not None and not isinstance(
                    result.error, errors.TopicAlreadyExistsError
                ):
                    raise result.error
            missing = []
    if missing:
        raise CliError(
            f"topic {missing[0]!r} does not exist "
            f"(create it with `aiokafka-lite topics create {missing[0]}`)"
        )


def producer_kwargs(conn: Connection, args: argparse.Namespace) -> dict[str, Any]:
    kwargs = conn.client_kwargs()
    kwargs.update(
        acks=args.acks,
        compression_type=args.codec,
        linger_ms=args.linger_ms,
        max_batch_size=args.batch_size,
    )
    return kwargs


# --- produce -----------------------------------------------------------------------------


async def _read_chunks(stream: IO[bytes], stop: StopSignal) -> AsyncIterator[bytes]:
    """Chunks of a binary stream until its end or a stop signal.

    Terminals and pipes are watched by the event loop, so Ctrl-C works while nothing is
    typed; regular files never block and are read directly.
    """
    try:
        fd = stream.fileno()
        waitable = not stat.S_ISREG(os.fstat(fd).st_mode) and sys.platform != "win32"
    except (OSError, ValueError, io.UnsupportedOperation):
        waitable = False
    if not waitable:
        read = getattr(stream, "read1", stream.read)
        while not stop.stopped:
            chunk: bytes = read(_READ_CHUNK)
            if not chunk:
                return
            yield chunk
            await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
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
    pending = b""
    async for chunk in _read_chunks(stream, stop):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending and not stop.stopped:
        yield pending[:-1] if pending.endswith(b"\r") else pending


def _open_inputs(files: Sequence[str]) -> list[tuple[str, IO[bytes]]]:
    streams: list[tuple[str, IO[bytes]]] = []
    for name in files:
        if name == "-":
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

    producer = Producer(**producer_kwargs(conn, args))
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
                            raise CliError(
                                f"{name}:{number}: no key separator "
                                f"{separator.decode(errors='replace')!r} in the line"
                            )
                    fut = await producer.send(
                        args.topic,
                        value,
                        key=key,
                        partition=args.partition,
                        headers=headers or None,
                    )
                    fut.add_done_callback(on_done)
                    sent += 1
                    size += len(value) + (len(key) if key else 0)
                    if failures:
                        break
                if failures or stop.stopped:
                    break
            interrupted = stop.stopped
            await producer.flush()
        finally:
            await producer.stop()
    elapsed = time.monotonic() - started
    if failures:
        error_line(
            f"{len(failures)} of {sent} records were not delivered: {describe_error(failures[0])}"
        )
        return exit_code_for(failures[0])
    if not args.quiet:
        err(rate_summary("Produced", delivered, size, elapsed, to=args.topic))
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def add_produce_parser(commands: Any, leaf: Callable[..., argparse.ArgumentParser]) -> None:
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
    p.add_argument("-p", "--partition", type=int, help="send every record to this partition")
    p.add_argument("-z", "--codec", "--compression", dest="codec", choices=CODECS, default="none")
    p.add_argument("--acks", type=parse_acks, default=-1, metavar="{0,1,all}", help="default all")
    p.add_argument("--linger-ms", type=float, default=5.0, help="batching delay (default 5)")
    p.add_argument("--batch-size", type=_positive_int, default=16384, help="bytes per batch")
    p.add_argument("--create", action="store_true", help="create the topic if it does not exist")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")


# --- consume -----------------------------------------------------------------------------


def _unescape(template: str) -> str:
    return template.replace("\\t", "\t").replace("\\n", "\n").replace("\\\\", "\\")


class RecordFormatter:
    """Turns a consumed record into the bytes of one output line."""

    def __init__(self, fmt: str, encoding: str) -> None:
        self.fmt = fmt
        self.encoding = encoding
        self.template = _unescape(fmt) if fmt not in ("plain", "json") else None
        if self.template is not None:
            try:
                self.template.format_map(_FIELDS_PROBE)
            except (KeyError, IndexError, ValueError) as exc:
                raise UsageError(
                    f"bad --format template {fmt!r} ({exc}); fields: "
                    + ", ".join("{" + k + "}" for k in _FIELDS_PROBE)
                ) from None

    def text(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        if self.encoding == "base64":
            return base64.b64encode(data).decode()
        if self.encoding == "hex":
            return data.hex()
        return data.decode("utf-8", "replace")

    def __call__(self, record: Any) -> bytes:
        if self.fmt == "plain":
            value = record.value
            if value is None:
                return b"\n"
            return (value if self.encoding == "text" else (self.text(value) or "").encode()) + b"\n"
        headers = [[k, self.text(v)] for k, v in record.headers or ()]
        if self.template is None:
            line = json.dumps(
                {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": self.text(record.key),
                    "value": self.text(record.value),
                    "headers": headers,
                },
                ensure_ascii=False,
            )
        else:
            line = self.template.format_map(
                {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": self.text(record.key) or "",
                    "value": self.text(record.value) or "",
                    "headers": ",".join(f"{k}={v or ''}" for k, v in headers),
                }
            )
        return line.encode("utf-8", "replace") + b"\n"


_FIELDS_PROBE = {
    "topic": "",
    "partition": 0,
    "offset": 0,
    "timestamp": 0,
    "key": "",
    "value": "",
    "headers": "",
}


def _parse_offset(text: str) -> str | int:
    value = text.strip().lower()
    if value in ("earliest", "beginning"):
        return "earliest"
    if value in ("latest", "end"):
        return "latest"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--offset must be earliest, latest, N, or -N (N before the end), got {text!r}"
        ) from None


async def _position_explicitly(
    consumer: Any, admin_conn: Connection, args: argparse.Namespace, topics: Sequence[str]
) -> list[TopicPartition]:
    """Assign partitions and seek them as --partition/--offset/--timestamp ask."""
    from aiokafka_lite.admin import AdminClient, OffsetSpec

    async with AdminClient(**admin_conn.client_kwargs()) as admin:
        described = await admin.describe_topics(topics)
        tps: list[TopicPartition] = []
        for name, d in described.items():
            if d.error is not None:
                raise d.error
            existing = {p.partition for p in d.partitions}
            chosen = existing if not args.partition else set(args.partition)
            missing = sorted(chosen - existing)
            if missing:
                raise CliError(f"topic {name!r} has no partition {missing[0]}")
            tps.extend(TopicPartition(name, p) for p in sorted(chosen))
        positions: dict[TopicPartition, int] = {}
        if args.timestamp is not None:
            found = await admin.list_offsets(
                {tp: OffsetSpec.for_timestamp(args.timestamp) for tp in tps}
            )
            ends = None
            for tp in tps:
                error = found[tp].error
                if error is not None:
                    raise error
                offset = found[tp].offset
                if offset is None:  # no record at or after the time: start at the end
                    if ends is None:
                        ends = await admin.list_offsets({t: "latest" for t in tps})
                    offset = ends[tp].offset or 0
                positions[tp] = offset
        elif isinstance(args.offset, int) and args.offset < 0:
            ends = await admin.list_offsets({tp: "latest" for tp in tps})
            starts = await admin.list_offsets({tp: "earliest" for tp in tps})
            for tp in tps:
                for r in (ends[tp], starts[tp]):
                    if r.error is not None:
                        raise r.error
                positions[tp] = max((ends[tp].offset or 0) + args.offset, starts[tp].offset or 0)
        elif isinstance(args.offset, int):
            positions = dict.fromkeys(tps, args.offset)
    consumer.assign(tps)
    for tp, offset in positions.items():
        consumer.seek(tp, offset)
    spec = args.offset
    if spec is None and args.timestamp is None and not args.group:
        spec = "earliest" if args.from_beginning else "latest"
    if spec == "earliest":
        await consumer.seek_to_beginning(*tps)
    elif spec == "latest":
        await consumer.seek_to_end(*tps)
    # Otherwise (a group, no position asked): the group's committed offsets, or the
    # reset policy where it has none.
    return tps


async def cmd_consume(args: argparse.Namespace) -> int:
    from aiokafka_lite.consumer import Consumer

    conn = resolve_connection(args, "aiokafka-lite-consumer")
    formatter = RecordFormatter(args.format, args.encoding)
    explicit = bool(args.partition) or args.offset is not None or args.timestamp is not None
    if args.offset is not None and args.timestamp is not None:
        raise UsageError("give --offset or --timestamp, not both")
    if args.from_beginning and (args.offset is not None or args.timestamp is not None):
        raise UsageError("--from-beginning cannot be combined with --offset or --timestamp")
    topics: list[str] = list(dict.fromkeys(args.topics))
    await check_topics(conn, topics)
    if not args.group and not explicit:
        explicit = True  # without a group, read every partition directly

    kwargs = conn.client_kwargs()
    kwargs.update(
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level=args.isolation_level,
        session_timeout_ms=args.session_timeout_ms,
    )
    consumer = Consumer(**kwargs)
    await consumer.start()
    out = sys.stdout.buffer
    printed: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}
    count = 0
    status = EXIT_OK
    last_record = time.monotonic()
    last_commit = time.monotonic()

    async def commit() -> None:
        nonlocal committed
        if not args.group:
            return
        todo = {tp: off for tp, off in printed.items() if committed.get(tp) != off}
        if todo:
            await consumer.commit(todo)
            committed = {**committed, **todo}

    try:
        with StopSignal() as stop:
            if explicit:
                await _position_explicitly(consumer, conn, args, topics)
            else:
                consumer.subscribe(topics)
            pipe_closed = False
            while not stop.stopped:
                if args.max_records is not None and count >= args.max_records:
                    break
                batch_limit = None if args.max_records is None else args.max_records - count
                batches = await consumer.getmany(timeout_ms=200, max_records=batch_limit)
                now = time.monotonic()
                for tp, records in batches.items():
                    for record in records:
                        try:
                            out.write(formatter(record))
                        except BrokenPipeError:
                            pipe_closed = True
                            break
                        printed[tp] = record.offset + 1
                        count += 1
                    if pipe_closed:
                        break
                if pipe_closed:
                    break
                try:
                    out.flush()
                except BrokenPipeError:
                    break
                if batches:
                    last_record = now
                elif args.idle_timeout is not None and now - last_record >= args.idle_timeout:
                    break
                if args.group and now - last_commit >= 2.0:
                    await commit()
                    last_commit = now
            try:
                await commit()
            except errors.KafkaError as exc:
                error_line(f"could not commit the printed offsets: {describe_error(exc)}")
                status = exit_code_for(exc)
    finally:
        await consumer.stop()
    if not args.quiet:
        err(f"Consumed {count} record{'s' if count != 1 else ''}.")
    return status


def add_consume_parser(commands: Any, leaf: Callable[..., argparse.ArgumentParser]) -> None:
    p = leaf(
        commands,
        "consume",
        cmd_consume,
        "print records of topics (Ctrl-C stops; with --group, printed records are committed)",
    )
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-g", "--group", help="consume as a member of this group")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with a group: where it has no committed offset)",
    )
    p.add_argument(
        "-p", "--partition", type=int, action="append", help="read only this partition (repeatable)"
    )
    p.add_argument(
        "-o",
        "--offset",
        type=_parse_offset,
        help="start at earliest, latest, an offset N, or -N (N before the end)",
    )
    p.add_argument(
        "--timestamp",
        type=_timestamp_arg,
        metavar="TIME",
        help="start at the first record at/after TIME (ms since the epoch or ISO 8601)",
    )
    p.add_argument("-n", "--max-records", type=_positive_int, help="stop after N records")
    p.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="stop when no record arrives for this long",
    )
    p.add_argument(
        "-f",
        "--format",
        default="plain",
        metavar="FORMAT",
        help="plain (values), json (JSON lines: topic, partition, offset, timestamp, key, "
        "value, headers), or a template such as '{offset}: {key}={value}'",
    )
    p.add_argument(
        "--encoding",
        choices=("text", "base64", "hex"),
        default="text",
        help="how keys, values and header values are printed (default UTF-8 text)",
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=_positive_int,
        default=10000,
        help="group session timeout (default 10000, as aiokafka's)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


__all__ = ["add_consume_parser", "add_produce_parser", "format_size", "rate_summary"]
