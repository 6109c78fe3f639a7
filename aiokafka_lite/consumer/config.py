"""Consumer configuration: defaults, aiokafka-compatible names, validation.

Everything is checked when the consumer is built, so a bad value fails with
:class:`~aiokafka_lite.errors.ConfigurationError` before any connection is made.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.connection import (
    DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    check_receive_message_max_bytes,
)
from aiokafka_lite.consumer.assignor_adapter import resolve_assignors_adapting
from aiokafka_lite.consumer.assignors import (
    DEFAULT_ASSIGNORS,
    PartitionAssignor,
    RebalanceProtocol,
    common_protocol,
)
from aiokafka_lite.consumer.subscription import OffsetResetStrategy
from aiokafka_lite.protocol.codecs import DEFAULT_MAX_DECOMPRESSED_SIZE as DEFAULT_MAX_DECOMPRESSED
from aiokafka_lite.security import SecurityConfig, TokenProviderLike

__all__ = ["FETCH_RESPONSE_MARGIN", "ConsumerConfig", "Deserializer"]

log = logging.getLogger(__name__)

#: A key or value deserializer: called with the raw bytes of a non-null key or value.
Deserializer = Callable[[bytes], Any]

_ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}

#: What a Fetch response holds beside the records its fetch sizes allow: its headers, a
#: few dozen bytes per partition, and the aborted-transaction lists (512 KiB is room
#: for thousands of partitions). receive_message_max_bytes must leave this much above
#: max(fetch_max_bytes, max_partition_fetch_bytes).
FETCH_RESPONSE_MARGIN = 512 * 1024

# aiokafka options that have no effect here (accepted so aiokafka code runs unchanged).
_IGNORED_OPTIONS = {
    "api_version",
    "loop",
    "connections_max_idle_ms",
    "consumer_timeout_ms",
    "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name",
}


@dataclass(frozen=True)
class ConsumerConfig:
    """Validated consumer settings. Build with :meth:`from_kwargs`."""

    bootstrap_servers: str | Sequence[str] = "localhost:9092"
    client_id: str = "aiokafka-lite"
    group_id: str | None = None
    group_instance_id: str | None = None
    key_deserializer: Deserializer | None = None
    value_deserializer: Deserializer | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    isolation_level: str = "read_uncommitted"
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52428800
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1048576
    #: Upper bound of fetched-but-not-yet-consumed bytes held in memory.
    max_buffer_bytes: int = 64 * 1048576
    #: What one compressed batch may decompress to (a guard against decompression
    #: bombs; Kafka itself bounds only the compressed size). None: max(fetch_max_bytes,
    #: 64 MiB), an int once built.
    max_decompressed_bytes: int | None = None
    max_poll_records: int | None = 500
    max_poll_interval_ms: int = 300000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    rebalance_timeout_ms: int | None = None
    partition_assignment_strategy: Sequence[Any] = DEFAULT_ASSIGNORS
    check_crcs: bool = True
    request_timeout_ms: int = 40000
    connect_timeout_ms: int = 10000
    retry_backoff_ms: int = 100
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300000
    #: The largest response accepted (None: derived from the fetch sizes, see
    #: __post_init__; an int once built).
    receive_message_max_bytes: int | None = None
    exclude_internal_topics: bool = True
    allow_auto_create_topics: bool = True
    #: This consumer's rack: sent in Fetch (a leader may name a replica in it, KIP-392) and
    #: in the group subscription (rack-aware assignment, KIP-881).
    client_rack: str | None = None
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    sasl_oauth_token_provider: TokenProviderLike | None = field(default=None, repr=False)
    security: SecurityConfig | None = None
    # Derived, filled in __post_init__.
    assignors: tuple[PartitionAssignor, ...] = field(default=(), compare=False)
    rebalance_protocol: RebalanceProtocol = RebalanceProtocol.EAGER
    reset_strategy: OffsetResetStrategy = OffsetResetStrategy.LATEST

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ConsumerConfig:
        """Build from keyword arguments, accepting aiokafka's names."""
        known = {f.name for f in fields(cls)} - {
            "assignors",
            "rebalance_protocol",
            "reset_strategy",
        }
        clean: dict[str, Any] = {}
        for name, value in kwargs.items():
            key = name
            if key in _IGNORED_OPTIONS:
                if name.startswith("sasl_kerberos") and value is not None and value != "kafka":
                    raise errors.ConfigurationError(
                        f"{name} is for GSSAPI (Kerberos), which is not supported"
                    )
                log.debug("consumer option %s=%r has no effect in aiokafka_lite", name, value)
                continue
            if key not in known:
                raise errors.ConfigurationError(f"unknown consumer option {name!r}")
            if key in clean:
                raise errors.ConfigurationError(f"consumer option {key!r} given twice")
            clean[key] = value
        return cls(**clean)

    def __post_init__(self) -> None:
        _check_servers(self.bootstrap_servers)
        if not isinstance(self.client_id, str) or not self.client_id:
            raise errors.ConfigurationError("client_id must be a non-empty str")
        if self.group_id is not None and (not isinstance(self.group_id, str) or not self.group_id):
            raise errors.ConfigurationError("group_id must be a non-empty str or None")
        if self.group_instance_id is not None:
            if not isinstance(self.group_instance_id, str) or not self.group_instance_id:
                raise errors.ConfigurationError("group_instance_id must be a non-empty str")
            if self.group_id is None:
                raise errors.ConfigurationError("group_instance_id needs a group_id")
        for name in ("key_deserializer", "value_deserializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise errors.ConfigurationError(f"{name} must be callable, got {value!r}")
        reset = self.auto_offset_reset
        if not isinstance(reset, str) or reset.lower() not in ("latest", "earliest", "none"):
            raise errors.ConfigurationError(
                f"auto_offset_reset must be 'latest', 'earliest' or 'none', got {reset!r}"
            )
        object.__setattr__(self, "auto_offset_reset", reset.lower())
        object.__setattr__(self, "reset_strategy", OffsetResetStrategy(reset.lower()))
        if self.isolation_level not in _ISOLATION_LEVELS:
            raise errors.ConfigurationError(
                "isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"got {self.isolation_level!r}"
            )
        for name in (
            "enable_auto_commit",
            "check_crcs",
            "exclude_internal_topics",
            "allow_auto_create_topics",
        ):
            if not isinstance(getattr(self, name), bool):
                raise errors.ConfigurationError(f"{name} must be a bool")
        positive = (
            "auto_commit_interval_ms",
            "fetch_min_bytes",
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "max_buffer_bytes",
            "max_poll_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "request_timeout_ms",
            "connect_timeout_ms",
            "metadata_max_age_ms",
        )
        for name in positive:
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("fetch_max_wait_ms", self.fetch_max_wait_ms, minimum=0)
        for name in ("retry_backoff_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms"):
            _check_int(name, getattr(self, name), minimum=0)
        if self.max_decompressed_bytes is None:
            object.__setattr__(
                self, "max_decompressed_bytes", max(self.fetch_max_bytes, DEFAULT_MAX_DECOMPRESSED)
            )
        else:
            _check_int("max_decompressed_bytes", self.max_decompressed_bytes, minimum=1)
        if self.max_poll_records is not None:
            _check_int("max_poll_records", self.max_poll_records, minimum=1)
        if self.rebalance_timeout_ms is None:
            object.__setattr__(self, "rebalance_timeout_ms", self.max_poll_interval_ms)
        else:
            _check_int("rebalance_timeout_ms", self.rebalance_timeout_ms, minimum=1)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise errors.ConfigurationError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise errors.ConfigurationError(
                f"request_timeout_ms ({self.request_timeout_ms}) must be larger than "
                f"fetch_max_wait_ms ({self.fetch_max_wait_ms})"
            )
        fetch_need = max(self.fetch_max_bytes, self.max_partition_fetch_bytes)
        fetch_need += FETCH_RESPONSE_MARGIN
        if self.receive_message_max_bytes is None:
            # Room for the largest fetch the sizes allow, and never below the common
            # default (a Metadata answer of a large cluster needs it whatever the fetch
            # sizes are).
            object.__setattr__(
                self,
                "receive_message_max_bytes",
                min(max(DEFAULT_RECEIVE_MESSAGE_MAX_BYTES, fetch_need), 2**31 - 1),
            )
        else:
            check_receive_message_max_bytes(self.receive_message_max_bytes)
            if self.receive_message_max_bytes < fetch_need:
                raise errors.ConfigurationError(
                    f"receive_message_max_bytes ({self.receive_message_max_bytes}) must be at "
                    "least max(fetch_max_bytes, max_partition_fetch_bytes) + "
                    f"{FETCH_RESPONSE_MARGIN} ({fetch_need}): a fetch response may be that large"
                )
        if self.client_rack is not None and not isinstance(self.client_rack, str):
            raise errors.ConfigurationError("client_rack must be a str or None")
        assignors = tuple(resolve_assignors_adapting(self.partition_assignment_strategy))
        object.__setattr__(self, "assignors", assignors)
        object.__setattr__(self, "rebalance_protocol", common_protocol(assignors))
        if self.security is None:
            security = SecurityConfig.from_options(
                security_protocol=self.security_protocol,
                ssl_context=self.ssl_context,
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_plain_username,
                sasl_plain_password=self.sasl_plain_password,
                sasl_oauth_token_provider=self.sasl_oauth_token_provider,
            )
            object.__setattr__(self, "security", security)
        elif not isinstance(self.security, SecurityConfig):
            raise errors.ConfigurationError("security must be a SecurityConfig")

    @property
    def isolation_level_code(self) -> int:
        return _ISOLATION_LEVELS[self.isolation_level]

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def auto_commit(self) -> bool:
        """Auto-commit is on only for group consumers."""
        return self.enable_auto_commit and self.group_id is not None

    def client_kwargs(self) -> Mapping[str, Any]:
        """Keyword arguments for :class:`~aiokafka_lite.client.KafkaClient`."""
        return {
            "client_id": self.client_id,
            "security": self.security,
            "request_timeout_ms": self.request_timeout_ms,
            "connect_timeout_ms": self.connect_timeout_ms,
            "metadata_max_age_ms": self.metadata_max_age_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "reconnect_backoff_ms": self.reconnect_backoff_ms,
            "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
            "allow_auto_create_topics": self.allow_auto_create_topics,
            "receive_message_max_bytes": self.receive_message_max_bytes,
        }


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise errors.ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value > 2**31 - 1:
        raise errors.ConfigurationError(f"{name} must fit in a signed 32-bit int, got {value}")


def _check_servers(servers: object) -> None:
    if isinstance(servers, str):
        items = [s for s in servers.split(",") if s.strip()]
    elif isinstance(servers, Sequence) and all(isinstance(s, str) for s in servers):
        items = [s for s in servers if s.strip()]
    else:
        raise errors.ConfigurationError(
            f"bootstrap_servers must be a 'host:port' str or a list of them, got {servers!r}"
        )
    if not items:
        raise errors.ConfigurationError("bootstrap_servers is empty")
