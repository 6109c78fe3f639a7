"""``aiokafka-lite``: produce, consume, manage topics and groups, benchmark, run a broker.

Run ``aiokafka-lite --help`` (or ``python -m aiokafka_lite --help``). Every command
takes the connection options (``--bootstrap-servers``, TLS, SASL, ``--config FILE``);
expected failures print one ``aiokafka-lite: error: ...`` line on stderr and exit
with a non-zero status:

====  ===============================================================
0     success
1     the operation failed (a Kafka error, such as an unknown topic)
2     bad arguments or configuration
3     the cluster could not be reached
4     authentication or authorization failed
130   interrupted (Ctrl-C) where that is not the normal way to stop
====  ===============================================================

The package: :mod:`~aiokafka_lite.cli.entry` (the parser and :func:`main`), one module
per command group (:mod:`~aiokafka_lite.cli.produce`, :mod:`~aiokafka_lite.cli.consume`,
:mod:`~aiokafka_lite.cli.topics`, :mod:`~aiokafka_lite.cli.groups`,
:mod:`~aiokafka_lite.cli.broker`, :mod:`~aiokafka_lite.cli.bench`) and
:mod:`~aiokafka_lite.cli.shared`, which they all import (errors and exit codes, output,
connection options). The names below are re-exported from where they live.
"""

from aiokafka_lite.cli.broker import cmd_broker
from aiokafka_lite.cli.entry import build_parser, main
from aiokafka_lite.cli.groups import (
    cmd_groups_delete,
    cmd_groups_describe,
    cmd_groups_lag,
    cmd_groups_list,
    cmd_groups_reset_offsets,
)
from aiokafka_lite.cli.shared import (
    DEFAULT_BOOTSTRAP,
    ENV_BOOTSTRAP,
    ENV_SASL_PASSWORD,
    EXIT_AUTH,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    PROG,
    CliError,
    Command,
    Connection,
    StopSignal,
    UsageError,
    add_connection_options,
    describe_error,
    err,
    error_line,
    exit_code_for,
    out,
    parse_key_value,
    parse_timestamp,
    print_json,
    read_config_file,
    resolve_connection,
    run_async,
    table,
)
from aiokafka_lite.cli.topics import (
    cmd_topics_add_partitions,
    cmd_topics_alter_config,
    cmd_topics_create,
    cmd_topics_delete,
    cmd_topics_describe,
    cmd_topics_list,
)

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "ENV_BOOTSTRAP",
    "ENV_SASL_PASSWORD",
    "EXIT_AUTH",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "PROG",
    "CliError",
    "Command",
    "Connection",
    "StopSignal",
    "UsageError",
    "add_connection_options",
    "build_parser",
    "cmd_broker",
    "cmd_groups_delete",
    "cmd_groups_describe",
    "cmd_groups_lag",
    "cmd_groups_list",
    "cmd_groups_reset_offsets",
    "cmd_topics_add_partitions",
    "cmd_topics_alter_config",
    "cmd_topics_create",
    "cmd_topics_delete",
    "cmd_topics_describe",
    "cmd_topics_list",
    "describe_error",
    "err",
    "error_line",
    "exit_code_for",
    "main",
    "out",
    "parse_key_value",
    "parse_timestamp",
    "print_json",
    "read_config_file",
    "resolve_connection",
    "run_async",
    "table",
]
