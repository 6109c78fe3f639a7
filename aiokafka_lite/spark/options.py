"""Option parsing and validation for the Spark data source (no Spark import here).

Spark hands a data source its options as a case-insensitive map of strings. Everything
is checked here, on the driver, when the query is planned, so a typo or a conflicting
pair fails with one clear :class:`~aiokafka_lite.errors.ConfigurationError` instead of
failing in every task.

Option names follow Spark's built-in Kafka source where they mean the same thing.
``kafka.*`` options are Kafka's (Java client) configuration names and are translated to
the keyword arguments of our producer and consumer; see :data:`CLIENT_OPTIONS`.

The parsed values are small frozen dataclasses holding only plain Python values, so they
pickle into Spark tasks. TLS contexts are built inside each task from file paths.
"""

from __future__ import annotations

import json
import logging
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka_lite import errors
from aiokafka_lite.structs import TopicPartition, check_topic_name

log = logging.getLogger(__name__)

__all__ = [
    "CLIENT_OPTIONS",
    "EARLIEST",
    "LATEST",
    "ClientOptions",
    "OffsetSpec",
    "ReadOptions",
    "TopicSelection",
    "WriteOptions",
    "parse_read_options",
    "parse_write_options",
]

#: Per-partition offset JSON values with a special meaning (as in Spark and Kafka).
EARLIEST = -2
LATEST = -1

#: Default split size of a batch read: a Kafka partition range with more records than
#: this is read by several Spark tasks.
DEFAULT_MAX_RECORDS_PER_PARTITION = 500_000
#: How long a read task waits for the next record of its range before it fails.
DEFAULT_POLL_TIMEOUT_MS = 120_000


def _fail(message: str) -> errors.ConfigurationError:
    return errors.ConfigurationError(f"aiokafka_lite data source: {message}")


# --- value converters ---------------------------------------------------------


