"""The ``groups`` commands: list, describe, lag, reset-offsets, delete."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.cli.shared import (
    EXIT_OK,
    CliError,
    Leaf,
    Parser,
    UsageError,
    admin_client,
    describe_error,
    err,
    error_line,
    exit_code_for,
    non_negative_int,
    out,
    parse_topic_partitions,
    print_json,
    report_items,
    table,
    timestamp_arg,
    topic_partitions_arg,
)

__all__ = [
    "add_groups_parser",
    "cmd_groups_delete",
    "cmd_groups_describe",
    "cmd_groups_lag",
    "cmd_groups_list",
    "cmd_groups_reset_offsets",
]


async def cmd_groups_list(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        groups = await admin.list_consumer_groups(states=args.state or None)
    finally:
        await admin.close()
    if args.json:
        for g in groups:
            print_json(
                {
                    "group": g.group_id,
                    "state": g.state,
                    "protocol_type": g.protocol_type,
                    "coordinator": g.coordinator_id,
                }
            )
    elif args.state:
        for line in table([(g.group_id, g.state) for g in groups], ("GROUP", "STATE")):
            out(line)
    else:
        for g in groups:
            out(g.group_id)
    return EXIT_OK


def _tps_text(tps: Iterable[Any]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


async def cmd_groups_describe(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        results = await admin.describe_consumer_groups(args.groups)
    finally:
        await admin.close()
    status = EXIT_OK
    for group_id, d in results.items():
        if d.error is not None:
            error_line(describe_error(d.error))
            status = exit_code_for(d.error)
            continue
        if args.json:
            print_json(
                {
                    "group": group_id,
                    "state": d.state,
                    "protocol_type": d.protocol_type,
                    "protocol": d.protocol,
                    "coordinator": None if d.coordinator is None else d.coordinator.node_id,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "host": m.client_host,
                            "subscription": list(m.subscription),
                            "assignment": [[tp.topic, tp.partition] for tp in m.assignment],
                        }
                        for m in d.members
                    ],
                }
            )
            continue
        coordinator = (
            "-"
            if d.coordinator is None
            else f"{d.coordinator.node_id} ({d.coordinator.host}:{d.coordinator.port})"
        )
        out(
            f"Group: {group_id}\tState: {d.state}\tProtocol: {d.protocol_type or '-'}"
            f"/{d.protocol or '-'}\tMembers: {len(d.members)}\tCoordinator: {coordinator}"
        )
        if d.members:
            rows = [
                (m.member_id, m.client_id, m.client_host, _tps_text(m.assignment) or "-")
                for m in d.members
            ]
            for line in table(rows, ("MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT")):
                out("  " + line)
    return status


async def cmd_groups_lag(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        described = await admin.describe_consumer_groups([args.group])
        description = described[args.group]
        if isinstance(description.error, errors.GroupIdNotFoundError):
            offsets = await admin.list_consumer_group_offsets(args.group)
            if not offsets:
                raise CliError(describe_error(description.error))
        lag = await admin.consumer_group_lag(args.group)
    finally:
        await admin.close()
    status = EXIT_OK
    rows = []
    for tp, entry in lag.items():
        if entry.error is not None:
            error_line(describe_error(entry.error))
            status = exit_code_for(entry.error)
        if args.json:
            print_json(
                {
                    "group": args.group,
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed_offset": entry.committed_offset,
                    "end_offset": entry.end_offset,
                    "lag": entry.lag,
                    "member_id": entry.member_id,
                    "client_id": entry.client_id,
                    "host": entry.client_host,
                }
            )
            continue
        rows.append(
            (
                tp.topic,
                tp.partition,
                entry.committed_offset,
                entry.end_offset,
                entry.lag,
                entry.member_id,
                entry.client_host,
                entry.client_id,
            )
        )
    if not args.json:
        headers = (
            "TOPIC",
            "PARTITION",
            "COMMITTED",
            "END-OFFSET",
            "LAG",
            "MEMBER-ID",
            "HOST",
            "CLIENT-ID",
        )
        for line in table(rows, headers):
            out(line)
        total = sum(e.lag or 0 for e in lag.values())
        out(f"Total lag of group {args.group}: {total}")
    return status


async def cmd_groups_reset_offsets(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import OffsetSpec
    from aiokafka_lite.structs import TopicPartition

    if not args.topic and not args.all_topics:
        raise UsageError("give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    admin = await admin_client(args)
    try:
        if args.execute:
            # The broker refuses a group with members, as UNKNOWN_MEMBER_ID per
            # partition, which does not say why: say it, as Kafka's tool does.
            description = (await admin.describe_consumer_groups([args.group]))[args.group]
            if description.error is None and description.members:
                count = len(description.members)
                raise CliError(
                    f"group {args.group!r} has {count} active member{'s' if count != 1 else ''} "
                    f"(state {description.state}): its offsets can be reset only when it has "
                    "none; stop its consumers first"
                )
        committed = await admin.list_consumer_group_offsets(args.group)
        targets: list[TopicPartition] = []
        if args.all_topics:
            targets = sorted(committed)
            if not targets:
                raise CliError(f"group {args.group!r} has no committed offsets to reset")
        else:
            topics = [parse_topic_partitions(spec) for spec in args.topic]
            described = await admin.describe_topics(sorted({t for t, _ in topics}))
            for topic, parts in topics:
                d = described[topic]
                if d.error is not None:
                    raise CliError(describe_error(d.error), exit_code_for(d.error))
                existing = {p.partition for p in d.partitions}
                chosen = existing if parts is None else set(parts)
                missing = chosen - existing
                if missing:
                    raise CliError(
                        f"topic {topic!r} has no partition {min(missing)} (it has {len(existing)})"
                    )
                targets.extend(TopicPartition(topic, p) for p in sorted(chosen))
        # Where each partition should go.
        if args.to_offset is not None or args.shift_by is not None:
            bounds_e = await admin.list_offsets({tp: "earliest" for tp in targets})
            bounds_l = await admin.list_offsets({tp: "latest" for tp in targets})
            new: dict[TopicPartition, int] = {}
            for tp in targets:
                for r in (bounds_e[tp], bounds_l[tp]):
                    if r.error is not None:
                        raise CliError(describe_error(r.error), exit_code_for(r.error))
                low, high = bounds_e[tp].offset or 0, bounds_l[tp].offset or 0
                if args.to_offset is not None:
                    wanted = args.to_offset
                else:
                    base = committed[tp].offset if tp in committed else low
                    wanted = base + args.shift_by
                new[tp] = min(max(wanted, low), high)
        else:
            if args.to_earliest:
                spec = OffsetSpec.earliest()
            elif args.to_latest:
                spec = OffsetSpec.latest()
            else:
                spec = OffsetSpec.for_timestamp(args.to_datetime)
            found = await admin.list_offsets({tp: spec for tp in targets})
            new = {}
            latest = None
            for tp in targets:
                r = found[tp]
                if r.error is not None:
                    raise CliError(describe_error(r.error), exit_code_for(r.error))
                if r.offset is None:  # no record at/after the time: go to the end
                    if latest is None:
                        latest = await admin.list_offsets({t: "latest" for t in targets})
                    r = latest[tp]
                new[tp] = r.offset or 0
        rows = [
            (tp.topic, tp.partition, committed[tp].offset if tp in committed else None, new[tp])
            for tp in targets
        ]
        for line in table(rows, ("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")):
            out(line)
        if not args.execute:
            err("Dry run: nothing changed. Add --execute to apply these offsets.")
            return EXIT_OK
        results = await admin.alter_consumer_group_offsets(args.group, new)
    finally:
        await admin.close()
    status = report_items(results, lambda tp: None)
    if status == EXIT_OK:
        err(f"Reset offsets of group {args.group} on {len(new)} partition(s).")
    return status


async def cmd_groups_delete(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        results = await admin.delete_consumer_groups(args.groups)
    finally:
        await admin.close()
    return report_items(results, lambda g: f"Deleted group {g}.")


def add_groups_parser(commands: Any, leaf: Leaf) -> None:
    groups = commands.add_parser("groups", help="list, describe, lag, reset offsets, delete")
    group_cmds = groups.add_subparsers(dest="groups_command", metavar="ACTION", parser_class=Parser)
    group_cmds.required = True
    p = leaf(group_cmds, "list", cmd_groups_list, "list consumer groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.add_argument("--json", action="store_true")
    p = leaf(group_cmds, "describe", cmd_groups_describe, "state, protocol, members, assignment")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.add_argument("--json", action="store_true")
    p = leaf(group_cmds, "lag", cmd_groups_lag, "committed offset, end offset and lag")
    p.add_argument("group", metavar="GROUP")
    p.add_argument("--json", action="store_true", help="one JSON object per partition")
    p = leaf(
        group_cmds,
        "reset-offsets",
        cmd_groups_reset_offsets,
        "move a group's committed offsets (a dry run unless --execute)",
    )
    p.add_argument("group", metavar="GROUP")
    p.add_argument(
        "--topic",
        action="append",
        type=topic_partitions_arg,
        metavar="TOPIC[:P,...]",
        help="topic, optionally with partitions (repeatable)",
    )
    p.add_argument("--all-topics", action="store_true", help="every topic with committed offsets")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=non_negative_int, metavar="N")
    where.add_argument(
        "--to-datetime",
        type=timestamp_arg,
        metavar="TIME",
        help="ISO 8601 (UTC unless a zone is given) or ms since the epoch",
    )
    where.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be negative)")
    p.add_argument("--execute", action="store_true", help="apply the new offsets")
    p = leaf(group_cmds, "delete", cmd_groups_delete, "delete empty groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")
