"""The ``topics`` commands: list, create, delete, describe, alter-config, add-partitions."""

from __future__ import annotations

import argparse
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.cli.shared import (
    EXIT_OK,
    Leaf,
    Parser,
    UsageError,
    admin_client,
    describe_error,
    error_line,
    exit_code_for,
    int16_count,
    int32_count,
    out,
    parse_key_value,
    print_json,
    report_items,
)

__all__ = [
    "add_topics_parser",
    "cmd_topics_add_partitions",
    "cmd_topics_alter_config",
    "cmd_topics_create",
    "cmd_topics_delete",
    "cmd_topics_describe",
    "cmd_topics_list",
]


async def cmd_topics_list(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        names = await admin.list_topics(include_internal=args.internal)
    finally:
        await admin.close()
    for name in names:
        out(name)
    return EXIT_OK


async def cmd_topics_create(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import NewTopic

    configs = dict(parse_key_value(c, "--config-entry") for c in args.topic_config or ())
    topics = [
        NewTopic(name, args.partitions or -1, args.replication_factor or -1, topic_configs=configs)
        for name in args.topics
    ]
    admin = await admin_client(args)
    try:
        results = await admin.create_topics(topics, validate_only=args.validate_only)
    finally:
        await admin.close()
    existing: set[str] = set()
    if args.if_not_exists:
        for name, result in list(results.items()):
            if isinstance(result.error, errors.TopicAlreadyExistsError):
                results[name] = type(result)(name)
                existing.add(name)
    verb = "Validated" if args.validate_only else "Created"
    return report_items(
        results,
        lambda name: (
            f"Topic {name} already exists." if name in existing else f"{verb} topic {name}."
        ),
    )


async def cmd_topics_delete(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        results = await admin.delete_topics(args.topics)
    finally:
        await admin.close()
    missing: set[str] = set()
    if args.if_exists:
        for name, result in list(results.items()):
            if isinstance(result.error, errors.UnknownTopicOrPartitionError):
                results[name] = type(result)(name)
                missing.add(name)
    return report_items(
        results,
        lambda name: (
            f"Topic {name} does not exist." if name in missing else f"Deleted topic {name}."
        ),
    )


async def cmd_topics_add_partitions(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        results = await admin.create_partitions({t: args.partitions for t in args.topics})
    finally:
        await admin.close()
    return report_items(results, lambda name: f"Topic {name} now has {args.partitions} partitions.")


def _topic_json(description: Any, configs: dict[str, str | None] | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "topic": description.name,
        "topic_id": str(description.topic_id) if description.topic_id else None,
        "is_internal": description.is_internal,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in description.partitions
        ],
    }
    if configs is not None:
        data["configs"] = configs
    return data


async def cmd_topics_describe(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import ConfigResource, ConfigResourceType

    admin = await admin_client(args)
    try:
        results = await admin.describe_topics(args.topics or None)
        config_results = None
        if args.configs:
            found = [name for name, r in results.items() if r.error is None]
            config_results = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name) for name in found]
            )
    finally:
        await admin.close()
    status = EXIT_OK
    for name, description in results.items():
        if description.error is not None:
            error_line(describe_error(description.error))
            status = exit_code_for(description.error)
            continue
        configs: dict[str, str | None] | None = None
        if config_results is not None:
            described = config_results[ConfigResource(ConfigResourceType.TOPIC, name)]
            if described.error is not None:
                error_line(describe_error(described.error))
                status = exit_code_for(described.error)
            else:
                configs = (
                    {k: e.value for k, e in sorted(described.entries.items()) if not e.is_default}
                    if not args.all_configs
                    else {k: e.value for k, e in sorted(described.entries.items())}
                )
        if args.json:
            print_json(_topic_json(description, configs))
            continue
        replication = max((len(p.replicas) for p in description.partitions), default=0)
        head = [
            f"Topic: {name}",
            f"TopicId: {description.topic_id or '-'}",
            f"PartitionCount: {len(description.partitions)}",
            f"ReplicationFactor: {replication}",
        ]
        if configs is not None:
            head.append("Configs: " + ",".join(f"{k}={v}" for k, v in configs.items()))
        out("\t".join(head))
        for p in description.partitions:
            line = (
                f"\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            out(line)
    return status


async def cmd_topics_alter_config(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import AlterConfigOp, AlterConfigOpType, ConfigResource

    ops = [
        AlterConfigOp(key, value, AlterConfigOpType.SET)
        for key, value in (parse_key_value(s, "--set") for s in args.set or ())
    ]
    ops += [AlterConfigOp(key, None, AlterConfigOpType.DELETE) for key in args.delete or ()]
    if not ops:
        raise UsageError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    kind = "broker" if args.broker else "topic"
    resources = {ConfigResource(kind, name): ops for name in args.names}
    admin = await admin_client(args)
    try:
        results = await admin.incremental_alter_configs(resources, validate_only=args.validate_only)
    finally:
        await admin.close()
    verb = "Validated" if args.validate_only else "Updated"
    return report_items(results, lambda r: f"{verb} config of {kind} {r.name}.")


def add_topics_parser(commands: Any, leaf: Leaf) -> None:
    topics = commands.add_parser("topics", help="list, create, delete, describe, configure topics")
    topic_cmds = topics.add_subparsers(dest="topics_command", metavar="ACTION", parser_class=Parser)
    topic_cmds.required = True
    p = leaf(topic_cmds, "list", cmd_topics_list, "list topic names")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p = leaf(topic_cmds, "create", cmd_topics_create, "create topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    # Bounded as the protocol carries them: past that, the request could not be encoded.
    p.add_argument("-p", "--partitions", type=int32_count, help="default: the broker's")
    p.add_argument("-r", "--replication-factor", type=int16_count, help="default: the broker's")
    p.add_argument(
        "-c",
        "--config-entry",
        dest="topic_config",
        action="append",
        metavar="KEY=VALUE",
        help="topic config (repeatable), e.g. retention.ms=3600000",
    )
    p.add_argument("--if-not-exists", action="store_true", help="an existing topic is no error")
    p.add_argument("--validate-only", action="store_true", help="check, do not create")
    p = leaf(topic_cmds, "delete", cmd_topics_delete, "delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="a missing topic is no error")
    p = leaf(
        topic_cmds,
        "describe",
        cmd_topics_describe,
        "partitions, leaders, replicas, ISR (all topics when none named)",
    )
    p.add_argument("topics", nargs="*", metavar="TOPIC")
    p.add_argument("--configs", action="store_true", help="also show non-default configs")
    p.add_argument("--all-configs", action="store_true", help="with --configs: defaults too")
    p.add_argument("--json", action="store_true", help="one JSON object per topic")
    p = leaf(
        topic_cmds,
        "alter-config",
        cmd_topics_alter_config,
        "set or reset configs of topics (or brokers with --broker)",
    )
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config")
    p.add_argument("--delete", action="append", metavar="KEY", help="reset a config")
    p.add_argument("--broker", action="store_true", help="the names are broker ids")
    p.add_argument("--validate-only", action="store_true")
    p = leaf(
        topic_cmds,
        "add-partitions",
        cmd_topics_add_partitions,
        "grow topics to a new partition count",
    )
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument(
        "-p",
        "--partitions",
        type=int32_count,
        required=True,
        help="the new total number of partitions",
    )
