"""Kafka's dotted option names, mapped to the keyword arguments of our clients.

``bootstrap.servers``, ``sasl.username``, ``linger.ms``, ``group.id``: the names Kafka
users know from the Java client and librdkafka. This module is the one table from those
names to the keywords of :class:`~aiokafka_lite.producer.Producer`,
:class:`~aiokafka_lite.consumer.Consumer` and :class:`~aiokafka_lite.admin.AdminClient`,
with how each value is converted. The CLI's ``--config`` file, the Spark data source's
``kafka.*`` options and :func:`producer_from_config`, :func:`consumer_from_config` and
:func:`admin_from_config` all read options through it, so a name means the same thing
and its value is converted the same way everywhere. docs/configuration.md shows the
table.

The tables, by the clients an option applies to: :data:`CONNECTION_OPTIONS` and
:data:`SECURITY_OPTIONS` (every client), :data:`PRODUCER_OPTIONS`,
:data:`CONSUMER_OPTIONS` and :data:`ADMIN_OPTIONS`. :func:`parse_config` turns options
into *settings*: plain values by keyword, which pickle (the Spark data source sends them
to its tasks). The security settings (file paths, credentials) are not keywords of the
clients: :func:`security_kwargs` builds the clients' security keywords from them, TLS
context included, where the client is built.

Values may be strings (a properties file, Spark options) or Python values (a dict in
code), converted alike: integers, numbers, booleans (``true``/``false``), lists
(comma-separated) and strings. An unknown name raises
:class:`~aiokafka_lite.errors.ConfigurationError` naming it and the closest known name.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, create_ssl_context

__all__ = [
    "ADMIN_OPTIONS",
    "CONNECTION_OPTIONS",
    "CONSUMER_OPTIONS",
    "PRODUCER_OPTIONS",
    "SASL_SETTINGS",
    "SECURITY_OPTIONS",
    "TLS_SETTINGS",
    "UNSUPPORTED_OPTIONS",
    "ClientKind",
    "ConfigOption",
    "admin_from_config",
    "all_options",
    "check_security",
    "client_kwargs",
    "clients_of",
    "consumer_from_config",
    "find_option",
    "keywords_of",
    "parse_config",
    "producer_from_config",
    "security_kwargs",
]

ClientKind = Literal["producer", "consumer", "admin"]

_CLIENT_NAMES: Mapping[ClientKind, str] = {
    "producer": "the producer",
    "consumer": "the consumer",
    "admin": "the admin client",
}


# --- value converters: (option name as written, value) -> the keyword's value -------------


def _fail(name: str, must: str, value: object) -> errors.ConfigurationError:
    return errors.ConfigurationError(f"{name} must be {must}, got {value!r}")


def _integer(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise _fail(name, "an integer", value)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise _fail(name, "an integer", value) from None
    else:
        raise _fail(name, "an integer", value)
    if number < 0:
        raise _fail(name, ">= 0", value)
    return number


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _fail(name, "a number", value)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise _fail(name, "a number", value) from None
    if not number >= 0:  # also NaN
        raise _fail(name, ">= 0", value)
    return number


_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def _boolean(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
    raise _fail(name, "true or false", value)


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(name, "a non-empty string", value)
    return value.strip()


def _upper(name: str, value: object) -> str:
    return _text(name, value).upper()


def _secret(name: str, value: object) -> str:
    """A password: kept exactly as given (spaces too), never shown in a message."""
    if not isinstance(value, str):
        raise errors.ConfigurationError(f"{name} must be a string")
    return value


def _names(name: str, value: object) -> list[str]:
    """A list: ``"a, b"`` or a list of strings."""
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise _fail(name, "a comma-separated list", value)
    if not items:
        raise _fail(name, "a non-empty list", value)
    return items


def _servers(name: str, value: object) -> str | list[str]:
    """``host:port[,host:port...]`` as given: a string stays a string, a list a list."""
    if isinstance(value, str):
        return _text(name, value)
    return _names(name, value)


def _hostname_check(name: str, value: object) -> bool:
    """``ssl.endpoint.identification.algorithm``: ``https`` checks; empty or ``none`` not."""
    if isinstance(value, str) and value.strip().lower() in ("https", "", "none"):
        return value.strip().lower() == "https"
    raise _fail(name, "https, or empty or none (no host name check)", value)


_JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


def _jaas_credentials(name: str, text: str) -> tuple[str, str]:
    """User name and password from a PlainLoginModule/ScramLoginModule JAAS line."""
    if "PlainLoginModule" not in text and "ScramLoginModule" not in text:
        raise errors.ConfigurationError(
            f"{name}: only PlainLoginModule and ScramLoginModule are supported "
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
        raise errors.ConfigurationError(f'{name} needs username="..." and password="..."')
    return found["username"], found["password"]


def _jaas(name: str, value: object) -> str:
    text = _secret(name, value)
    _jaas_credentials(name, text)
    return text


# --- the tables ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigOption:
    """One option: Kafka's name, our keyword, and how a value is converted.

    What each means is in docs/configuration.md (a test keeps the two in step).
    """

    name: str
    keyword: str
    convert: Callable[[str, object], Any]
    #: Other spellings accepted (librdkafka's, older ones of this project's CLI).
    aliases: tuple[str, ...] = ()


_O = ConfigOption  # short, so that each row of the tables below fits on one line
_RECONNECT_BACKOFF = _O("reconnect.backoff.ms", "reconnect_backoff_ms", _integer)
_RECONNECT_BACKOFF_MAX = _O("reconnect.backoff.max.ms", "reconnect_backoff_max_ms", _integer)
_AUTO_CREATE = _O("allow.auto.create.topics", "allow_auto_create_topics", _boolean)

#: Every client: where the cluster is and how requests are bounded.
CONNECTION_OPTIONS: tuple[ConfigOption, ...] = (
    _O("bootstrap.servers", "bootstrap_servers", _servers),
    _O("client.id", "client_id", _text),
    _O("request.timeout.ms", "request_timeout_ms", _integer),
    _O("socket.connection.setup.timeout.ms", "connect_timeout_ms", _integer),
    _O("metadata.max.age.ms", "metadata_max_age_ms", _integer),
    _O("retry.backoff.ms", "retry_backoff_ms", _integer),
    _O("receive.message.max.bytes", "receive_message_max_bytes", _integer),
)

#: Every client: TLS and SASL. These are settings, not keywords of the clients:
#: :func:`security_kwargs` turns them into ``security_protocol``, ``ssl_context``,
#: ``sasl_mechanism``, ``sasl_plain_username`` and ``sasl_plain_password``.
SECURITY_OPTIONS: tuple[ConfigOption, ...] = (
    _O("security.protocol", "security_protocol", _upper),
    _O("sasl.mechanism", "sasl_mechanism", _upper, ("sasl.mechanisms",)),
    _O("sasl.username", "sasl_plain_username", _text, ("sasl.plain.username", "sasl_username")),
    _O("sasl.password", "sasl_plain_password", _secret, ("sasl.plain.password", "sasl_password")),
    _O("sasl.jaas.config", "sasl_jaas_config", _jaas),
    _O("ssl.ca.location", "ssl_cafile", _text, ("ssl.cafile",)),
    _O("ssl.certificate.location", "ssl_certfile", _text, ("ssl.certfile",)),
    _O("ssl.key.location", "ssl_keyfile", _text, ("ssl.keyfile",)),
    _O("ssl.key.password", "ssl_key_password", _secret, ("ssl.password", "ssl_password")),
    _O("ssl.check.hostname", "ssl_check_hostname", _boolean, ("ssl_check_hostname",)),
    _O("ssl.endpoint.identification.algorithm", "ssl_check_hostname", _hostname_check),
)

PRODUCER_OPTIONS: tuple[ConfigOption, ...] = (
    _O("acks", "acks", _text),
    _O("compression.type", "compression_type", _text),
    _O("linger.ms", "linger_ms", _number),
    _O("batch.size", "max_batch_size", _integer),
    _O("max.request.size", "max_request_size", _integer),
    _O("buffer.memory", "buffer_memory", _integer),
    _O("max.block.ms", "max_block_ms", _integer),
    _O("delivery.timeout.ms", "delivery_timeout_ms", _integer),
    _O("enable.idempotence", "enable_idempotence", _boolean),
    _O("max.in.flight.requests.per.connection", "max_in_flight_requests_per_connection", _integer),
    _O("retry.backoff.max.ms", "retry_backoff_max_ms", _integer),
    _O("transactional.id", "transactional_id", _text),
    _O("transaction.timeout.ms", "transaction_timeout_ms", _integer),
    _O("partitioner.adaptive.partitioning.enable", "partitioner_adaptive_partitioning", _boolean),
    _O("partitioner.availability.timeout.ms", "partitioner_availability_timeout_ms", _integer),
    _O("partitioner.ignore.keys", "partitioner_ignore_keys", _boolean),
    _RECONNECT_BACKOFF,
    _RECONNECT_BACKOFF_MAX,
    _AUTO_CREATE,
)

CONSUMER_OPTIONS: tuple[ConfigOption, ...] = (
    _O("group.id", "group_id", _text),
    _O("group.instance.id", "group_instance_id", _text),
    _O("auto.offset.reset", "auto_offset_reset", _text),
    _O("enable.auto.commit", "enable_auto_commit", _boolean),
    _O("auto.commit.interval.ms", "auto_commit_interval_ms", _integer),
    _O("isolation.level", "isolation_level", _text),
    _O("fetch.min.bytes", "fetch_min_bytes", _integer),
    _O("fetch.max.bytes", "fetch_max_bytes", _integer),
    _O("fetch.max.wait.ms", "fetch_max_wait_ms", _integer),
    _O("max.partition.fetch.bytes", "max_partition_fetch_bytes", _integer),
    _O("max.poll.records", "max_poll_records", _integer),
    _O("max.poll.interval.ms", "max_poll_interval_ms", _integer),
    _O("session.timeout.ms", "session_timeout_ms", _integer),
    _O("heartbeat.interval.ms", "heartbeat_interval_ms", _integer),
    _O("partition.assignment.strategy", "partition_assignment_strategy", _names),
    _O("check.crcs", "check_crcs", _boolean),
    _O("client.rack", "client_rack", _text),
    _O("exclude.internal.topics", "exclude_internal_topics", _boolean),
    _RECONNECT_BACKOFF,
    _RECONNECT_BACKOFF_MAX,
    _AUTO_CREATE,
)

#: The admin client takes the connection and security options only.
ADMIN_OPTIONS: tuple[ConfigOption, ...] = ()

#: Kafka options that have no equivalent here, with what to do instead.
UNSUPPORTED_OPTIONS: Mapping[str, str] = {
    "ssl.truststore.location": "JKS stores are a JVM format; give {prefix}ssl.ca.location (PEM)",
    "ssl.keystore.location": (
        "JKS stores are a JVM format; give {prefix}ssl.certificate.location and "
        "{prefix}ssl.key.location (PEM)"
    ),
    "sasl.kerberos.service.name": "SASL GSSAPI (Kerberos) is not supported",
    "key.serializer": "Java classes do not apply; in Python pass key_serializer=",
    "value.serializer": "Java classes do not apply; in Python pass value_serializer=",
    "key.deserializer": "Java classes do not apply; in Python pass key_deserializer=",
    "value.deserializer": "Java classes do not apply; in Python pass value_deserializer=",
    "interceptor.classes": "Java classes do not apply; in Python pass interceptors=",
}

_EVERY_CLIENT: tuple[ClientKind, ...] = ("producer", "consumer", "admin")

#: Each table with the clients its options apply to.
_TABLES: tuple[tuple[tuple[ClientKind, ...], tuple[ConfigOption, ...]], ...] = (
    (_EVERY_CLIENT, CONNECTION_OPTIONS),
    (_EVERY_CLIENT, SECURITY_OPTIONS),
    (("producer",), PRODUCER_OPTIONS),
    (("consumer",), CONSUMER_OPTIONS),
    (("admin",), ADMIN_OPTIONS),
)


def _index() -> tuple[dict[str, ConfigOption], dict[str, frozenset[ClientKind]]]:
    """Every accepted spelling -> its option (names first, then aliases, then keywords),
    and each option's name -> the clients it applies to."""
    options = list(dict.fromkeys(option for _, table in _TABLES for option in table))
    spellings: dict[str, ConfigOption] = {}
    for option in options:
        spellings.setdefault(option.name, option)
    for option in options:
        for alias in option.aliases:
            spellings.setdefault(alias, option)
    for option in options:
        spellings.setdefault(option.keyword, option)
    clients: dict[str, set[ClientKind]] = {}
    for kinds, table in _TABLES:
        for option in table:
            clients.setdefault(option.name, set()).update(kinds)
    return spellings, {name: frozenset(kinds) for name, kinds in clients.items()}


