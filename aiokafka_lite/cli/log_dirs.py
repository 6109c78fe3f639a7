"""The ``log-dirs`` command: each broker's log directories and the replicas in them,
with their size on disk (kafka-log-dirs.sh's view)."""

from __future__ import annotations

import argparse
from typing import Any

from aiokafka_lite.cli.shared import (
    Leaf,
    admin_client,
    non_negative_int,
    out,
    print_json,
    report_items,
    table,
    topic_partitions,
    topic_partitions_arg,
)

__all__ = ["add_log_dirs_parser", "cmd_log_dirs"]

_HEADERS = ("BROKER", "LOG-DIR", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE")


async def cmd_log_dirs(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        partitions = await topic_partitions(admin, args.topic) if args.topic else None
        found = await admin.describe_log_dirs(args.broker or None, partitions)
    finally:
        await admin.close()
    rows = []
    for broker_id, broker in sorted(found.items()):
        for path, log_dir in sorted(broker.log_dirs.items()):
            for tp, replica in sorted(log_dir.replicas.items()):
                rows.append(
                    (
                        broker_id,
                        path,
                        tp.topic,
                        tp.partition,
                        replica.size,
                        replica.offset_lag,
                        "yes" if replica.is_future else "no",
                    )
                )
    if args.json:
        keys = [h.lower().replace("-", "_") for h in _HEADERS]
        for row in rows:
            record = dict(zip(keys, row, strict=True))
            record["future"] = row[-1] == "yes"
            print_json(record)
    else:
        for line in table(rows, _HEADERS):
            out(line)
    # A broker or a directory that failed: an error line each, and the exit status.
    status = report_items(found, lambda broker_id: None)
    for broker in found.values():
        status = max(status, report_items(broker.log_dirs, lambda path: None))
    return status


def add_log_dirs_parser(commands: Any, leaf: Leaf) -> None:
    p = leaf(
        commands,
        "log-dirs",
        cmd_log_dirs,
        "brokers' log directories: the replicas in each, with their size",
    )
    p.add_argument(
        "--broker", action="append", type=non_negative_int, metavar="ID", help="(default: all)"
    )
    p.add_argument(
        "--topic",
        action="append",
        type=topic_partitions_arg,
        metavar="TOPIC[:P,...]",
        help="only these replicas (repeatable; default: every replica)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per replica")
