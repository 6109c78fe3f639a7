"""The ``users`` commands: list, set and delete users' SCRAM credentials.

A password is never taken as an argument (it would show in the process list and the
shell's history): ``set`` reads it from standard input, its first line, or prompts for
it without echo when standard input is a terminal.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from aiokafka_lite.admin import (
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.admin.security_types import SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS
from aiokafka_lite.cli.shared import (
    Leaf,
    Parser,
    UsageError,
    admin_client,
    out,
    print_json,
    report_items,
    table,
)

__all__ = ["add_users_parser", "cmd_users_delete", "cmd_users_list", "cmd_users_set"]

_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


async def cmd_users_list(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        described = await admin.describe_user_scram_credentials(args.users or None)
    finally:
        await admin.close()
    rows = [
        (user, _mechanism_name(c.mechanism), c.iterations)
        for user, d in sorted(described.items())
        if d.error is None
        for c in d.credentials
    ]
    if args.json:
        for user, mechanism, iterations in rows:
            print_json({"user": user, "mechanism": mechanism, "iterations": iterations})
    else:
        for line in table(rows, ("USER", "MECHANISM", "ITERATIONS")):
            out(line)
    # A user named but without credentials: an error line, and the exit status says so.
    return report_items(described, lambda user: None)


def _read_password() -> str:
    if sys.stdin is None:  # run with stdin closed (`<&-`)
        raise UsageError("standard input is closed: give the password on it")
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != first:
            raise UsageError("the passwords differ")
        password = first
    else:
        # Bytes, decoded here: SCRAM hashes the password's UTF-8, and stdin's own
        # decoding fails or (C locale) leaves lone surrogates on other bytes.
        try:
            password = sys.stdin.buffer.readline().decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise UsageError("the password on standard input is not UTF-8 text") from None
    if not password:
        raise UsageError("empty password (give it on standard input)")
    return password


async def cmd_users_set(args: argparse.Namespace) -> int:
    password = _read_password()
    upsertions = [
        UserScramCredentialUpsertion(args.user, mechanism, password, args.iterations)
        for mechanism in args.mechanism or _MECHANISMS
    ]
    admin = await admin_client(args)
    try:
        results = await admin.alter_user_scram_credentials(upsertions)
    finally:
        await admin.close()
    names = ", ".join(_mechanism_name(u.mechanism) for u in upsertions)
    return report_items(results, lambda user: f"Set {names} credentials of user {user}.")


async def cmd_users_delete(args: argparse.Namespace) -> int:
    admin = await admin_client(args)
    try:
        mechanisms: list[ScramMechanism | str | int] = list(args.mechanism or ())
        if not mechanisms:  # every credential the user has
            described = (await admin.describe_user_scram_credentials([args.user]))[args.user]
            if described.error is not None:
                raise described.error
            mechanisms = [c.mechanism for c in described.credentials]
        deletions = [UserScramCredentialDeletion(args.user, m) for m in mechanisms]
        results = await admin.alter_user_scram_credentials(deletions)
    finally:
        await admin.close()
    names = ", ".join(_mechanism_name(d.mechanism) for d in deletions)
    return report_items(results, lambda user: f"Deleted {names} credentials of user {user}.")


def _iterations(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not SCRAM_MIN_ITERATIONS <= value <= SCRAM_MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(
            f"must be from {SCRAM_MIN_ITERATIONS} to {SCRAM_MAX_ITERATIONS}, got {value}"
        )
    return value


def add_users_parser(commands: Any, leaf: Leaf) -> None:
    users = commands.add_parser("users", help="list, set, delete users' SCRAM credentials")
    cmds = users.add_subparsers(dest="users_command", metavar="ACTION", parser_class=Parser)
    cmds.required = True
    p = leaf(cmds, "list", cmd_users_list, "SCRAM mechanisms and iterations of users")
    p.add_argument("users", nargs="*", metavar="USER", help="these users (default: all)")
    p.add_argument("--json", action="store_true")
    p = leaf(cmds, "set", cmd_users_set, "set a user's SCRAM password (read from stdin)")
    p.add_argument("user", metavar="USER")
    p.add_argument(
        "--mechanism",
        action="append",
        choices=_MECHANISMS,
        help="repeatable (default: both)",
    )
    p.add_argument("--iterations", type=_iterations, default=SCRAM_MIN_ITERATIONS)
    p = leaf(cmds, "delete", cmd_users_delete, "delete a user's SCRAM credentials")
    p.add_argument("user", metavar="USER")
    p.add_argument(
        "--mechanism", action="append", choices=_MECHANISMS, help="(default: all it has)"
    )
