"""The entry point of the ``aiokafka-lite`` tool: the argument parser and :func:`main`.

Each command group adds its own parser (``add_*_parser`` in its module); this module
puts them together, gives every runnable command the connection options, and runs the
chosen command, turning expected failures into one error line and an exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from aiokafka_lite import __version__, errors
from aiokafka_lite.cli.acls import add_acls_parser
from aiokafka_lite.cli.bench import add_bench_parser
from aiokafka_lite.cli.broker import add_broker_parser
from aiokafka_lite.cli.consume import add_consume_parser
from aiokafka_lite.cli.groups import add_groups_parser
from aiokafka_lite.cli.log_dirs import add_log_dirs_parser
from aiokafka_lite.cli.produce import add_produce_parser
from aiokafka_lite.cli.shared import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    Command,
    Parser,
    add_connection_options,
    describe_error,
    err,
    error_line,
    exit_code_for,
    run_async,
)
from aiokafka_lite.cli.topics import add_topics_parser
from aiokafka_lite.cli.transactions import add_transactions_parser
from aiokafka_lite.cli.users import add_users_parser

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description=(
            "Kafka from the shell: produce, consume, topics, groups, ACLs, users, transactions, "
            "log dirs, benchmarks."
        ),
        epilog="Exit status: 0 ok, 1 operation failed, 2 bad arguments, 3 cluster unreachable, "
        "4 authentication/authorization failed, 130 interrupted.",
    )
    add_connection_options(parser)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    leaves: list[argparse.ArgumentParser] = []

    def leaf(
        sub: Any, name: str, command: Command, help_text: str, **kw: Any
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, **kw
        )
        p.set_defaults(func=command)
        leaves.append(p)
        return p

    add_produce_parser(commands, leaf)
    add_consume_parser(commands, leaf)
    add_topics_parser(commands, leaf)
    add_groups_parser(commands, leaf)
    add_acls_parser(commands, leaf)
    add_users_parser(commands, leaf)
    add_transactions_parser(commands, leaf)
    add_log_dirs_parser(commands, leaf)
    add_broker_parser(commands, leaf)
    add_bench_parser(commands, leaf)
    # Last, so each command's own options come first in its usage line.
    for p in leaves:
        add_connection_options(p)
    return parser


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if verbosity <= 0:
        # Expected failures are reported once, as one line, by the CLI itself.
        logging.getLogger("aiokafka_lite").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiokafka-lite`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(getattr(args, "verbose", 0) or 0)
    command: Command = args.func
    if sys.stdout is None:  # run with stdout closed (`>&-`): Python has no sys.stdout
        error_line("standard output is closed: nowhere to print the results")
        return EXIT_USAGE
    try:
        return run_async(command, args)
    except KeyboardInterrupt:
        err(f"{PROG}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours.
        _silence_stdout()
        return EXIT_OK
    except (CliError, errors.KafkaError) as exc:
        error_line(describe_error(exc))
        return exit_code_for(exc)
    except OSError as exc:
        error_line(str(exc))
        return EXIT_FAILED


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
