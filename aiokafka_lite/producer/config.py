"""Producer configuration: one validated, immutable value built at construction.

Every option is checked when the producer is built, so a bad value fails there with
:class:`~aiokafka_lite.errors.ConfigurationError` rather than at the first send. The
names are aiokafka's where aiokafka has the option (``max_batch_size``, ``linger_ms``,
...) and the Java client's, in snake case, otherwise (``buffer_memory``,
``delivery_timeout_ms``, ``max_in_flight_requests_per_connection``).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.connection import (
    DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    check_receive_message_max_bytes,
)
from aiokafka_lite.producer.partitioner import Partitioner, resolve_partitioner
from aiokafka_lite.protocol import codecs
from aiokafka_lite.security import SecurityConfig

#: The largest value of a request's int32 field (request and transaction timeouts).
INT32_MAX = 2**31 - 1

log = logging.getLogger(__name__)

__all__ = ["MISSING", "ProducerConfig", "build_config"]

Serializer = Callable[[Any], bytes | bytearray | memoryview | None]

_client_ids = itertools.count(1)

#: Idempotence allows at most this many in-flight requests per connection (Kafka's rule).
MAX_IDEMPOTENT_IN_FLIGHT = 5

#: Options aiokafka (or the Java client) spells differently, mapped to ours.
ALIASES: Mapping[str, str] = {
    "batch_size": "max_batch_size",
    "max_in_flight_requests": "max_in_flight_requests_per_connection",
    "max_in_flight": "max_in_flight_requests_per_connection",
    "compression": "compression_type",
    "retry_backoff": "retry_backoff_ms",
    "partitioner_adaptive_partitioning_enable": "partitioner_adaptive_partitioning",
}

#: aiokafka options accepted for compatibility that change nothing here.
IGNORED_OPTIONS = frozenset(
    {"loop", "api_version", "sasl_kerberos_service_name", "sasl_kerberos_domain_name"}
)


@dataclass(frozen=True)
class ProducerConfig:
    """Validated producer settings (see :class:`~aiokafka_lite.producer.Producer`)."""

    bootstrap_servers: str | tuple[str, ...] = "localhost"
    client_id: str = ""
    acks: int = -1
    compression_type: str = "none"
    compression_id: int = 0
    linger_ms: float = 5.0
    max_batch_size: int = 16384
    max_request_size: int = 1048576
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: int = 60000
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    max_in_flight_requests_per_connection: int = 5
    enable_idempotence: bool = True
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    partitioner: Partitioner = field(default_factory=lambda: resolve_partitioner(None, 16384))
    partitioner_adaptive_partitioning: bool = True
    partitioner_availability_timeout_ms: int = 0
    partitioner_ignore_keys: bool = False
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    interceptors: tuple[Any, ...] = ()
    metadata_max_age_ms: int = 300000
    connect_timeout_ms: int = 10000
    connections_max_idle_ms: int = 540000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    allow_auto_create_topics: bool = True
    receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
    security: SecurityConfig = field(default_factory=SecurityConfig)

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None


def _int(name: str, value: object, *, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.ConfigurationError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise errors.ConfigurationError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise errors.ConfigurationError(f"{name} must be <= {maximum}, got {value}")
    return value


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise errors.ConfigurationError(f"{name} must be a bool, got {value!r}")
    return value


def _number(name: str, value: object, *, minimum: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.ConfigurationError(f"{name} must be a number, got {value!r}")
    if not value >= minimum:  # also rejects NaN
        raise errors.ConfigurationError(f"{name} must be >= {minimum}, got {value}")
    if value == math.inf:
        raise errors.ConfigurationError(f"{name} must be finite, got {value}")
    return float(value)


class _Missing:
    """aiokafka's ``_missing``: an option left at its default (frameworks pass it on)."""

    def __repr__(self) -> str:
        return "<default>"


#: Given for ``acks``, the default (``"all"``) applies; aiokafka's
#: ``aiokafka.producer.producer._missing`` is this object.
MISSING = _Missing()


def _acks(value: object) -> int:
    if value is MISSING:
        return -1
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "all":
            return -1
        if text in ("0", "1", "-1"):
            return int(text)
    elif not isinstance(value, bool) and value in (0, 1, -1):
        return int(value)
    raise errors.ConfigurationError(f'acks must be 0, 1, -1 or "all", got {value!r}')


def _serializer(name: str, value: object) -> Serializer | None:
    if value is None:
        return None
    if not callable(value):
        raise errors.ConfigurationError(f"{name} must be callable, got {type(value).__name__}")
    return value


def _interceptors(value: object) -> tuple[Any, ...]:
    if value is None:
        return ()
    items = (value,) if hasattr(value, "on_send") else value
    if not isinstance(items, Sequence | tuple | list):
        raise errors.ConfigurationError("interceptors must be a sequence of interceptor objects")
    result = tuple(items)
    for item in result:
        if not callable(getattr(item, "on_send", None)) or not callable(
            getattr(item, "on_acknowledgement", None)
        ):
            raise errors.ConfigurationError(
                f"interceptor {item!r} needs on_send(record) and "
                "on_acknowledgement(metadata, exception) methods"
            )
    return result


