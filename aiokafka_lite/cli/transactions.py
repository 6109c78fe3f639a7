"""The ``transactions`` commands: list, describe, producers (kafka-transactions.sh's
views, to find a transaction left open)."""

from __future__ import annotations

import argparse
from typing import Any

from aiokafka_lite.cli.shared import (
    EXIT_OK,
    Leaf,
    Parser,
    admin_client,
    int64_non_negative,
    out,
    print_json,
    report_items,
    table,
    topic_partitions,
    topic_partitions_arg,
)

__all__ = [
    "add_transactions_parser",
    "cmd_transactions_describe",
    "cmd_transactions_list",
    "cmd_transactions_producers",
]


async def cmd_transactions_list(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        listed = await admin.list_transactions(
            states=args.state, producer_ids=args.producer_id, min_duration_ms=args.min_duration_ms
        )
    finally:
        await admin.close()
    rows = [(t.transactional_id, t.producer_id, t.state, t.coordinator_id) for t in listed]
    headers = ("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR")
    if args.json:
        for row in rows:
            keys = ("transactional_id", "producer_id", "state", "coordinator")
            print_json(dict(zip(keys, row, strict=True)))
    else:
        for line in table(rows, headers):
            out(line)
    return EXIT_OK


async def cmd_transactions_describe(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        described = await admin.describe_transactions(args.transactional_ids)
    finally:
        await admin.close()
    found = {tid: d for tid, d in described.items() if d.error is None}
    if args.json:
        for d in found.values():
            print_json(
                {
                    "transactional_id": d.transactional_id,
                    "state": d.state,
                    "producer_id": d.producer_id,
                    "producer_epoch": d.producer_epoch,
                    "timeout_ms": d.timeout_ms,
                    "start_time_ms": d.start_time_ms,
                    "partitions": [f"{tp.topic}-{tp.partition}" for tp in d.partitions],
                    "coordinator": d.coordinator_id,
                }
            )
    else:
        rows = [
            (
                d.transactional_id,
                d.state,
                d.producer_id,
                d.producer_epoch,
                d.timeout_ms,
                d.start_time_ms,
                ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions) or None,
            )
            for d in found.values()
        ]
        headers = ("TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS")
        for line in table(rows, (*headers, "START-TIME-MS", "PARTITIONS")):
            out(line)
    # Unknown ids: one error line each, and the exit status says so.
    return report_items(described, lambda tid: None)


async def cmd_transactions_producers(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        partitions = await topic_partitions(admin, args.topic)
        found = await admin.describe_producers(partitions)
    finally:
        await admin.close()
    rows = [
        (
            tp.topic,
            tp.partition,
            s.producer_id,
            s.producer_epoch,
            s.last_sequence,
            s.last_timestamp,
            s.current_transaction_start_offset,
        )
        for tp, result in found.items()
        if result.error is None
        for s in result.active_producers
    ]
    headers = ("TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP")
    if args.json:
        keys = [h.lower().replace("-", "_") for h in headers] + ["txn_start_offset"]
        for row in rows:
            print_json(dict(zip(keys, row, strict=True)))
    else:
        for line in table(rows, (*headers, "TXN-START-OFFSET")):
            out(line)
    # Partitions that failed: one error line each, and the exit status says so.
    return report_items(found, lambda tp: None)


def add_transactions_parser(commands: Any, leaf: Leaf) -> None:
    txns = commands.add_parser(
        "transactions", help="list and describe transactions, the producers of partitions"
    )
    cmds = txns.add_subparsers(dest="transactions_command", metavar="ACTION", parser_class=Parser)
    cmds.required = True
    p = leaf(cmds, "list", cmd_transactions_list, "the transactional ids the brokers know")
    p.add_argument("--state", action="append", help="only in this state (repeatable): Ongoing, ...")
    p.add_argument("--producer-id", action="append", type=int64_non_negative, metavar="ID")
    p.add_argument(
        "--min-duration-ms",
        type=int64_non_negative,
        metavar="MS",
        help="only transactions open at least this long (Kafka 3.8+)",
    )
    p.add_argument("--json", action="store_true")
    p = leaf(cmds, "describe", cmd_transactions_describe, "state, producer, partitions of ids")
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL-ID")
    p.add_argument("--json", action="store_true")
    p = leaf(
        cmds,
        "producers",
        cmd_transactions_producers,
        "the producers partition leaders keep state for, with their open transactions",
    )
    p.add_argument(
        "--topic",
        action="append",
        type=topic_partitions_arg,
        required=True,
        metavar="TOPIC[:P,...]",
        help="topic, optionally with partitions (repeatable)",
    )
    p.add_argument("--json", action="store_true")