_BY_SPELLING, _CLIENTS = _index()
_SECURITY_KEYWORDS = frozenset(option.keyword for option in SECURITY_OPTIONS)


def find_option(name: str, *, prefix: str = "") -> ConfigOption:
    """The option spelt ``name`` (Kafka's name, an alias, or our keyword).

    Raises ConfigurationError for an unknown or unsupported name, naming it as the
    user wrote it (``prefix`` + ``name``, e.g. ``kafka.`` for Spark) and suggesting
    the closest known name.
    """
    option = _BY_SPELLING.get(name.strip())
    if option is not None:
        return option
    if name in UNSUPPORTED_OPTIONS:
        reason = UNSUPPORTED_OPTIONS[name].format(prefix=prefix)
        raise errors.ConfigurationError(f"option {prefix}{name} is not supported: {reason}")
    close = difflib.get_close_matches(name, _BY_SPELLING, n=1, cutoff=0.6)
    hint = ""
    if close:
        hint = f"; did you mean {prefix}{_BY_SPELLING[close[0]].name}?"
    raise errors.ConfigurationError(f"unknown option {prefix}{name}{hint}")


def clients_of(option: ConfigOption) -> frozenset[ClientKind]:
    """The clients an option applies to."""
    return _CLIENTS[option.name]


