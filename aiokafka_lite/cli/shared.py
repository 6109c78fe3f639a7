"""What every command of the ``aiokafka-lite`` tool shares.

Exit codes and :class:`CliError`, the output helpers (stdout for results, stderr for
status and errors), argument types, the connection options (flags, ``--config`` file,
environment) and :class:`StopSignal`. The command modules import this one; it imports
none of them.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from aiokafka_lite import config_map, errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.config_map import ClientKind
from aiokafka_lite.security import SECURITY_PROTOCOLS, SecurityConfig
from aiokafka_lite.structs import TopicPartition

PROG = "aiokafka-lite"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_AUTH = 4
EXIT_INTERRUPTED = 130

ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
ENV_SASL_PASSWORD = "KAFKA_SASL_PASSWORD"
DEFAULT_BOOTSTRAP = "localhost:9092"

log = logging.getLogger(__name__)


class CliError(Exception):
    """An expected failure: reported as one line, with an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


# --- output helpers --------------------------------------------------------------------


def out(text: str = "") -> None:
    """One line of the command's result on stdout."""
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    """One line of status or error on stderr."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def error_line(message: str) -> None:
    err(f"{PROG}: error: {message}")


def describe_error(exc: BaseException) -> str:
    """A one-line human description of an error (no class paths, no traceback)."""
    if isinstance(exc, errors.BrokerResponseError):
        detail = exc.message
        description = exc.description
        name = exc.kafka_name or type(exc).__name__
        if detail and detail != description and description:
            return f"{detail}: {description.rstrip('.')} [{name}]"
        return f"{detail or description} [{name}]"
    if isinstance(exc, errors.KafkaError):
        text = exc.message or type(exc).__name__
        # Attempts skipped during reconnect backoff repeat the address and say nothing.
        return _BACKOFF_NOISE.sub("", text)
    return str(exc) or type(exc).__name__


_BACKOFF_NOISE = re.compile(r"; [^;]*? is in reconnect backoff for [\d.]+s")


_AUTH_CODES = frozenset({29, 30, 31, 53, 58})  # topic/group/cluster/txn authz, SASL auth


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, CliError):
        return exc.exit_code
    if isinstance(exc, errors.ConfigurationError):
        return EXIT_USAGE
    if isinstance(exc, errors.KafkaError) and exc.errno in _AUTH_CODES:
        return EXIT_AUTH
    if isinstance(exc, errors.KafkaConnectionError):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> list[str]:
    """Rows as left-aligned columns under ``headers``."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


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


# --- argument types --------------------------------------------------------------------


def _number_arg(
    text: str,
    parse: Callable[[str], float],
    what: str,
    allowed: Callable[[float], bool],
    bound: str,
) -> float:
    """``text`` parsed by ``parse`` (int or float); ArgumentTypeError unless ``allowed``."""
    try:
        value = parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not allowed(value):
        raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    # Finite: an infinite --timeout overflowed converting to milliseconds.
    return _number_arg(
        text, float, "a number", lambda value: 0 < value < math.inf, "> 0 and finite"
    )


def non_negative_seconds(text: str) -> float:
    """A duration >= 0 (``inf``: never); NaN compares false with everything, so a NaN
    timeout never fired: refused with the negatives."""
    return _number_arg(text, float, "a number", lambda value: value >= 0, ">= 0")


def positive_int(text: str) -> int:
    return int(_number_arg(text, int, "an integer", lambda value: value > 0, "> 0"))


def int32_count(text: str) -> int:
    """A count > 0 the protocol carries as an INT32 (partitions)."""
    return int(_number_arg(text, int, "an integer", lambda v: 0 < v < 2**31, "> 0 and < 2^31"))


def int16_count(text: str) -> int:
    """A count > 0 the protocol carries as an INT16 (the replication factor)."""
    return int(_number_arg(text, int, "an integer", lambda v: 0 < v < 2**15, "> 0 and < 32768"))


