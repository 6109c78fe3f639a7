"""Option parsing and validation for the Spark data source (no Spark import here).

Spark hands a data source its options as a case-insensitive map of strings. Everything
is checked here, on the driver, when the query is planned, so a typo or a conflicting
pair fails with one clear :class:`~aiokafka_lite.errors.ConfigurationError` instead of
failing in every task.

Option names follow Spark's built-in Kafka source where they mean the same thing.
``kafka.*`` options are Kafka's configuration names, translated to the keyword arguments
of our producer and consumer by :mod:`aiokafka_lite.config_map` (the same table the CLI
and Python code use), less a few that make no sense here (:data:`REFUSED_CLIENT_OPTIONS`).

The parsed values are small frozen dataclasses holding only plain Python values, so they
pickle into Spark tasks. TLS contexts are built inside each task from file paths.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka_lite import config_map, errors
from aiokafka_lite.config_map import ClientKind
from aiokafka_lite.structs import TopicPartition, check_topic_name

log = logging.getLogger(__name__)

__all__ = [
    "EARLIEST",
    "LATEST",
    "ClientOptions",
    "ReadBound",
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
#: Default least work of a read task: Kafka partitions with fewer records than this
#: share a task (a Spark task costs a Python worker round and a connected consumer,
#: about what reading 20,000 records costs), so small micro-batches take one task.
DEFAULT_MIN_RECORDS_PER_PARTITION = 20_000
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


_DURATION = re.compile(r"\s*(\d+)\s*(ms|s|m|h|d)?\s*", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _to_duration_ms(name: str, text: str) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``; a bare number is ms)."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise _fail(f"option {name} must be a duration such as 15m, 30s or 500ms, got {text!r}")
    return int(found.group(1)) * _DURATION_MS[(found.group(2) or "ms").lower()]


def _to_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise _fail(f"option {name} must be true or false, got {text!r}")


# --- kafka.* options ----------------------------------------------------------

#: ``kafka.*`` options refused here, with the reason (as Spark's Kafka source refuses
#: most). The names and values of the others are those of
#: :mod:`aiokafka_lite.config_map`, the one table the CLI and Python code use too.
REFUSED_CLIENT_OPTIONS: Mapping[str, str] = {
    "group.id": "the data source reads assigned partitions without a consumer group",
    "group.instance.id": "the data source reads assigned partitions without a consumer group",
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "the data source commits no offsets; Spark's checkpoint tracks them",
    "key.deserializer": "keys are always read as binary; cast the key column in Spark",
    "value.deserializer": "values are always read as binary; cast the value column in Spark",
    "key.serializer": "give the key column as string or binary",
    "value.serializer": "give the value column as string or binary",
    "interceptor.classes": "interceptors are not supported",
    "transactional.id": "set exactlyOnce=true: the sink makes one transactional id per task",
    "transaction.timeout.ms": "the exactly-once sink uses the producer's default",
}

#: The clients that serve each purpose.
_CLIENT_FOR: Mapping[str, ClientKind] = {"read": "consumer", "write": "producer"}


@dataclass(frozen=True)
class ClientOptions:
    """Connection settings of our client, as plain picklable values.

    ``settings`` are the ``kafka.*`` options by keyword (:mod:`aiokafka_lite.config_map`);
    TLS contexts are built from them in each task.
    """

    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return str(self.settings["bootstrap_servers"])

    def __repr__(self) -> str:
        shown = {
            key: ("***" if "password" in key or "jaas" in key else value)
            for key, value in self.settings.items()
        }
        return f"ClientOptions(settings={shown!r})"

    def _kwargs(self, kind: ClientKind, with_ssl_context: bool) -> dict[str, Any]:
        kwargs = config_map.client_kwargs(kind, self.settings, with_ssl_context=with_ssl_context)
        kwargs.setdefault("client_id", "aiokafka-lite-spark")
        return kwargs

    def consumer_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Keyword arguments for our ``Consumer`` (without group: the source assigns)."""
        return self._kwargs("consumer", with_ssl_context)

    def producer_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Keyword arguments for our ``Producer`` (idempotent unless switched off)."""
        return self._kwargs("producer", with_ssl_context)

    def admin_kwargs(self, *, with_ssl_context: bool = True) -> dict[str, Any]:
        """Keyword arguments for our ``AdminClient`` (the exactly-once sink's markers)."""
        return self._kwargs("admin", with_ssl_context)


def _client_options(
    options: Mapping[str, str], *, purpose: Literal["read", "write"]
) -> ClientOptions:
    bootstrap = options.get("kafka.bootstrap.servers")
    if bootstrap is None or not bootstrap.strip():
        raise _fail("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    kafka_options: dict[str, str] = {}
    for key, text in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in REFUSED_CLIENT_OPTIONS:
            raise _fail(f"option kafka.{name} is not supported: {REFUSED_CLIENT_OPTIONS[name]}")
        try:
            clients = config_map.clients_of(config_map.find_option(name, prefix="kafka."))
        except errors.ConfigurationError as exc:
            raise _fail(exc.message) from None
        if _CLIENT_FOR[purpose] not in clients:
            other = "writes" if purpose == "read" else "reads"
            raise _fail(f"option kafka.{name} applies to {other}, not {purpose}s")
        kafka_options[name] = text
    try:
        settings = config_map.parse_config(kafka_options, prefix="kafka.")
        config_map.check_security(settings, prefix="kafka.")
    except errors.ConfigurationError as exc:
        raise _fail(exc.message) from None
    client = ClientOptions(settings)
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
class ReadBound:
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
    starting: ReadBound
    ending: ReadBound
    streaming: bool
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    #: ``minOffsetsPerTrigger``: a micro-batch waits until this many new offsets are
    #: there, or until ``max_trigger_delay_ms`` has passed since the last one.
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    #: ``minRecordsPerPartition``: smaller Kafka ranges are read together by one task.
    min_records_per_partition: int = DEFAULT_MIN_RECORDS_PER_PARTITION
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
    #: The ``exactlyOnce`` option: each task writes in a Kafka transaction (see writer.py).
    exactly_once: bool = False
    #: The ``transactionalIdPrefix`` option: the start of the sink's transactional ids
    #: and of its marker groups.
    transactional_id_prefix: str = "aiokafka-lite-spark"


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
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "includeHeaders",
        "failOnDataLoss",
        "minPartitions",
        "maxRecordsPerPartition",
        "minRecordsPerPartition",
        "kafkaConsumer.pollTimeoutMs",
    )
}
WRITE_OPTION_NAMES = {
    name.lower(): name for name in ("topic", "exactlyOnce", "transactionalIdPrefix")
}
#: Options Spark itself adds (streaming writes pass ``checkpointLocation``) or that
#: only name the query; accepted and ignored.
SPARK_OPTION_NAMES = {name.lower(): name for name in ("checkpointLocation", "path", "queryName")}

