"""The ``acls`` commands: list, create, delete.

A resource is named as kafka-acls.sh names it (``--topic``, ``--group``, ``--cluster``,
``--transactional-id``, ``--user``, ``--delegation-token``), taken literally unless
``--prefixed`` (or, for list and delete, ``--match``: every ACL that applies to it).
"""

from __future__ import annotations

import argparse
from typing import Any

from aiokafka_lite.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourcePatternType,
    ResourceType,
)
from aiokafka_lite.cli.shared import (
    EXIT_OK,
    Leaf,
    Parser,
    UsageError,
    admin_client,
    out,
    print_json,
    report_items,
    table,
)

__all__ = ["add_acls_parser", "cmd_acls_create", "cmd_acls_delete", "cmd_acls_list"]

#: option dest -> the resource type it names.
_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
    "user": ResourceType.USER,
    "delegation_token": ResourceType.DELEGATION_TOKEN,
}
_OPERATIONS = [op.name.lower().replace("_", "-") for op in AclOperation if op > AclOperation.ANY]


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    """The resource the options name (ANY and no name when none is named)."""
    if args.cluster:
        return ResourceType.CLUSTER, "kafka-cluster"
    for dest, kind in _RESOURCES.items():
        name = getattr(args, dest)
        if name is not None:
            return kind, name
    return ResourceType.ANY, None


def _pattern(args: argparse.Namespace, default: ResourcePatternType) -> ResourcePatternType:
    if args.prefixed:
        return ResourcePatternType.PREFIXED
    if getattr(args, "match", False):
        return ResourcePatternType.MATCH
    return default


def _operation(text: str) -> AclOperation:
    return AclOperation[text.upper().replace("-", "_")]


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    kind, name = _resource(args)
    permission = "allow" if args.allow else "deny" if args.deny else "any"
    operations = [_operation(op) for op in args.operation or ["any"]]
    return [
        AclBindingFilter(
            kind,
            name,
            args.principal,
            op,
            permission,
            args.host,
            _pattern(args, ResourcePatternType.ANY),
        )
        for op in operations
    ]


def _row(b: AclBinding) -> tuple[str, ...]:
    return (
        b.resource_type.name,
        b.pattern_type.name,
        b.resource_name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission_type.name,
    )


_HEADERS = ("RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


async def cmd_acls_list(args: argparse.Namespace) -> int:
    found: set[AclBinding] = set()
    admin = await admin_client(args)
    try:
        for acl_filter in _filters(args):  # (one per --operation)
            found.update(await admin.describe_acls(acl_filter))
    finally:
        await admin.close()
    rows = sorted(_row(b) for b in found)
    if args.json:
        for row in rows:
            print_json({h.lower().replace("-", "_"): v for h, v in zip(_HEADERS, row, strict=True)})
    else:
        for line in table(rows, _HEADERS):
            out(line)
    return EXIT_OK


async def cmd_acls_create(args: argparse.Namespace) -> int:
    kind, name = _resource(args)
    if name is None:
        raise UsageError("name the resource: --topic, --group, --cluster, ...")
    principals = [(p, "allow") for p in args.allow or ()] + [(p, "deny") for p in args.deny or ()]
    if not principals:
        raise UsageError("name a principal: --allow User:NAME or --deny User:NAME")
    bindings = [
        AclBinding(
            kind,
            name,
            principal,
            _operation(op),
            permission,
            args.host or "*",
            _pattern(args, ResourcePatternType.LITERAL),
        )
        for principal, permission in principals
        for op in args.operation
    ]
    admin = await admin_client(args)
    try:
        results = await admin.create_acls(bindings)
    finally:
        await admin.close()
    return report_items(results, lambda b: "Created " + " ".join(_row(b)))


async def cmd_acls_delete(args: argparse.Namespace) -> int:
    filters = _filters(args)
    if filters[0] == AclBindingFilter() and not args.all:
        raise UsageError("this would delete every ACL: narrow it down, or add --all")
    admin = await admin_client(args)
    try:
        results = await admin.delete_acls(filters)
    finally:
        await admin.close()
    status = report_items(results, lambda f: None)
    for result in results.values():
        for b in result.deleted:
            out("Deleted " + " ".join(_row(b)))
    return status


def _resource_options(p: argparse.ArgumentParser, *, match: bool) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--topic", metavar="NAME")
    which.add_argument("--group", metavar="NAME")
    which.add_argument("--cluster", action="store_true")
    which.add_argument("--transactional-id", metavar="ID")
    which.add_argument("--user", metavar="NAME", help="a user resource (quotas, tokens)")
    which.add_argument("--delegation-token", metavar="ID")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--prefixed", action="store_true", help="the name is a prefix")
    if match:
        how.add_argument(
            "--match", action="store_true", help="every ACL that applies to the named resource"
        )


def _filter_options(p: argparse.ArgumentParser) -> None:
    _resource_options(p, match=True)
    p.add_argument("--principal", metavar="PRINCIPAL", help="e.g. User:alice")
    p.add_argument("--host", metavar="HOST")
    p.add_argument("--operation", action="append", choices=_OPERATIONS, metavar="OP")
    allow = p.add_mutually_exclusive_group()
    allow.add_argument("--allow", action="store_true", help="only ACLs that allow")
    allow.add_argument("--deny", action="store_true", help="only ACLs that deny")


def add_acls_parser(commands: Any, leaf: Leaf) -> None:
    acls = commands.add_parser("acls", help="list, create, delete ACLs")
    acl_cmds = acls.add_subparsers(dest="acls_command", metavar="ACTION", parser_class=Parser)
    acl_cmds.required = True
    p = leaf(acl_cmds, "list", cmd_acls_list, "the ACLs matching the options (all by default)")
    _filter_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per ACL")
    p = leaf(acl_cmds, "create", cmd_acls_create, "allow or deny principals operations")
    _resource_options(p, match=False)
    p.add_argument("--allow", action="append", metavar="PRINCIPAL", help="e.g. User:alice")
    p.add_argument("--deny", action="append", metavar="PRINCIPAL")
    p.add_argument("--host", metavar="HOST", help="the client's host (default: any, *)")
    p.add_argument(
        "--operation",
        action="append",
        required=True,
        choices=_OPERATIONS,
        metavar="OP",
        help="repeatable: " + ", ".join(_OPERATIONS),
    )
    p = leaf(acl_cmds, "delete", cmd_acls_delete, "delete the ACLs matching the options")
    _filter_options(p)
    p.add_argument("--all", action="store_true", help="allow a filter that matches every ACL")