def keywords_of(kind: ClientKind) -> frozenset[str]:
    """The keywords of the options that apply to ``kind``, security settings left out."""
    return frozenset(
        option.keyword
        for kinds, table in _TABLES
        if kind in kinds
        for option in table
        if option.keyword not in _SECURITY_KEYWORDS
    )


def parse_config(config: Mapping[str, object], *, prefix: str = "") -> dict[str, Any]:
    """Kafka-named options -> settings by keyword, each value converted.

    ``prefix`` is how the names were written before the part given here (``kafka.``
    for Spark), for messages. Two spellings of one setting are an error.
    """
    settings: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in config.items():
        option = find_option(key, prefix=prefix)
        if option.keyword in settings:
            raise errors.ConfigurationError(
                f"options {prefix}{given_as[option.keyword]} and {prefix}{key} set the same "
                "thing; give one"
            )
        settings[option.keyword] = option.convert(prefix + key, value)
        given_as[option.keyword] = key
    return settings


# --- security --------------------------------------------------------------------------

#: The security settings that mean SASL, and those that mean TLS.
SASL_SETTINGS = frozenset(
    {"sasl_mechanism", "sasl_jaas_config", "sasl_plain_username", "sasl_plain_password"}
)
TLS_SETTINGS = frozenset(
    {"ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_key_password", "ssl_check_hostname"}
)