_STREAMING_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"}
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


def _offset_spec(name: str, text: str) -> ReadBound:
    lowered = text.strip().lower()
    if lowered == "earliest":
        return ReadBound("earliest")
    if lowered == "latest":
        return ReadBound("latest")
    return ReadBound("offsets", offsets=_offset_json(name, text))


def _check_offsets_cover(name: str, spec: ReadBound, selection: TopicSelection) -> None:
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
        starting = ReadBound(
            "timestamp", timestamp=_to_int("startingTimestamp", opts["startingtimestamp"])
        )
    elif "startingoffsets" in opts:
        starting = _offset_spec("startingOffsets", opts["startingoffsets"])
    else:
        starting = ReadBound("latest" if streaming else "earliest")

    if "endingtimestamp" in opts:
        ending = ReadBound(
            "timestamp", timestamp=_to_int("endingTimestamp", opts["endingtimestamp"])
        )
    elif "endingoffsets" in opts:
        ending = _offset_spec("endingOffsets", opts["endingoffsets"])
    else:
        ending = ReadBound("latest")

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

    if (
        starting.kind == "timestamp"
        and ending.kind == "timestamp"
        and starting.timestamp is not None
        and ending.timestamp is not None
        and ending.timestamp < starting.timestamp
    ):
        raise _fail(
            f"endingTimestamp ({ending.timestamp}) is before startingTimestamp "
            f"({starting.timestamp})"
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
    min_per_trigger = (
        _to_int("minOffsetsPerTrigger", opts["minoffsetspertrigger"], minimum=1)
        if "minoffsetspertrigger" in opts
        else None
    )
    if (
        min_per_trigger is not None
        and max_per_trigger is not None
        and min_per_trigger > max_per_trigger
    ):
        raise _fail(
            f"option minOffsetsPerTrigger ({min_per_trigger}) is above maxOffsetsPerTrigger "
            f"({max_per_trigger})"
        )
    max_delay_ms = (
        _to_duration_ms("maxTriggerDelay", opts["maxtriggerdelay"])
        if "maxtriggerdelay" in opts
        else ReadOptions.max_trigger_delay_ms
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
    min_records = (
        _to_int("minRecordsPerPartition", opts["minrecordsperpartition"], minimum=0)
        if "minrecordsperpartition" in opts
        else DEFAULT_MIN_RECORDS_PER_PARTITION
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
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay_ms,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        min_records_per_partition=min_records,
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
    exactly_once = _to_bool("exactlyOnce", opts.get("exactlyonce", "false"))
    prefix = opts.get("transactionalidprefix", WriteOptions.transactional_id_prefix).strip()
    if not prefix or len(prefix) > 100 or not _ID_CHARS.fullmatch(prefix):
        raise _fail(
            "option transactionalIdPrefix must be 1-100 characters of letters, digits, "
            f"'.', '_' and '-', got {prefix!r}"
        )
    if exactly_once and client.settings.get("enable_idempotence") is False:
        raise _fail("exactlyOnce=true needs the idempotent producer (kafka.enable.idempotence)")
    if exactly_once:
        # The tasks' producers are transactional: what a transactional producer refuses
        # (kafka.acks other than all, kafka.max.in.flight.requests.per.connection above
        # 5) must fail here, not in every task.
        from aiokafka_lite.producer.config import build_config

        try:
            build_config(
                **client.producer_kwargs(with_ssl_context=False),
                transactional_id=f"{prefix}-planning",
            )
        except errors.ConfigurationError as exc:
            raise _fail(f"exactlyOnce=true: invalid kafka.* option: {exc.message}") from None
    return WriteOptions(
        client=client,
        topic=topic,
        streaming=streaming,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
    )


#: What a transactional id prefix may hold (it also names consumer groups).
_ID_CHARS = re.compile(r"[A-Za-z0-9._-]+")
