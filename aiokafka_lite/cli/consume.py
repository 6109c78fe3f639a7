"""The ``consume`` command: print the records of topics, alone or in a group."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import select
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aiokafka_lite import errors
from aiokafka_lite.cli.shared import (
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
    non_negative_seconds,
    positive_int,
    resolve_connection,
    timestamp_arg,
)
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "CONSUMER_FLAGS",
    "CONSUME_DEFAULTS",
    "RecordFormatter",
    "add_consume_parser",
    "cmd_consume",
    "consumer_kwargs",
]


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
            # A field's attribute or index ({value.x}, {offset[0]}) fails with
            # AttributeError / TypeError: a bad template too, not a traceback.
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
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
        offset = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--offset must be earliest, latest, N, or -N (N before the end), got {text!r}"
        ) from None
    if not -(2**63) < offset < 2**63:  # offsets are INT64: a fetch past that cannot be sent
        raise argparse.ArgumentTypeError(f"--offset must be within +-(2^63 - 1), got {text!r}")
    return offset


def _reader_gone(out: Any) -> bool:
    """Whether ``out`` is a pipe whose reading end is closed (``| head`` exited).

    A write would fail, but with no new record none comes: without this check an idle
    topic keeps the command, and the shell waiting for its pipeline, running forever.
    """
    try:
        fd = out.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        # A pipe without readers polls as POLLERR.
        return any(ev & select.POLLERR for _fd, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _write_lines(out: Any, lines: Sequence[bytes]) -> tuple[int, bool]:
    """Write ``lines`` to ``out``: how many were written whole, and whether the pipe broke.

    A line is printed once the kernel has it: a line left in stdout's buffer when the
    reader goes away (`| head`) never reaches anyone, so the lines go to the file
    descriptor directly, and a short write says exactly which of them got through.
    """
    if not lines:
        return 0, False
    try:
        fd = out.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    if fd is None:
        # No descriptor (an in-memory stream): a line counts once flushed.
        try:
            for line in lines:
                out.write(line)
            out.flush()
        except BrokenPipeError:
            return 0, True
        return len(lines), False
    try:
        out.flush()  # whatever else went to stdout first, so the order stays
    except BrokenPipeError:
        return 0, True
    data = memoryview(b"".join(lines))
    done = 0
    try:
        while done < len(data):
            try:
                done += os.write(fd, data[done:])
            except BlockingIOError:  # a non-blocking stdout: wait until it takes more
                select.select([], [fd], [])
    except BrokenPipeError:
        whole = 0
        end = 0
        for line in lines:
            end += len(line)
            if end > done:
                break
            whole += 1
        return whole, True
    return len(lines), False


async def _position_explicitly(
    consumer: Any,
    admin_conn: Connection,
    args: argparse.Namespace,
    topics: Sequence[str],
    *,
    group: str | None,
    reset: str,
    isolation: Literal["read_uncommitted", "read_committed"],
) -> list[TopicPartition]:
    """Assign partitions and seek them as --partition/--offset/--timestamp ask.

    Without a position asked for and without a group, ``reset`` says where to start.
    Offsets are looked up at the consumer's ``isolation`` level: with read_committed,
    the end (for -N) is the last stable offset, not the high watermark.
    """
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
                {tp: OffsetSpec.for_timestamp(args.timestamp) for tp in tps},
                isolation_level=isolation,
            )
            ends = None
            for tp in tps:
                error = found[tp].error
                if error is not None:
                    raise error
                offset = found[tp].offset
                if offset is None:  # no record at or after the time: start at the end
                    if ends is None:
                        ends = await admin.list_offsets(
                            {t: "latest" for t in tps}, isolation_level=isolation
                        )
                    offset = ends[tp].offset or 0
                positions[tp] = offset
        elif isinstance(args.offset, int) and args.offset < 0:
            ends = await admin.list_offsets({tp: "latest" for tp in tps}, isolation_level=isolation)
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
    if spec is None and args.timestamp is None and not group:
        spec = "earliest" if reset == "earliest" else "latest"
    if spec == "earliest":
        await consumer.seek_to_beginning(*tps)
    elif spec == "latest":
        await consumer.seek_to_end(*tps)
    # Otherwise (a group, no position asked): the group's committed offsets, or the
    # reset policy where it has none.
    return tps


#: The consumer settings consume's flags set (a flag given wins over the config file).
CONSUMER_FLAGS = ("isolation_level", "session_timeout_ms")
#: consume's settings where neither a flag nor the config file gives them.
CONSUME_DEFAULTS: Mapping[str, Any] = {
    "isolation_level": "read_uncommitted",
    "session_timeout_ms": 10000,
}


def consumer_kwargs(conn: Connection, args: argparse.Namespace) -> dict[str, Any]:
    """The consumer's keywords: flags given, over the config file, over CONSUME_DEFAULTS.

    The config file's group.id and auto.offset.reset stand in for --group and
    --from-beginning; consume commits what it printed itself (enable.auto.commit off).
    """
    if "enable_auto_commit" in conn.settings:
        raise UsageError(
            "enable.auto.commit does not apply to consume: with a group it commits the "
            "offsets of the records it printed"
        )
    kwargs = {**CONSUME_DEFAULTS, **conn.client_kwargs("consumer")}
    for key in CONSUMER_FLAGS:
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    reset = "earliest" if args.from_beginning else conn.settings.get("auto_offset_reset", "latest")
    kwargs.update(
        group_id=args.group or conn.settings.get("group_id"),
        enable_auto_commit=False,
        auto_offset_reset=reset,
    )
    return kwargs


async def cmd_consume(args: argparse.Namespace) -> int:
    from aiokafka_lite.consumer import Consumer

    conn = resolve_connection(args, "aiokafka-lite-consumer")
    formatter = RecordFormatter(args.format, args.encoding)
    explicit = bool(args.partition) or args.offset is not None or args.timestamp is not None
    if args.offset is not None and args.timestamp is not None:
        raise UsageError("give --offset or --timestamp, not both")
    if args.from_beginning and (args.offset is not None or args.timestamp is not None):
        raise UsageError("--from-beginning cannot be combined with --offset or --timestamp")
    kwargs = consumer_kwargs(conn, args)
    group: str | None = kwargs["group_id"]
    reset: str = kwargs["auto_offset_reset"]
    topics: list[str] = list(dict.fromkeys(args.topics))
    await check_topics(conn, topics)
    if not group and not explicit:
        explicit = True  # without a group, read every partition directly
    consumer = Consumer(**kwargs)
    await consumer.start()
    out = sys.stdout.buffer
    printed: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}
    count = 0
    status = EXIT_OK
    last_record = time.monotonic()
    last_commit = time.monotonic()

    async def commit(final: bool = False) -> None:
        nonlocal committed
        if not group:
            return
        todo = {tp: off for tp, off in printed.items() if committed.get(tp) != off}
        if final:
            # A partition the group gave us but nothing was printed from (-n reached on
            # another partition): its position is where this run started (the reset of
            # --from-beginning, say). Committed, the next run starts there too, instead
            # of resetting again (to the end by default) past records never printed.
            # Concurrently: one bounded wait in all, even with the cluster gone.
            unprinted = [tp for tp in consumer.assignment() - printed.keys() if tp not in committed]
            found = await asyncio.gather(
                *(consumer.position(tp, timeout_ms=2000) for tp in unprinted),
                return_exceptions=True,
            )
            for tp, position in zip(unprinted, found, strict=True):
                if isinstance(position, int):  # else no position known: nothing to keep
                    todo[tp] = position
        if todo:
            await consumer.commit(todo)
            committed = {**committed, **todo}

    try:
        with StopSignal() as stop:
            if explicit:
                await _position_explicitly(
                    consumer,
                    conn,
                    args,
                    topics,
                    group=group,
                    reset=reset,
                    isolation=kwargs["isolation_level"],
                )
            else:
                consumer.subscribe(topics)
            while not stop.stopped:
                if args.max_records is not None and count >= args.max_records:
                    break
                batch_limit = None if args.max_records is None else args.max_records - count
                batches = await consumer.getmany(timeout_ms=200, max_records=batch_limit)
                now = time.monotonic()
                lines = [(tp, r) for tp, records in batches.items() for r in records]
                written, broken = _write_lines(out, [formatter(r) for _tp, r in lines])
                for tp, record in lines[:written]:
                    printed[tp] = record.offset + 1
                count += written
                if broken:
                    # Each partition with a record not written is committed at its first
                    # such record (not at the consumer's position, past the whole batch).
                    for tp, record in reversed(lines[written:]):
                        printed[tp] = record.offset
                    break
                if batches:
                    last_record = now
                elif _reader_gone(out):
                    break
                elif args.idle_timeout is not None and now - last_record >= args.idle_timeout:
                    break
                if group and now - last_commit >= 2.0:
                    await commit()
                    last_commit = now
            try:
                await commit(final=True)
            except errors.KafkaError as exc:
                error_line(f"could not commit the printed offsets: {describe_error(exc)}")
                status = exit_code_for(exc)
    finally:
        await consumer.stop()
    if not args.quiet:
        err(f"Consumed {count} record{'s' if count != 1 else ''}.")
    return status


def add_consume_parser(commands: Any, leaf: Leaf) -> None:
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
        type=timestamp_arg,
        metavar="TIME",
        help="start at the first record at/after TIME (ms since the epoch or ISO 8601)",
    )
    p.add_argument("-n", "--max-records", type=positive_int, help="stop after N records")
    p.add_argument(
        "--idle-timeout",
        type=non_negative_seconds,
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
        help="default read_uncommitted",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=positive_int,
        help="group session timeout (default 10000, as aiokafka's)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