def non_negative_int(text: str) -> int:
    return int(_number_arg(text, int, "an integer", lambda value: value >= 0, ">= 0"))


def int64_non_negative(text: str) -> int:
    """An integer >= 0 the protocol carries as an INT64 (producer ids, durations)."""
    return int(_number_arg(text, int, "an integer", lambda v: 0 <= v < 2**63, ">= 0 and < 2^63"))


def port_number(text: str) -> int:
    return int(_number_arg(text, int, "a port", lambda v: 0 <= v <= 65535, "from 0 to 65535"))


# --- connection options ----------------------------------------------------------------


def read_config_file(path: str) -> dict[str, Any]:
    """Read a ``key=value`` properties file (``#``/``!`` comments) into settings.

    Keys are Kafka's option names (or our keywords), the table of
    :mod:`aiokafka_lite.config_map`; the result holds each value converted, by keyword.
    A later line wins over an earlier one.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read config file {path}: not UTF-8 text ({exc})") from None
    settings: dict[str, Any] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise UsageError(f"{path}:{number}: expected key=value, got {line!r}")
        key, value = line[:sep].strip(), line[sep + 1 :].strip()
        try:
            settings.update(config_map.parse_config({key: value}))
        except errors.ConfigurationError as exc:
            raise UsageError(f"{path}:{number}: {exc.message}") from None
    return settings


@dataclass
class Connection:
    """Everything needed to build a client, resolved from flags, config file and env."""

    bootstrap_servers: str
    client_id: str
    security: SecurityConfig
    request_timeout_ms: int
    #: The settings of the config file and the connection flags, by keyword
    #: (:mod:`aiokafka_lite.config_map`): each client takes those that apply to it.
    settings: dict[str, Any] = field(default_factory=dict)
    #: The largest response accepted (None: each client's default).
    receive_message_max_bytes: int | None = None

    def client_kwargs(self, kind: ClientKind = "admin") -> dict[str, Any]:
        """Keyword arguments of a ``kind`` client (the admin client by default)."""
        keywords = config_map.keywords_of(kind)
        kwargs = {key: value for key, value in self.settings.items() if key in keywords}
        kwargs.update(
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            security=self.security,
            request_timeout_ms=self.request_timeout_ms,
        )
        if self.receive_message_max_bytes is not None:
            kwargs["receive_message_max_bytes"] = self.receive_message_max_bytes
        return kwargs


#: The connection flags whose destination is a setting's keyword (see add_connection_options).
_FLAG_SETTINGS = (
    "bootstrap_servers",
    "client_id",
    "security_protocol",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_key_password",
    "ssl_check_hostname",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
)


def resolve_connection(args: argparse.Namespace, default_client_id: str) -> Connection:
    """Flags win over the config file, which wins over the environment and defaults.

    Without a security protocol, the protocol is inferred from the TLS and SASL options
    given; the settings are then checked as the config map checks them everywhere.
    """
    config_path = getattr(args, "config", None)
    settings = read_config_file(config_path) if config_path else {}
    settings.update({key: getattr(args, key) for key in _FLAG_SETTINGS if hasattr(args, key)})
    seconds = getattr(args, "timeout", None)
    if seconds is not None:
        if not math.isfinite(seconds * 1000):  # past int(): an OverflowError traceback
            raise UsageError(f"--timeout is too large: {seconds:g} s")
        settings["request_timeout_ms"] = max(int(seconds * 1000), 1)
    bootstrap = settings.get("bootstrap_servers") or os.environ.get(ENV_BOOTSTRAP)
    settings["bootstrap_servers"] = bootstrap or DEFAULT_BOOTSTRAP
    if "security_protocol" not in settings:
        # Infer the protocol from the options given, as a person would expect.
        uses_tls = any(key in settings for key in config_map.TLS_SETTINGS)
        uses_sasl = any(key in settings for key in config_map.SASL_SETTINGS)
        settings["security_protocol"] = {
            (False, False): "PLAINTEXT",
            (True, False): "SSL",
            (False, True): "SASL_PLAINTEXT",
            (True, True): "SASL_SSL",
        }[(uses_tls, uses_sasl)]
    if settings["security_protocol"].startswith("SASL"):
        if settings.get("sasl_mechanism") == "OAUTHBEARER":
            raise UsageError("SASL OAUTHBEARER needs a token provider; use it from Python code")
        if "sasl_plain_password" not in settings and os.environ.get(ENV_SASL_PASSWORD):
            settings["sasl_plain_password"] = os.environ[ENV_SASL_PASSWORD]
    config_map.check_security(settings)
    security = SecurityConfig(**config_map.security_kwargs(settings))
    timeout_ms = settings.get("request_timeout_ms", 30000)
    if timeout_ms <= 0:
        raise UsageError("the timeout must be positive")
    return Connection(
        bootstrap_servers=settings["bootstrap_servers"],
        client_id=settings.get("client_id", default_client_id),
        security=security,
        request_timeout_ms=timeout_ms,
        settings=settings,
        receive_message_max_bytes=settings.get("receive_message_max_bytes"),
    )


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The options every command takes (defaults suppressed so either level may set them)."""
    s = argparse.SUPPRESS
    group = parser.add_argument_group("connection")
    group.add_argument(
        "-b",
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        default=s,
        help=f"brokers to bootstrap from (env {ENV_BOOTSTRAP}; default {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument(
        "--config",
        "--command-config",
        dest="config",
        metavar="FILE",
        default=s,
        help="properties file of Kafka options (bootstrap.servers, security.protocol, "
        "sasl.username, ssl.ca.location, linger.ms, group.id, ...: docs/configuration.md)",
    )
    group.add_argument("--client-id", default=s, help="client id sent to the brokers")
    group.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        default=s,
        help="request timeout, also bounds each admin call (default 30)",
    )
    group.add_argument(
        "--security-protocol",
        type=str.upper,
        choices=SECURITY_PROTOCOLS,
        default=s,
        help="default: inferred from the TLS/SASL options given",
    )
    group.add_argument("--ssl-cafile", metavar="FILE", default=s, help="CA bundle (PEM)")
    group.add_argument("--ssl-certfile", metavar="FILE", default=s, help="client certificate")
    group.add_argument("--ssl-keyfile", metavar="FILE", default=s, help="client private key")
    group.add_argument(
        "--ssl-password", dest="ssl_key_password", default=s, help="password of the private key"
    )
    group.add_argument(
        "--ssl-no-check-hostname",
        dest="ssl_check_hostname",
        action="store_false",
        default=s,
        help="verify the certificate chain but not the host name",
    )
    group.add_argument(
        "--sasl-mechanism",
        type=str.upper,
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        default=s,
    )
    group.add_argument("--sasl-username", dest="sasl_plain_username", default=s)
    group.add_argument(
        "--sasl-password",
        dest="sasl_plain_password",
        default=s,
        help=f"(better: env {ENV_SASL_PASSWORD})",
    )
    group.add_argument(
        "-v", "--verbose", action="count", default=s, help="log to stderr (-vv: debug)"
    )


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