def check_security(settings: Mapping[str, Any], *, prefix: str = "") -> None:
    """Refuse security settings that do not fit together, naming the options.

    The protocol is PLAINTEXT unless ``security.protocol`` says otherwise (as in Kafka);
    SASL options need a SASL protocol, TLS options an SSL one, and SASL PLAIN or SCRAM
    needs a user name and a password (or ``sasl.jaas.config``).
    """
    protocol = settings.get("security_protocol", "PLAINTEXT")
    if protocol not in SECURITY_PROTOCOLS:
        raise errors.ConfigurationError(
            f"{prefix}security.protocol must be {', '.join(SECURITY_PROTOCOLS[:-1])} or "
            f"{SECURITY_PROTOCOLS[-1]}, got {protocol!r}"
        )
    uses_sasl = protocol.startswith("SASL")
    uses_tls = protocol.endswith("SSL")
    if not uses_sasl and any(key in settings for key in SASL_SETTINGS):
        raise errors.ConfigurationError(
            f"{prefix}sasl.* options need {prefix}security.protocol SASL_PLAINTEXT or "
            f"SASL_SSL, not {protocol}"
        )
    if not uses_tls and any(key in settings for key in TLS_SETTINGS):
        raise errors.ConfigurationError(
            f"{prefix}ssl.* options need {prefix}security.protocol SSL or SASL_SSL, not {protocol}"
        )
    if not uses_sasl:
        return
    mechanism = settings.get("sasl_mechanism", "PLAIN")
    if mechanism not in SASL_MECHANISMS:
        raise errors.ConfigurationError(
            f"{prefix}sasl.mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}"
        )
    if mechanism == "OAUTHBEARER":
        return  # the token provider is a Python object: the client checks it is given
    if "sasl_jaas_config" in settings:
        if "sasl_plain_username" in settings:
            raise errors.ConfigurationError(
                f"give either {prefix}sasl.jaas.config or {prefix}sasl.username, not both"
            )
    elif "sasl_plain_username" not in settings or "sasl_plain_password" not in settings:
        raise errors.ConfigurationError(
            f"SASL {mechanism} needs {prefix}sasl.jaas.config or {prefix}sasl.username "
            f"and {prefix}sasl.password"
        )


