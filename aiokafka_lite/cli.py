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

This module is the tool's front end: argument parsing, connection options,
error reporting, and the topic and group commands. Producing, consuming and the
benchmarks live in :mod:`aiokafka_lite.cli_records` and :mod:`aiokafka_lite.cli_bench`.
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
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.security import SECURITY_PROTOCOLS, SecurityConfig, create_ssl_context

__all__ = ["EXIT_AUTH", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_UNREACHABLE", "EXIT_USAGE", "main"]

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


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


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
        type=_positive_float,
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


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


# --- running commands ------------------------------------------------------------------

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


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


def _timestamp_arg(text: str) -> int:
    try:
        return parse_timestamp(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def print_json(value: object, stream: IO[str] | None = None) -> None:
    (stream or sys.stdout).write(json.dumps(value, sort_keys=False) + "\n")


# --- admin-backed commands -------------------------------------------------------------


async def _admin(args: argparse.Namespace) -> Any:
    from aiokafka_lite.admin import AdminClient

    conn = resolve_connection(args, "aiokafka-lite-cli")
    admin = AdminClient(**conn.client_kwargs())
    await admin.start()
    return admin


def _report_items(results: Any, ok_line: Callable[[Any], str | None]) -> int:
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


async def cmd_topics_list(args: argparse.Namespace) -> int:
    admin = await _admin(args)
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
    admin = await _admin(args)
    try:
        results = await admin.create_topics(topics, validate_only=args.validate_only)
    finally:
        await admin.close()
    if args.if_not_exists:
        for name, result in list(results.items()):
            if isinstance(result.error, errors.TopicAlreadyExistsError):
                results[name] = type(result)(name)
    verb = "Validated" if args.validate_only else "Created"
    return _report_items(results, lambda name: f"{verb} topic {name}.")


async def cmd_topics_delete(args: argparse.Namespace) -> int:
    admin = await _admin(args)
    try:
        results = await admin.delete_topics(args.topics)
    finally:
        await admin.close()
    if args.if_exists:
        for name, result in list(results.items()):
            if isinstance(result.error, errors.UnknownTopicOrPartitionError):
                results[name] = type(result)(name)
    return _report_items(results, lambda name: f"Deleted topic {name}.")


async def cmd_topics_add_partitions(args: argparse.Namespace) -> int:
    admin = await _admin(args)
    try:
        results = await admin.create_partitions({t: args.partitions for t in args.topics})
    finally:
        await admin.close()
    return _report_items(
        results, lambda name: f"Topic {name} now has {args.partitions} partitions."
    )


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

    admin = await _admin(args)
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
    admin = await _admin(args)
    try:
        results = await admin.incremental_alter_configs(resources, validate_only=args.validate_only)
    finally:
        await admin.close()
    verb = "Validated" if args.validate_only else "Updated"
    return _report_items(results, lambda r: f"{verb} config of {kind} {r.name}.")


async def cmd_groups_list(args: argparse.Namespace) -> int:
    admin = await _admin(args)
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
    admin = await _admin(args)
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
    admin = await _admin(args)
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


def _parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise UsageError(f"--topic must be TOPIC or TOPIC:P1,P2, got {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise UsageError(f"--topic partitions must be integers, got {spec!r}") from None
    if not partitions or partitions[0] < 0:
        raise UsageError(f"--topic partitions must be integers >= 0, got {spec!r}")
    return topic, partitions


async def cmd_groups_reset_offsets(args: argparse.Namespace) -> int:
    from aiokafka_lite.admin import OffsetSpec
    from aiokafka_lite.structs import TopicPartition

    if not args.topic and not args.all_topics:
        raise UsageError("give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    admin = await _admin(args)
    try:
        committed = await admin.list_consumer_group_offsets(args.group)
        targets: list[TopicPartition] = []
        if args.all_topics:
            targets = sorted(committed)
            if not targets:
                raise CliError(f"group {args.group!r} has no committed offsets to reset")
        else:
            topics = [_parse_topic_partitions(spec) for spec in args.topic]
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
    status = _report_items(results, lambda tp: None)
    if status == EXIT_OK:
        err(f"Reset offsets of group {args.group} on {len(new)} partition(s).")
    return status


async def cmd_groups_delete(args: argparse.Namespace) -> int:
    admin = await _admin(args)
    try:
        results = await admin.delete_consumer_groups(args.groups)
    finally:
        await admin.close()
    return _report_items(results, lambda g: f"Deleted group {g}.")


# --- broker ----------------------------------------------------------------------------


async def cmd_broker(args: argparse.Namespace) -> int:
    from aiokafka_lite import testing

    with StopSignal() as stop:
        broker = testing.EmbeddedBroker(
            args.kind, host=args.host, port=None if args.port == 0 else args.port
        )
        try:
            await broker.start_async()
        except (testing.BrokerError, OSError) as exc:
            raise CliError(f"cannot start the embedded broker: {exc}") from None
        try:
            out(f"bootstrap servers: {broker.bootstrap_servers}")
            sys.stdout.flush()
            err("Embedded broker running; press Ctrl-C to stop.")
            while broker.running and not await stop.wait(0.5):
                pass
            if not broker.running:
                raise CliError("the embedded broker exited unexpectedly")
        finally:
            await broker.stop_async()
    err("Broker stopped.")
    return EXIT_OK


# --- the parser ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Kafka from the shell: produce, consume, topics, groups, benchmarks.",
        epilog="Exit status: 0 ok, 1 operation failed, 2 bad arguments, 3 cluster unreachable, "
        "4 authentication/authorization failed, 130 interrupted.",
    )
    add_connection_options(parser)
    from aiokafka_lite import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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

    # produce / consume
    from aiokafka_lite import cli_records

    cli_records.add_produce_parser(commands, leaf)
    cli_records.add_consume_parser(commands, leaf)

    # topics
    topics = commands.add_parser("topics", help="list, create, delete, describe, configure topics")
    topic_cmds = topics.add_subparsers(
        dest="topics_command", metavar="ACTION", parser_class=_Parser
    )
    topic_cmds.required = True
    p = leaf(topic_cmds, "list", cmd_topics_list, "list topic names")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p = leaf(topic_cmds, "create", cmd_topics_create, "create topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=_positive_int, help="default: the broker's")
    p.add_argument("-r", "--replication-factor", type=_positive_int, help="default: the broker's")
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
        type=_positive_int,
        required=True,
        help="the new total number of partitions",
    )

    # groups
    groups = commands.add_parser("groups", help="list, describe, lag, reset offsets, delete")
    group_cmds = groups.add_subparsers(
        dest="groups_command", metavar="ACTION", parser_class=_Parser
    )
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
        metavar="TOPIC[:P,...]",
        help="topic, optionally with partitions (repeatable)",
    )
    p.add_argument("--all-topics", action="store_true", help="every topic with committed offsets")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=_non_negative_int, metavar="N")
    where.add_argument(
        "--to-datetime",
        type=_timestamp_arg,
        metavar="TIME",
        help="ISO 8601 (UTC unless a zone is given) or ms since the epoch",
    )
    where.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be negative)")
    p.add_argument("--execute", action="store_true", help="apply the new offsets")
    p = leaf(group_cmds, "delete", cmd_groups_delete, "delete empty groups")
    p.add_argument("groups", nargs="+", metavar="GROUP")

    # broker
    p = leaf(commands, "broker", cmd_broker, "run the embedded test broker until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_non_negative_int, default=9092, help="0: any free port")
    p.add_argument(
        "--kind",
        choices=("tansu", "noida"),
        default="tansu",
        help="which embedded broker (default tansu)",
    )

    # bench
    from aiokafka_lite import cli_bench

    cli_bench.add_bench_parser(commands, leaf, _Parser)
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