def _to_int(name: str, text: str, *, minimum: int = 0) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _fail(f"option {name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise _fail(f"option {name} must be >= {minimum}, got {value}")
    return value


def _to_float(name: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise _fail(f"option {name} must be a number, got {text!r}") from None
    if not value >= 0:
        raise _fail(f"option {name} must be >= 0, got {text!r}")
    return value


def _to_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise _fail(f"option {name} must be true or false, got {text!r}")


def _as_is(name: str, text: str) -> str:
    return text


def _to_str(name: str, text: str) -> str:
    if not text.strip():
        raise _fail(f"option {name} is empty")
    return text.strip()


# --- kafka.* options ----------------------------------------------------------

Target = Literal["common", "consumer", "producer", "security"]


@dataclass(frozen=True)
class _ClientOption:
    kwarg: str
    target: Target
    convert: Callable[[str, str], Any]


#: ``kafka.<name>`` options understood, by Kafka (Java client) name: the keyword argument
#: of our client it becomes, and whether it applies to reads (consumer), writes
#: (producer) or both.
CLIENT_OPTIONS: Mapping[str, _ClientOption] = {
    # both
    "client.id": _ClientOption("client_id", "common", _to_str),
    "request.timeout.ms": _ClientOption("request_timeout_ms", "common", _to_int),
    "socket.connection.setup.timeout.ms": _ClientOption("connect_timeout_ms", "common", _to_int),
    "metadata.max.age.ms": _ClientOption("metadata_max_age_ms", "common", _to_int),
    "retry.backoff.ms": _ClientOption("retry_backoff_ms", "common", _to_int),
    "reconnect.backoff.ms": _ClientOption("reconnect_backoff_ms", "common", _to_int),
    "reconnect.backoff.max.ms": _ClientOption("reconnect_backoff_max_ms", "common", _to_int),
    "receive.message.max.bytes": _ClientOption("receive_message_max_bytes", "common", _to_int),
    # security (both); turned into SecurityConfig keyword arguments in each task
    "security.protocol": _ClientOption("security_protocol", "security", _to_str),
    "sasl.mechanism": _ClientOption("sasl_mechanism", "security", _to_str),
    "sasl.jaas.config": _ClientOption("sasl_jaas_config", "security", _to_str),
    "sasl.username": _ClientOption("sasl_plain_username", "security", _to_str),
    "sasl.password": _ClientOption("sasl_plain_password", "security", _as_is),
    "ssl.ca.location": _ClientOption("ssl_cafile", "security", _to_str),
    "ssl.certificate.location": _ClientOption("ssl_certfile", "security", _to_str),
    "ssl.key.location": _ClientOption("ssl_keyfile", "security", _to_str),
    "ssl.key.password": _ClientOption("ssl_key_password", "security", _as_is),
    "ssl.endpoint.identification.algorithm": _ClientOption(
        "ssl_endpoint_identification_algorithm", "security", _as_is
    ),
    # reads
    "fetch.min.bytes": _ClientOption("fetch_min_bytes", "consumer", _to_int),
    "fetch.max.bytes": _ClientOption("fetch_max_bytes", "consumer", _to_int),
    "fetch.max.wait.ms": _ClientOption("fetch_max_wait_ms", "consumer", _to_int),
    "max.partition.fetch.bytes": _ClientOption("max_partition_fetch_bytes", "consumer", _to_int),
    "isolation.level": _ClientOption("isolation_level", "consumer", _to_str),
    "check.crcs": _ClientOption("check_crcs", "consumer", _to_bool),
    "client.rack": _ClientOption("client_rack", "consumer", _to_str),
    # writes
    "acks": _ClientOption("acks", "producer", _to_str),
    "compression.type": _ClientOption("compression_type", "producer", _to_str),
    "linger.ms": _ClientOption("linger_ms", "producer", _to_float),
    "batch.size": _ClientOption("max_batch_size", "producer", _to_int),
    "max.request.size": _ClientOption("max_request_size", "producer", _to_int),
    "buffer.memory": _ClientOption("buffer_memory", "producer", _to_int),
    "max.block.ms": _ClientOption("max_block_ms", "producer", _to_int),
    "delivery.timeout.ms": _ClientOption("delivery_timeout_ms", "producer", _to_int),
    "enable.idempotence": _ClientOption("enable_idempotence", "producer", _to_bool),
    "max.in.flight.requests.per.connection": _ClientOption(
        "max_in_flight_requests_per_connection", "producer", _to_int
    ),
    "retry.backoff.max.ms": _ClientOption("retry_backoff_max_ms", "producer", _to_int),
}

#: ``kafka.*`` options refused, with the reason (as Spark's Kafka source refuses most).
REFUSED_CLIENT_OPTIONS: Mapping[str, str] = {
    "group.id": "the data source reads assigned partitions without a consumer group",
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "the data source commits no offsets; Spark's checkpoint tracks them",
    "key.deserializer": "keys are always read as binary; cast the key column in Spark",
    "value.deserializer": "values are always read as binary; cast the value column in Spark",
    "key.serializer": "give the key column as string or binary",
    "value.serializer": "give the value column as string or binary",
    "interceptor.classes": "interceptors are not supported",
    "transactional.id": "transactional writes are not supported",
    "ssl.truststore.location": "JKS stores are a JVM format; give kafka.ssl.ca.location (PEM)",
    "ssl.keystore.location": (
        "JKS stores are a JVM format; give kafka.ssl.certificate.location and "
        "kafka.ssl.key.location (PEM)"
    ),
}

_JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


def _parse_jaas(text: str) -> tuple[str, str]:
    """Username and password from a PlainLoginModule/ScramLoginModule JAAS line."""
    if "PlainLoginModule" not in text and "ScramLoginModule" not in text:
        raise _fail(
            "kafka.sasl.jaas.config: only PlainLoginModule and ScramLoginModule are supported "
            "(for OAUTHBEARER use our Python client directly)"
        )
    found: dict[str, str] = {}
    for match in _JAAS_RE.finditer(text):
        quoted, single, bare = match.group(2), match.group(3), match.group(4)
        if quoted is not None:
            found[match.group(1)] = re.sub(r"\\(.)", r"\1", quoted)
        else:
            found[match.group(1)] = single if single is not None else bare
    if "username" not in found or "password" not in found:
        raise _fail('kafka.sasl.jaas.config needs username="..." and password="..."')
    return found["username"], found["password"]


@dataclass(frozen=True)
class ClientOptions:
    """Connection settings of our client, as plain picklable values."""

    bootstrap_servers: str
    common: Mapping[str, Any] = field(default_factory=dict)
    consumer: Mapping[str, Any] = field(default_factory=dict)
    producer: Mapping[str, Any] = field(default_factory=dict)
    #: SecurityConfig inputs: protocol, SASL credentials, PEM file paths.
    security: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        shown = {
            k: ("***" if "password" in k or "jaas" in k else v) for k, v in self.security.items()
        }
        return (
            f"ClientOptions(bootstrap_servers={self.bootstrap_servers!r}, common={self.common!r}, "
            f"consumer={self.consumer!r}, producer={self.producer!r}, security={shown!r})"
        )

    def security_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Security keyword arguments of our clients; builds the TLS context if asked."""
        sec = dict(self.security)
        result: dict[str, Any] = {}
        protocol = str(sec.get("security_protocol", "PLAINTEXT")).upper()
        result["security_protocol"] = protocol
        if protocol.startswith("SASL"):
            result["sasl_mechanism"] = str(sec.get("sasl_mechanism", "PLAIN")).upper()
            if "sasl_jaas_config" in sec:
                user, password = _parse_jaas(str(sec["sasl_jaas_config"]))
                result["sasl_plain_username"] = user
                result["sasl_plain_password"] = password
            if "sasl_plain_username" in sec:
                result["sasl_plain_username"] = sec["sasl_plain_username"]
            if "sasl_plain_password" in sec:
                result["sasl_plain_password"] = sec["sasl_plain_password"]
        if protocol.endswith("SSL") and with_ssl_context:
            result["ssl_context"] = self._ssl_context(sec)
        return result

    @staticmethod
    def _ssl_context(sec: Mapping[str, Any]) -> ssl.SSLContext:
        from aiokafka_lite.security import create_ssl_context

        algorithm = str(sec.get("ssl_endpoint_identification_algorithm", "https")).strip()
        return create_ssl_context(
            cafile=sec.get("ssl_cafile"),
            certfile=sec.get("ssl_certfile"),
            keyfile=sec.get("ssl_keyfile"),
            password=sec.get("ssl_key_password"),
            check_hostname=algorithm.lower() == "https",
        )

    def consumer_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Keyword arguments for our ``Consumer`` (without group: the source assigns)."""
        kwargs: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        kwargs.update(self.common)
        kwargs.update(self.consumer)
        kwargs.update(self.security_kwargs(with_ssl_context=with_ssl_context))
        kwargs.setdefault("client_id", "aiokafka-lite-spark")
        return kwargs

    def producer_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Keyword arguments for our ``Producer`` (idempotent unless switched off)."""
        kwargs: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        kwargs.update(self.common)
        kwargs.update(self.producer)
        kwargs.update(self.security_kwargs(with_ssl_context=with_ssl_context))
        kwargs.setdefault("client_id", "aiokafka-lite-spark")
        return kwargs


def _security_check(security: Mapping[str, Any]) -> None:
    protocol = str(security.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise _fail(
            "kafka.security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, "
            f"got {security['security_protocol']!r}"
        )
    sasl_keys = {"sasl_mechanism", "sasl_jaas_config", "sasl_plain_username", "sasl_plain_password"}
    ssl_keys = {k for k in security if k.startswith("ssl_")}
    if not protocol.startswith("SASL") and sasl_keys & set(security):
        raise _fail(f"kafka.sasl.* options need kafka.security.protocol SASL_*, not {protocol}")
    if not protocol.endswith("SSL") and ssl_keys:
        raise _fail(
            f"kafka.ssl.* options need kafka.security.protocol SSL or SASL_SSL, not {protocol}"
        )
    if protocol.startswith("SASL"):
        mechanism = str(security.get("sasl_mechanism", "PLAIN")).upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise _fail(
                "kafka.sasl.mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 here, "
                f"got {mechanism!r}"
            )
        if "sasl_jaas_config" in security:
            _parse_jaas(str(security["sasl_jaas_config"]))
            if "sasl_plain_username" in security:
                raise _fail("give either kafka.sasl.jaas.config or kafka.sasl.username, not both")
        elif "sasl_plain_username" not in security or "sasl_plain_password" not in security:
            raise _fail(
                f"SASL {mechanism} needs kafka.sasl.jaas.config or kafka.sasl.username and "
                "kafka.sasl.password"
            )


def _client_options(
    options: Mapping[str, str], *, purpose: Literal["read", "write"]
) -> ClientOptions:
    bootstrap = options.get("kafka.bootstrap.servers")
    if bootstrap is None or not bootstrap.strip():
        raise _fail("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    common: dict[str, Any] = {}
    consumer: dict[str, Any] = {}
    producer: dict[str, Any] = {}
    security: dict[str, Any] = {}
    targets: dict[Target, dict[str, Any]] = {
        "common": common,
        "consumer": consumer,
        "producer": producer,
        "security": security,
    }
    for key, text in options.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka.") :]
        if name in REFUSED_CLIENT_OPTIONS:
            raise _fail(f"option kafka.{name} is not supported: {REFUSED_CLIENT_OPTIONS[name]}")
        spec = CLIENT_OPTIONS.get(name)
        if spec is None:
            raise _fail(
                f"unknown option kafka.{name}; the kafka.* options understood are: "
                + ", ".join(f"kafka.{n}" for n in sorted(CLIENT_OPTIONS))
            )
        if spec.target == "consumer" and purpose == "write":
            raise _fail(f"option kafka.{name} applies to reads, not writes")
        if spec.target == "producer" and purpose == "read":
            raise _fail(f"option kafka.{name} applies to writes, not reads")
        targets[spec.target][spec.kwarg] = spec.convert(f"kafka.{name}", text)
    _security_check(security)
    client = ClientOptions(bootstrap.strip(), common, consumer, producer, security)
    _validate_with_client_config(client, purpose)
    return client


def _validate_with_client_config(client: ClientOptions, purpose: Literal["read", "write"]) -> None:
    """Let our client's own config validation check the values, at planning time.

    The TLS context is left out (the PEM files are read in the tasks, where they must be);
    a default one stands in for the check.
    """
    try:
        if purpose == "read":
            from aiokafka_lite.consumer.config import ConsumerConfig

            kwargs = client.consumer_kwargs(with_ssl_context=False)
            ConsumerConfig.from_kwargs(**kwargs)
        else:
            from aiokafka_lite.producer.config import build_config

            kwargs = client.producer_kwargs(with_ssl_context=False)
            build_config(**kwargs)
    except errors.ConfigurationError as exc:
        raise _fail(f"invalid kafka.* option: {exc.message}") from None


# --- topics and offsets ---------------------------------------------------------


@dataclass(frozen=True)
class TopicSelection:
    """Which topic partitions to read: ``subscribe``, ``subscribePattern`` or ``assign``."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is selected (pattern: a full match, as in Kafka)."""
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        if self.kind == "subscribe":
            return topic in self.topics
        return any(tp.topic == topic for tp in self.partitions)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (per-partition; ``-2`` earliest,
    ``-1`` latest) or ``timestamp`` (the first offset whose timestamp is >= ``timestamp``
    milliseconds since the epoch).
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp"]
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None

    @property
    def offset_map(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read (batch or streaming) needs, validated."""

    client: ClientOptions
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    streaming: bool
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    #: What a starting timestamp with no matching record means: ``error`` or ``latest``.
    timestamp_strategy: Literal["error", "latest"] = "error"


@dataclass(frozen=True)
class WriteOptions:
    """Everything a write (batch or streaming) needs, validated."""

    client: ClientOptions
    #: The ``topic`` option: overrides a ``topic`` column when given.
    topic: str | None = None
    streaming: bool = False


#: Read options by lower-case name -> the name as documented.
READ_OPTION_NAMES = {
    name.lower(): name
    for name in (
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger",
        "includeHeaders",
        "failOnDataLoss",
        "minPartitions",
        "maxRecordsPerPartition",
        "kafkaConsumer.pollTimeoutMs",
    )
}
WRITE_OPTION_NAMES = {name.lower(): name for name in ("topic",)}
#: Options Spark itself adds (streaming writes pass ``checkpointLocation``) or that
#: only name the query; accepted and ignored.
SPARK_OPTION_NAMES = {name.lower(): name for name in ("checkpointLocation", "path", "queryName")}

_STREAMING_ONLY = {"maxoffsetspertrigger"}
_BATCH_ONLY = {"endingoffsets", "endingtimestamp"}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if lowered in result:
            raise _fail(f"option {key} given twice (option names are case-insensitive)")
        if not isinstance(value, str):
            value = str(value)
        result[lowered] = value
    return result


def _check_names(
    options: Mapping[str, str], allowed: Mapping[str, str], other: Mapping[str, str], what: str
) -> None:
    for key, value in options.items():
        if key.startswith("kafka.") or key in allowed or key in SPARK_OPTION_NAMES:
            if key == "path" and value.strip():
                raise _fail(
                    f"a path ({value!r}) means nothing to this source; name topics with "
                    + ("subscribe, subscribePattern or assign" if what == "reads" else "topic")
                )
            continue
        if key in other:
            raise _fail(f"option {other[key]} does not apply to {what}")
        known = sorted({*allowed.values(), "kafka.bootstrap.servers", "kafka.*"})
        raise _fail(f"unknown option {key!r}; options for {what} are: " + ", ".join(known))


def _topic_name(name: str, text: str) -> str:
    topic = text.strip()
    try:
        return check_topic_name(topic)
    except ValueError as exc:
        raise _fail(f"{name}: {text!r} is not a valid topic name ({exc})") from None


def _selection(options: Mapping[str, str]) -> TopicSelection:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        names = ", ".join(READ_OPTION_NAMES[k] for k in given) if given else "none"
        raise _fail(
            "give exactly one of the options subscribe, subscribePattern and assign "
            f"(given: {names})"
        )
    kind = given[0]
    text = options[kind]
    if kind == "subscribe":
        topics = tuple(
            dict.fromkeys(_topic_name("subscribe", t) for t in text.split(",") if t.strip())
        )
        if not topics:
            raise _fail("option subscribe needs at least one topic name")
        return TopicSelection("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not text.strip():
            raise _fail("option subscribePattern is empty")
        try:
            re.compile(text)
        except re.error as exc:
            raise _fail(f"option subscribePattern is not a valid regex: {exc}") from None
        return TopicSelection("subscribePattern", pattern=text)
    try:
        parsed = json.loads(text)
    except ValueError:
        raise _fail(
            'option assign must be JSON like {"topicA":[0,1],"topicB":[0]}, got ' + repr(text)
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise _fail('option assign must be a non-empty JSON object like {"topicA":[0,1]}')
    partitions: list[TopicPartition] = []
    for topic, parts in parsed.items():
        _topic_name("assign", topic)
        if (
            not isinstance(parts, list)
            or not parts
            or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        ):
            raise _fail(f"option assign: topic {topic!r} needs a list of partition numbers")
        partitions.extend(TopicPartition(topic, p) for p in dict.fromkeys(parts))
    return TopicSelection("assign", partitions=tuple(partitions))


def _offset_json(name: str, text: str) -> tuple[tuple[TopicPartition, int], ...]:
    try:
        parsed = json.loads(text)
    except ValueError:
        raise _fail(
            f"option {name} must be earliest, latest or JSON like "
            f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}'
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise _fail(f'option {name} JSON must be an object like {{"topicA":{{"0":23}}}}')
    result: list[tuple[TopicPartition, int]] = []
    for topic, parts in parsed.items():
        _topic_name(name, topic)
        if not isinstance(parts, dict) or not parts:
            raise _fail(f"option {name}: topic {topic!r} needs an object of partition: offset")
        for key, offset in parts.items():
            try:
                partition = int(key)
            except ValueError:
                raise _fail(f"option {name}: {key!r} is not a partition number") from None
            if partition < 0:
                raise _fail(f"option {name}: partition {key!r} is negative")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise _fail(
                    f"option {name}: offset of {topic}-{partition} must be an integer >= 0, "
                    f"-2 (earliest) or -1 (latest), got {offset!r}"
                )
            result.append((TopicPartition(topic, partition), offset))
    return tuple(result)


def _offset_spec(name: str, text: str) -> OffsetSpec:
    lowered = text.strip().lower()
    if lowered == "earliest":
        return OffsetSpec("earliest")
    if lowered == "latest":
        return OffsetSpec("latest")
    return OffsetSpec("offsets", offsets=_offset_json(name, text))


def _check_offsets_cover(name: str, spec: OffsetSpec, selection: TopicSelection) -> None:
    """Per-partition JSON must name selected topics only (assign: exactly the partitions)."""
    if spec.kind != "offsets":
        return
    named = {tp for tp, _ in spec.offsets}
    for tp in named:
        if not selection.matches(tp.topic):
            raise _fail(f"option {name} names {tp.topic}-{tp.partition}, which is not read")
    if selection.kind == "assign" and named != set(selection.partitions):
        missing = sorted(set(selection.partitions) - named)
        extra = sorted(named - set(selection.partitions))
        raise _fail(
            f"option {name} must give an offset for exactly the assigned partitions "
            f"(missing: {_tps(missing)}; not assigned: {_tps(extra)})"
        )


def _tps(tps: Iterable[TopicPartition]) -> str:
    text = ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)
    return text or "none"


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Validate the options of ``spark.read`` (``streaming=False``) or ``spark.readStream``.

    ``streaming=None`` (not known yet, as when Spark asks for the schema) checks
    everything but what depends on the kind of read.
    """
    opts = _lower(options)
    _check_names(opts, READ_OPTION_NAMES, WRITE_OPTION_NAMES, "reads")
    for key in opts:
        if streaming is True and key in _BATCH_ONLY:
            raise _fail(f"option {READ_OPTION_NAMES[key]} applies to batch reads only")
        if streaming is False and key in _STREAMING_ONLY:
            raise _fail(f"option {READ_OPTION_NAMES[key]} applies to streaming reads only")
    client = _client_options(opts, purpose="read")
    selection = _selection(opts)

    if "startingoffsets" in opts and "startingtimestamp" in opts:
        raise _fail("give either startingOffsets or startingTimestamp, not both")
    if "endingoffsets" in opts and "endingtimestamp" in opts:
        raise _fail("give either endingOffsets or endingTimestamp, not both")

    if "startingtimestamp" in opts:
        starting = OffsetSpec(
            "timestamp", timestamp=_to_int("startingTimestamp", opts["startingtimestamp"])
        )
    elif "startingoffsets" in opts:
        starting = _offset_spec("startingOffsets", opts["startingoffsets"])
    else:
        starting = OffsetSpec("latest" if streaming else "earliest")

    if "endingtimestamp" in opts:
        ending = OffsetSpec(
            "timestamp", timestamp=_to_int("endingTimestamp", opts["endingtimestamp"])
        )
    elif "endingoffsets" in opts:
        ending = _offset_spec("endingOffsets", opts["endingoffsets"])
    else:
        ending = OffsetSpec("latest")

    if streaming is False:
        if starting.kind == "latest" or any(o == LATEST for _, o in starting.offsets):
            raise _fail("startingOffsets cannot be latest (-1) for batch reads")
        if ending.kind == "earliest" or any(o == EARLIEST for _, o in ending.offsets):
            raise _fail("endingOffsets cannot be earliest (-2) for batch reads")
    _check_offsets_cover("startingOffsets", starting, selection)
    _check_offsets_cover("endingOffsets", ending, selection)
    if (
        starting.kind == "offsets"
        and ending.kind == "offsets"
        and {tp for tp, _ in starting.offsets} != {tp for tp, _ in ending.offsets}
    ):
        raise _fail("startingOffsets and endingOffsets must name the same partitions")
    if starting.kind == "offsets" and ending.kind == "offsets":
        end_map = ending.offset_map
        for tp, start in starting.offsets:
            end = end_map[tp]
            if start >= 0 and end >= 0 and end < start:
                raise _fail(
                    f"endingOffsets ({end}) is before startingOffsets ({start}) for "
                    f"{tp.topic}-{tp.partition}"
                )

    strategy_text = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_text not in ("error", "latest"):
        raise _fail(
            "option startingOffsetsByTimestampStrategy must be error or latest, "
            f"got {strategy_text!r}"
        )
    strategy: Literal["error", "latest"] = "error" if strategy_text == "error" else "latest"

    max_per_trigger = (
        _to_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"], minimum=1)
        if "maxoffsetspertrigger" in opts
        else None
    )
    min_partitions = (
        _to_int("minPartitions", opts["minpartitions"], minimum=1)
        if "minpartitions" in opts
        else None
    )
    max_records = (
        _to_int("maxRecordsPerPartition", opts["maxrecordsperpartition"], minimum=1)
        if "maxrecordsperpartition" in opts
        else DEFAULT_MAX_RECORDS_PER_PARTITION
    )
    return ReadOptions(
        client=client,
        selection=selection,
        starting=starting,
        ending=ending,
        streaming=bool(streaming),
        include_headers=_to_bool("includeHeaders", opts.get("includeheaders", "false")),
        fail_on_data_loss=_to_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        poll_timeout_ms=_to_int(
            "kafkaConsumer.pollTimeoutMs",
            opts.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS)),
            minimum=1,
        ),
        timestamp_strategy=strategy,
    )


def parse_write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """Validate the options of ``df.write`` (``streaming=False``) or ``df.writeStream``."""
    opts = _lower(options)
    _check_names(opts, WRITE_OPTION_NAMES, READ_OPTION_NAMES, "writes")
    client = _client_options(opts, purpose="write")
    topic = _topic_name("topic", opts["topic"]) if "topic" in opts else None
    return WriteOptions(client=client, topic=topic, streaming=streaming)