def security_kwargs(
    settings: Mapping[str, Any], *, with_ssl_context: bool = True
) -> dict[str, Any]:
    """The clients' security keywords from security settings ({} when there are none).

    ``with_ssl_context=False`` leaves the TLS context out (the PEM files are not read),
    for checking a configuration where the files are not (yet) at hand.
    """
    if not any(key in settings for key in _SECURITY_KEYWORDS):
        return {}
    protocol = settings.get("security_protocol", "PLAINTEXT")
    kwargs: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL"):
        kwargs["sasl_mechanism"] = settings.get("sasl_mechanism", "PLAIN")
        if "sasl_jaas_config" in settings:
            user, password = _jaas_credentials("sasl.jaas.config", settings["sasl_jaas_config"])
            kwargs["sasl_plain_username"] = user
            kwargs["sasl_plain_password"] = password
        for key in ("sasl_plain_username", "sasl_plain_password"):
            if key in settings:
                kwargs[key] = settings[key]
    if protocol.endswith("SSL") and with_ssl_context:
        kwargs["ssl_context"] = create_ssl_context(
            cafile=settings.get("ssl_cafile"),
            certfile=settings.get("ssl_certfile"),
            keyfile=settings.get("ssl_keyfile"),
            password=settings.get("ssl_key_password"),
            check_hostname=settings.get("ssl_check_hostname", True),
        )
    return kwargs


def client_kwargs(
    kind: ClientKind, settings: Mapping[str, Any], *, with_ssl_context: bool = True
) -> dict[str, Any]:
    """Keyword arguments of a ``kind`` client: its settings and the security keywords.

    Settings of other clients (a producer option when building a consumer) are left out.
    """
    keywords = keywords_of(kind)
    kwargs = {key: value for key, value in settings.items() if key in keywords}
    kwargs.update(security_kwargs(settings, with_ssl_context=with_ssl_context))
    return kwargs


# --- clients from a config --------------------------------------------------------------


def _kwargs_from_config(
    kind: ClientKind, config: Mapping[str, object], extra: Mapping[str, Any]
) -> dict[str, Any]:
    for key in config:
        if kind not in clients_of(find_option(key)):
            raise errors.ConfigurationError(f"option {key} does not apply to {_CLIENT_NAMES[kind]}")
    settings = parse_config(config)
    check_security(settings)
    kwargs = client_kwargs(kind, settings)
    both = sorted(set(kwargs) & set(extra))
    if both:
        raise errors.ConfigurationError(
            f"{both[0]} is given twice: in the config and as a keyword argument"
        )
    kwargs.update(extra)
    return kwargs


def producer_from_config(config: Mapping[str, object], **kwargs: Any) -> Producer:
    """A :class:`~aiokafka_lite.producer.Producer` from Kafka-named options.

    ``producer_from_config({"bootstrap.servers": "kafka:9092", "linger.ms": 20})``.
    ``kwargs`` are settings a config cannot hold (``value_serializer=``,
    ``partitioner=``, ``interceptors=``, ``sasl_oauth_token_provider=``, ...); they
    may not repeat an option of ``config``.
    """
    return Producer(**_kwargs_from_config("producer", config, kwargs))


def consumer_from_config(config: Mapping[str, object], *topics: str, **kwargs: Any) -> Consumer:
    """A :class:`~aiokafka_lite.consumer.Consumer` from Kafka-named options.

    ``consumer_from_config({"bootstrap.servers": "kafka:9092", "group.id": "billing"},
    "orders")`` subscribes to ``orders``; ``kwargs`` as in :func:`producer_from_config`
    (``value_deserializer=``, ...).
    """
    return Consumer(*topics, **_kwargs_from_config("consumer", config, kwargs))


def admin_from_config(config: Mapping[str, object], **kwargs: Any) -> AdminClient:
    """An :class:`~aiokafka_lite.admin.AdminClient` from Kafka-named options."""
    return AdminClient(**_kwargs_from_config("admin", config, kwargs))


def all_options() -> list[ConfigOption]:
    """Every option of the tables, once, in table order."""
    return list(dict.fromkeys(option for _, table in _TABLES for option in table))