def _security(options: dict[str, Any]) -> SecurityConfig:
    given = options.pop("security", None)
    protocol = options.pop("security_protocol", None)
    ssl_context = options.pop("ssl_context", None)
    ssl_server_hostname = options.pop("ssl_server_hostname", None)
    mechanism = options.pop("sasl_mechanism", None)
    username = options.pop("sasl_plain_username", None)
    password = options.pop("sasl_plain_password", None)
    token_provider = options.pop("sasl_oauth_token_provider", None)
    if given is not None:
        if not isinstance(given, SecurityConfig):
            raise errors.ConfigurationError("security must be a SecurityConfig")
        if any(
            v is not None
            for v in (
                protocol,
                ssl_context,
                ssl_server_hostname,
                username,
                password,
                token_provider,
            )
        ):
            raise errors.ConfigurationError(
                "give either security=SecurityConfig(...) or the individual security options"
            )
        return given
    return SecurityConfig.from_options(
        security_protocol=protocol or "PLAINTEXT",
        ssl_context=ssl_context,
        ssl_server_hostname=ssl_server_hostname,
        sasl_mechanism=mechanism,
        sasl_plain_username=username,
        sasl_plain_password=password,
        sasl_oauth_token_provider=token_provider,
    )


def _bootstrap(value: object) -> str | tuple[str, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise errors.ConfigurationError("bootstrap_servers is empty")
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise errors.ConfigurationError(
        f"bootstrap_servers must be 'host:port[,host:port]' or a list of them, got {value!r}"
    )


def build_config(**kwargs: Any) -> ProducerConfig:
    """Validate keyword options (ours, aiokafka's or Java's names) into a `ProducerConfig`."""
    options: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in IGNORED_OPTIONS:
            if value is not None and not (key == "api_version" and value == "auto"):
                log.debug("option %s=%r is accepted for compatibility and ignored", key, value)
            continue
        name = ALIASES.get(key, key)
        if name in options:
            raise errors.ConfigurationError(f"option {name} given twice (as {key})")
        options[name] = value

    security = _security(options)
    known = {f for f in ProducerConfig.__dataclass_fields__ if f not in ("compression_id",)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise errors.ConfigurationError(f"unknown producer option(s): {', '.join(unknown)}")

    defaults = ProducerConfig.__dataclass_fields__
    get = options.get

    def default(name: str) -> Any:
        return defaults[name].default

    bootstrap = _bootstrap(get("bootstrap_servers", default("bootstrap_servers")))
    client_id = get("client_id")
    if client_id is None:
        client_id = f"aiokafka-lite-producer-{next(_client_ids)}"
    elif not isinstance(client_id, str):
        raise errors.ConfigurationError(f"client_id must be a str, got {client_id!r}")

    acks = _acks(get("acks", "all"))

    compression = get("compression_type")
    if compression is not None and not isinstance(compression, str):
        raise errors.ConfigurationError(f"compression_type must be a str, got {compression!r}")
    try:
        compression_id = codecs.check_codec(
            None if compression is None or compression == "none" else compression
        )
    except errors.UnsupportedCodecError as exc:
        raise errors.ConfigurationError(f"compression_type: {exc.message}") from None
    compression_name = codecs.codec_name(compression_id)

    linger_ms = _number("linger_ms", get("linger_ms", default("linger_ms")))
    max_batch_size = _int("max_batch_size", get("max_batch_size", 16384), minimum=1)
    max_request_size = _int("max_request_size", get("max_request_size", 1048576), minimum=1)
    buffer_memory = _int("buffer_memory", get("buffer_memory", default("buffer_memory")), minimum=1)
    max_block_ms = _int("max_block_ms", get("max_block_ms", 60000))
    # (Both go in requests as int32 fields.)
    request_timeout_ms = _int(
        "request_timeout_ms", get("request_timeout_ms", 30000), minimum=1, maximum=INT32_MAX
    )
    retry_backoff_ms = _int("retry_backoff_ms", get("retry_backoff_ms", 100))
    retry_backoff_max_ms = _int(
        "retry_backoff_max_ms", get("retry_backoff_max_ms", max(1000, retry_backoff_ms))
    )
    if retry_backoff_max_ms < retry_backoff_ms:
        raise errors.ConfigurationError("retry_backoff_max_ms must be >= retry_backoff_ms")

    minimum_delivery = int(linger_ms) + request_timeout_ms
    if options.get("delivery_timeout_ms") is not None:
        delivery_timeout_ms = _int("delivery_timeout_ms", options["delivery_timeout_ms"], minimum=1)
        if delivery_timeout_ms < minimum_delivery:
            raise errors.ConfigurationError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be >= linger_ms + "
                f"request_timeout_ms ({minimum_delivery})"
            )
    else:
        delivery_timeout_ms = max(120000, minimum_delivery)

    max_in_flight = _int(
        "max_in_flight_requests_per_connection",
        get("max_in_flight_requests_per_connection", 5),
        minimum=1,
    )

    transactional_id = get("transactional_id")
    if transactional_id is not None and (
        not isinstance(transactional_id, str) or not transactional_id
    ):
        raise errors.ConfigurationError("transactional_id must be a non-empty str or None")
    transaction_timeout_ms = _int(
        "transaction_timeout_ms", get("transaction_timeout_ms", 60000), minimum=1, maximum=INT32_MAX
    )

    idempotence = get("enable_idempotence")
    if idempotence is not None and not isinstance(idempotence, bool):
        raise errors.ConfigurationError(f"enable_idempotence must be a bool, got {idempotence!r}")
    if idempotence is None:
        # Like the Java client: on by default unless another option rules it out, in
        # which case it is switched off quietly (it was not asked for explicitly).
        conflicts = acks != -1 or max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT
        if transactional_id is not None and conflicts:
            idempotence = True  # the checks below explain the conflict
        else:
            idempotence = not conflicts
    if idempotence:
        if acks != -1:
            raise errors.ConfigurationError(
                'enable_idempotence requires acks="all"'
                + (" (transactions need idempotence)" if transactional_id else "")
            )
        if max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
            raise errors.ConfigurationError(
                "enable_idempotence requires max_in_flight_requests_per_connection <= "
                f"{MAX_IDEMPOTENT_IN_FLIGHT}, got {max_in_flight}"
            )
    elif transactional_id is not None:
        raise errors.ConfigurationError("transactional_id requires enable_idempotence=True")

    adaptive = _bool(
        "partitioner_adaptive_partitioning", get("partitioner_adaptive_partitioning", True)
    )
    availability_timeout_ms = _int(
        "partitioner_availability_timeout_ms", get("partitioner_availability_timeout_ms", 0)
    )
    ignore_keys = _bool("partitioner_ignore_keys", get("partitioner_ignore_keys", False))
    partitioner = resolve_partitioner(
        get("partitioner"),
        max_batch_size,
        adaptive=adaptive,
        availability_timeout_ms=availability_timeout_ms,
        ignore_keys=ignore_keys,
        linger_ms=linger_ms,
    )

    allow_auto = _bool("allow_auto_create_topics", get("allow_auto_create_topics", True))

    return ProducerConfig(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks=acks,
        compression_type=compression_name,
        compression_id=compression_id,
        linger_ms=linger_ms,
        max_batch_size=max_batch_size,
        max_request_size=max_request_size,
        buffer_memory=buffer_memory,
        max_block_ms=max_block_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=request_timeout_ms,
        retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=retry_backoff_max_ms,
        max_in_flight_requests_per_connection=max_in_flight,
        enable_idempotence=idempotence,
        transactional_id=transactional_id,
        transaction_timeout_ms=transaction_timeout_ms,
        partitioner=partitioner,
        partitioner_adaptive_partitioning=adaptive,
        partitioner_availability_timeout_ms=availability_timeout_ms,
        partitioner_ignore_keys=ignore_keys,
        key_serializer=_serializer("key_serializer", get("key_serializer")),
        value_serializer=_serializer("value_serializer", get("value_serializer")),
        interceptors=_interceptors(get("interceptors")),
        metadata_max_age_ms=_int(
            "metadata_max_age_ms", get("metadata_max_age_ms", 300000), minimum=1
        ),
        connect_timeout_ms=_int("connect_timeout_ms", get("connect_timeout_ms", 10000), minimum=1),
        connections_max_idle_ms=_int(
            "connections_max_idle_ms", get("connections_max_idle_ms", 540000), minimum=1
        ),
        reconnect_backoff_ms=_int("reconnect_backoff_ms", get("reconnect_backoff_ms", 50)),
        reconnect_backoff_max_ms=_int(
            "reconnect_backoff_max_ms", get("reconnect_backoff_max_ms", 1000)
        ),
        allow_auto_create_topics=allow_auto,
        receive_message_max_bytes=check_receive_message_max_bytes(
            get("receive_message_max_bytes", DEFAULT_RECEIVE_MESSAGE_MAX_BYTES)
        ),
        security=security,
    )


def client_kwargs(config: ProducerConfig) -> dict[str, Any]:
    """The `KafkaClient` keyword arguments for this producer."""
    return {
        "client_id": config.client_id,
        "security": config.security,
        "request_timeout_ms": config.request_timeout_ms,
        "connect_timeout_ms": config.connect_timeout_ms,
        "metadata_max_age_ms": config.metadata_max_age_ms,
        "retry_backoff_ms": config.retry_backoff_ms,
        "reconnect_backoff_ms": config.reconnect_backoff_ms,
        "reconnect_backoff_max_ms": config.reconnect_backoff_max_ms,
        "allow_auto_create_topics": config.allow_auto_create_topics,
        "receive_message_max_bytes": config.receive_message_max_bytes,
    }
