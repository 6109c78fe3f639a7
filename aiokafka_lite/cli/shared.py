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
import os
import re
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.security import SECURITY_PROTOCOLS, SecurityConfig, create_ssl_context

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


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


# --- connection options ----------------------------------------------------------------

#: Config-file keys (Java/librdkafka property names and ours) -> option name.
_CONFIG_KEYS = {
    "bootstrap.servers": "bootstrap_servers",
    "bootstrap_servers": "bootstrap_servers",
    "client.id": "client_id",
    "client_id": "client_id",
    "security.protocol": "security_protocol",
    "security_protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl_mechanism": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.plain.username": "sasl_username",
    "sasl_plain_username": "sasl_username",
    "sasl_username": "sasl_username",
    "sasl.password": "sasl_password",
    "sasl.plain.password": "sasl_password",
    "sasl_plain_password": "sasl_password",
    "sasl_password": "sasl_password",
    "ssl.cafile": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl_cafile": "ssl_cafile",
    "ssl.certfile": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl_certfile": "ssl_certfile",
    "ssl.keyfile": "ssl_keyfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl_keyfile": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.password": "ssl_password",
    "ssl_password": "ssl_password",
    "ssl.check.hostname": "ssl_check_hostname",
    "ssl_check_hostname": "ssl_check_hostname",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "request.timeout.ms": "request_timeout_ms",
    "request_timeout_ms": "request_timeout_ms",
    "receive.message.max.bytes": "receive_message_max_bytes",
    "receive_message_max_bytes": "receive_message_max_bytes",
}


def read_config_file(path: str) -> dict[str, str]:
    """Read a ``key=value`` properties file (``#``/``!`` comments) into option names."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    options: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise UsageError(f"{path}:{number}: expected key=value, got {line!r}")
        key, value = line[:sep].strip(), line[sep + 1 :].strip()
        name = _CONFIG_KEYS.get(key)
        if name is None:
            raise UsageError(f"{path}:{number}: unknown config key {key!r}")
        if key == "ssl.endpoint.identification.algorithm":
            value = "true" if value.lower() == "https" else "false"
        options[name] = value
    return options


def _bool_option(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"{name} must be true or false, got {value!r}")


@dataclass
class Connection:
    """Everything needed to build a client, resolved from flags, config file and env."""

    bootstrap_servers: str
    client_id: str
    security: SecurityConfig
    request_timeout_ms: int
    extra: dict[str, str] = field(default_factory=dict)
    #: The largest response accepted (None: each client's default).
    receive_message_max_bytes: int | None = None

    def client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": self.client_id,
            "security": self.security,
            "request_timeout_ms": self.request_timeout_ms,
        }
        if self.receive_message_max_bytes is not None:
            kwargs["receive_message_max_bytes"] = self.receive_message_max_bytes
        return kwargs


def resolve_connection(args: argparse.Namespace, default_client_id: str) -> Connection:
    """Flags win over the config file, which wins over the environment and defaults."""
    from_file: dict[str, str] = {}
    config_path = getattr(args, "config", None)
    if config_path:
        from_file = read_config_file(config_path)

    def pick(name: str, env: str | None = None, default: str | None = None) -> str | None:
        value = getattr(args, name, None)
        if value is not None:
            return str(value)
        if name in from_file:
            return from_file[name]
        if env is not None and os.environ.get(env):
            return os.environ[env]
        return default

    bootstrap = pick("bootstrap_servers", ENV_BOOTSTRAP, DEFAULT_BOOTSTRAP)
    assert bootstrap is not None
    protocol = (pick("security_protocol") or "").upper()
    cafile = pick("ssl_cafile")
    certfile = pick("ssl_certfile")
    keyfile = pick("ssl_keyfile")
    mechanism = pick("sasl_mechanism")
    username = pick("sasl_username")
    if not protocol:
        # Infer the protocol from the options given, as a person would expect.
        uses_tls = bool(cafile or certfile)
        uses_sasl = bool(mechanism or username)
        protocol = {
            (False, False): "PLAINTEXT",
            (True, False): "SSL",
            (False, True): "SASL_PLAINTEXT",
            (True, True): "SASL_SSL",
        }[(uses_tls, uses_sasl)]
    if protocol not in SECURITY_PROTOCOLS:
        raise UsageError(
            f"--security-protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, got {protocol!r}"
        )
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        check = getattr(args, "ssl_no_check_hostname", None)
        check_hostname = (
            not check
            if check is not None
            else _bool_option("ssl.check.hostname", from_file.get("ssl_check_hostname", "true"))
        )
        ssl_context = create_ssl_context(
            cafile=cafile,
            certfile=certfile,
            keyfile=keyfile,
            password=pick("ssl_password"),
            check_hostname=check_hostname,
        )
    sasl: dict[str, Any] = {}
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = {
            "sasl_mechanism": (mechanism or "PLAIN").upper(),
            "sasl_plain_username": username,
            "sasl_plain_password": pick("sasl_password", ENV_SASL_PASSWORD),
        }
        if sasl["sasl_mechanism"] == "OAUTHBEARER":
            raise UsageError("SASL OAUTHBEARER needs a token provider; use it from Python code")
    security = SecurityConfig(security_protocol=protocol, ssl_context=ssl_context, **sasl)

    timeout_text = pick("request_timeout_ms")
    timeout_ms = 30000
    seconds = getattr(args, "timeout", None)
    if seconds is not None:
        timeout_ms = max(int(seconds * 1000), 1)
    elif timeout_text is not None:
        try:
            timeout_ms = int(timeout_text)
        except ValueError:
            raise UsageError(f"request.timeout.ms must be an int, got {timeout_text!r}") from None
    if timeout_ms <= 0:
        raise UsageError("the timeout must be positive")
    receive_text = pick("receive_message_max_bytes")
    receive_max: int | None = None
    if receive_text is not None:
        try:
            receive_max = int(receive_text)
        except ValueError:
            raise UsageError(
                f"receive.message.max.bytes must be an int, got {receive_text!r}"
            ) from None
    return Connection(
        bootstrap_servers=bootstrap,
        client_id=pick("client_id", default=default_client_id) or default_client_id,
        security=security,
        request_timeout_ms=timeout_ms,
        receive_message_max_bytes=receive_max,
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
        help="properties file of connection settings (bootstrap.servers, security.protocol, "
        "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...)",
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
    group.add_argument("--ssl-password", default=s, help="password of the private key")
    group.add_argument(
        "--ssl-no-check-hostname",
        action="store_true",
        default=s,
        help="verify the certificate chain but not the host name",
    )
    group.add_argument(
        "--sasl-mechanism",
        type=str.upper,
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        default=s,
    )
    group.add_argument("--sasl-username", default=s)
    group.add_argument("--sasl-password", default=s, help=f"(better: env {ENV_SASL_PASSWORD})")
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
        if value < 0:
            raise UsageError(f"timestamp must be >= 0, got {text!r}")
        return value
    try:
        when = datetime.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"expected a timestamp in ms or an ISO 8601 date/time, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


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