# --- running commands ------------------------------------------------------------------

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
#: ``leaf(subparsers, name, command, help)``: adds a runnable (sub)command's parser; the
#: entry module gives every leaf the connection options.
Leaf = Callable[..., argparse.ArgumentParser]


def run_async(command: Command, args: argparse.Namespace) -> int:
    """Run a command's coroutine; Ctrl-C raises KeyboardInterrupt out of it."""
    return asyncio.run(command(args))


class StopSignal:
    """Turns SIGINT/SIGTERM into an event, for commands where Ctrl-C is the way to stop.

    A second Ctrl-C while stopping restores the default handler's behaviour.
    """

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signal_name: str | None = None
        self._loop = asyncio.get_running_loop()
        self._installed: list[int] = []

    def __enter__(self) -> StopSignal:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - not on Unix
                continue
            self._installed.append(sig)
        return self

    def _on_signal(self, sig: int) -> None:
        if self.event.is_set():
            # A second Ctrl-C: stop waiting for a clean shutdown.
            self.__exit__()
            signal.raise_signal(sig)
            return
        self.signal_name = signal.Signals(sig).name
        self.event.set()

    def __exit__(self, *exc: object) -> None:
        for sig in self._installed:
            self._loop.remove_signal_handler(sig)
        self._installed.clear()

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for a stop signal; True if one came."""
        try:
            await wait_for(self.event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


def parse_key_value(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"{what} must look like KEY=VALUE, got {text!r}")
    return key, value


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from an int or an ISO 8601 date/time (UTC if no zone)."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        value = int(stripped)
    else:
        try:
            when = datetime.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"expected a timestamp in ms or an ISO 8601 date/time, got {text!r}"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        value = int(when.timestamp() * 1000)
    # Kafka's timestamps are INT64 ms; a negative one asks for a special offset
    # (-1 latest, -2 earliest), so a time before 1970 is no time at all.
    if value < 0:
        raise UsageError(f"timestamp must be at or after 1970-01-01T00:00:00Z, got {text!r}")
    if value >= 2**63:
        raise UsageError(f"timestamp too large (ms since the epoch < 2^63), got {text!r}")
    return value


def timestamp_arg(text: str) -> int:
    try:
        return parse_timestamp(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def print_json(value: object, stream: IO[str] | None = None) -> None:
    (stream or sys.stdout).write(json.dumps(value, sort_keys=False) + "\n")


# --- helpers of several commands -------------------------------------------------------


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


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``--topic TOPIC`` (every partition: None) or ``--topic TOPIC:P1,P2``."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise UsageError(f"--topic must be TOPIC or TOPIC:P1,P2, got {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise UsageError(f"--topic partitions must be integers, got {spec!r}") from None
    if not partitions or partitions[0] < 0 or partitions[-1] >= 2**31:
        raise UsageError(f"--topic partitions must be integers >= 0 and < 2^31, got {spec!r}")
    return topic, partitions


def topic_partitions_arg(text: str) -> str:
    """The argparse type of ``--topic TOPIC[:P,...]``: checked, kept as given."""
    try:
        parse_topic_partitions(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


async def topic_partitions(admin: Any, specs: list[str]) -> list[TopicPartition]:
    """The partitions ``--topic`` options name (`parse_topic_partitions`): a topic named
    without partitions stands for all of its partitions, looked up with ``admin``; a
    topic that cannot be described raises its error."""
    parsed = [parse_topic_partitions(spec) for spec in specs]
    whole = [topic for topic, parts in parsed if parts is None]
    described = await admin.describe_topics(whole) if whole else {}
    partitions: list[TopicPartition] = []
    for topic, parts in parsed:
        if parts is None:
            found = described[topic]
            if found.error is not None:
                raise found.error
            parts = [p.partition for p in found.partitions]
        partitions.extend(TopicPartition(topic, p) for p in parts)
    return partitions


async def admin_client(args: argparse.Namespace) -> Any:
    """A started admin client for the command's connection options."""
    from aiokafka_lite.admin import AdminClient

    conn = resolve_connection(args, "aiokafka-lite-cli")
    admin = AdminClient(**conn.client_kwargs())
    await admin.start()
    return admin


def report_items(results: Any, ok_line: Callable[[Any], str | None]) -> int:
    """Print a line per succeeded item (stdout) and per failed item (stderr)."""
    failed = 0
    for key, result in results.items():
        if result.error is not None:
            failed += 1
            error_line(describe_error(result.error))
        else:
            line = ok_line(key)
            if line:
                out(line)
    return EXIT_OK if not failed else exit_code_for(next(iter(results.errors.values())))
