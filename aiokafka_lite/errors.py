# Long: one class per Kafka error code (about a hundred): a table best read in one place.
"""Typed exceptions raised by aiokafka_lite.

Two families:

* client-side errors (connection lost, timeouts, bad bytes on the wire, bad
  configuration), raised by the client itself;
* broker errors, one class per Kafka error code (see ``BrokerResponseError``),
  built from a response's ``error_code`` with :func:`error_for_code`.

Every error has a ``retriable`` flag: ``True`` when repeating the same request
later may succeed (leader moved, coordinator loading, connection dropped), and an
``invalid_metadata`` flag: ``True`` when the error means the client's cluster
metadata is stale (partition leader moved, topic unknown, ...) and should be
refreshed before the retry.

The per-code table follows Kafka's own list of error codes (``-1`` through
``133``). Class names are the Kafka name in PascalCase with an ``Error`` suffix;
the names aiokafka and kafka-python use are kept as aliases where they differ
(for example ``NotLeaderForPartitionError`` for ``NotLeaderOrFollowerError``).
"""

from __future__ import annotations

from typing import Any, ClassVar


class KafkaError(RuntimeError):
    """Base class of the errors this library raises (a ``RuntimeError``, as aiokafka's).

    Two aiokafka exceptions stay outside it, as in aiokafka: ``ConsumerStoppedError``
    and ``IllegalOperation`` derive from ``Exception`` only.
    """

    retriable: ClassVar[bool] = False
    #: ``True`` when the error means cluster metadata is stale and must be refreshed.
    invalid_metadata: ClassVar[bool] = False
    #: Kafka error code, or -1 for errors that never travel on the wire.
    errno: ClassVar[int] = -1

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.__class__.__name__)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


# --- client-side errors ----------------------------------------------------


class ConfigurationError(KafkaError, ValueError):
    """A configuration value is invalid."""


class IllegalStateError(KafkaError):
    """The client was used in a state that does not allow the call."""


class IllegalOperation(Exception):
    """aiokafka's error for an operation the client's configuration does not allow
    (committing without a ``group_id``, transactions without a ``transactional_id``,
    sending outside a transaction). Not a ``KafkaError``, as in aiokafka; what this
    library raises in those cases is :class:`IllegalOperationError`, which is both."""


class IllegalOperationError(IllegalStateError, IllegalOperation):
    """An operation the client's configuration does not allow: committing without a
    ``group_id``, transactions without a ``transactional_id``, sending outside a
    transaction. Catch it as ``IllegalStateError`` or as aiokafka's ``IllegalOperation``."""


# OSError's per-instance ``errno`` slot is shadowed by KafkaError's class attribute
# (KafkaError comes first in the MRO), which mypy reports as a conflict.
class KafkaTimeoutError(KafkaError, TimeoutError):  # type: ignore[misc]
    """An operation did not finish within its timeout."""

    retriable = True


class KafkaConnectionError(KafkaError, ConnectionError):  # type: ignore[misc]
    """The connection to a broker failed or was closed."""

    retriable = True


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers could be reached."""


class KafkaProtocolError(KafkaConnectionError):
    """The peer broke Kafka's framing (an invalid frame size, an unknown correlation id);
    the connection was closed."""


class ResponseTooLargeError(KafkaProtocolError):
    """A response claimed more bytes than ``receive_message_max_bytes`` allows; the
    connection was closed before any of it was buffered."""


class NotAKafkaBrokerError(KafkaProtocolError):
    """The peer answered with something other than Kafka (HTTP, TLS, ...): a wrong port,
    or a ``security_protocol`` that does not match the listener."""


class DecodeError(KafkaError):
    """Bytes received from the network could not be decoded."""


class UnsupportedCodecError(KafkaError):
    """A compression codec is unknown or its library is not installed."""


# Producer.


class SerializationError(KafkaError, TypeError):
    """A key or value could not be turned into bytes (wrong type and no serializer, or
    the serializer failed)."""


class TransactionAbortedError(KafkaError):
    """The record was not sent because its transaction was aborted."""


class ProducerClosedError(IllegalStateError):
    """The producer is closed (or closing) and accepts no more records."""


class AcknowledgedDataLostError(KafkaError):
    """The broker lost records it had acknowledged to this producer.

    Raised for the records of the batch that revealed it: the broker refused that
    batch (``OUT_OF_ORDER_SEQUENCE_NUMBER``, or ``UNKNOWN_PRODUCER_ID`` while the
    acknowledged records are still within the log), so they were not written either.
    Records acknowledged before it, up to ``last_acked_offset``, may be missing from the
    log (a broker that crashed without having stored them, an unclean leader election).
    The broker's error is ``broker_error`` (and ``__cause__``). The producer goes on
    under a new epoch: later records are written as usual.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str,
        partition: int,
        last_acked_offset: int,
        last_acked_sequence: int,
        broker_error: KafkaError,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        #: The highest offset the broker had acknowledged for the partition (-1: unknown).
        self.last_acked_offset = last_acked_offset
        #: The producer sequence of the last acknowledged record.
        self.last_acked_sequence = last_acked_sequence
        self.broker_error = broker_error


# Consumer.


class CommitFailedError(KafkaError):
    """An offset commit failed for good: the group rebalanced (generation moved on or the
    member was removed), so offsets of partitions that may now belong to another member
    were not committed."""


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and auto_offset_reset is "none"."""


class ConsumerStoppedError(Exception):
    """The consumer is stopped (or stopping): no more records.

    As in aiokafka it derives from ``Exception``, not from ``KafkaError``: code that
    retries on ``except KafkaError`` must not retry a stopped consumer."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False
    errno: ClassVar[int] = -1


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised for a record.

    The consumer raises it after handing over every record before this one and stays on
    it: ``topic``, ``partition`` and ``offset`` name the record, ``key`` and ``value`` are
    its raw bytes, ``origin`` says which deserializer failed (``"key"`` or ``"value"``),
    ``record`` is the whole record with raw key and value (for a dead-letter topic), and
    the deserializer's exception is the ``__cause__``. ``seek(tp, offset + 1)`` skips it.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Any = (),
        timestamp: int = -1,
        origin: str | None = None,
        record: Any = None,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp = timestamp
        self.origin = origin
        self.record = record


# --- broker errors ---------------------------------------------------------

#: Every per-code class, keyed by its Kafka error code. Filled in as the classes
#: below are defined (see ``BrokerResponseError.__init_subclass__``).
_ERRORS_BY_CODE: dict[int, type[BrokerResponseError]] = {}


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses exist for every code."""

    #: One-line description (the first line of the class docstring).
    description: ClassVar[str] = ""
    #: The error's name in Kafka's protocol, e.g. ``"NOT_LEADER_OR_FOLLOWER"``.
    kafka_name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "description" not in cls.__dict__:
            cls.description = (cls.__doc__ or "").strip().split("\n", 1)[0]
        if "errno" in cls.__dict__:
            other = _ERRORS_BY_CODE.get(cls.errno)
            if other is not None:
                raise TypeError(
                    f"{cls.__name__} and {other.__name__} both claim error code {cls.errno}"
                )
            _ERRORS_BY_CODE[cls.errno] = cls

    def __str__(self) -> str:
        text = super().__str__()
        name = f" {self.kafka_name}" if self.kafka_name else ""
        return f"[Error {self.errno}{name}] {self.__class__.__name__}: {text}"


class UnknownBrokerError(BrokerResponseError):
    """The broker returned an error code this client does not know."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(f"unknown error code {code}" + (f": {message}" if message else ""))
        self.code = code
        self._detail = message

    def __str__(self) -> str:
        return f"[Error {self.code}] {self.__class__.__name__}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.code, self._detail))


def error_for_code(code: int, message: str | None = None) -> BrokerResponseError:
    """Return an exception instance for a Kafka error code (``code != 0``).

    ``message`` is the broker's error message when the response carries one
    (``error_message`` fields); without it the class description is used.
    An unknown code gives an :class:`UnknownBrokerError`.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = _ERRORS_BY_CODE.get(code)
    if cls is None:
        return UnknownBrokerError(code, message)
    return cls(message)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the error for ``code``, or do nothing when ``code`` is 0."""
    if code != 0:
        raise error_for_code(code, message)


def error_class_for_code(code: int) -> type[BrokerResponseError] | None:
    """Return the class registered for ``code``, or ``None`` if the code is unknown."""
    return _ERRORS_BY_CODE.get(code)


# --- codes that are raised by the client too --------------------------------


class CorruptRecordError(BrokerResponseError, DecodeError):
    """A record batch failed its CRC check or is malformed.

    Raised by the consumer, ``topic``, ``partition`` and ``offset`` name where: the
    offset is the first record not handed over, which is where the consumer stays.
    """

    errno = 2
    kafka_name = "CORRUPT_MESSAGE"
    retriable = True

    def __init__(
        self,
        message: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class RecordTooLargeError(BrokerResponseError):
    """A record is larger than the configured maximum request size."""

    errno = 10
    kafka_name = "MESSAGE_TOO_LARGE"


class UnsupportedVersionError(BrokerResponseError):
    """The broker and this client share no version of a required API."""

    errno = 35
    kafka_name = "UNSUPPORTED_VERSION"


class AuthenticationFailedError(BrokerResponseError):
    """SASL authentication failed (bad credentials, or mechanism refused)."""

    errno = 58
    kafka_name = "SASL_AUTHENTICATION_FAILED"


# --- one class per remaining Kafka error code --------------------------------


class UnknownServerError(BrokerResponseError):
    """The broker hit an unexpected error while handling the request."""

    errno = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is outside the range the broker holds for the partition.

    Raised by the consumer (``auto_offset_reset="none"``) as aiokafka does: ``args[0]``
    is the ``{TopicPartition: offset}`` map of the positions out of range (also
    ``.offsets``), so code can seek those partitions; ``str()`` says it in words.
    """

    errno = 1
    kafka_name = "OFFSET_OUT_OF_RANGE"

    def __init__(self, offsets: Any = None, message: str | None = None) -> None:
        if isinstance(offsets, dict):
            Exception.__init__(self, offsets)
            self._detail = message
        else:
            super().__init__(offsets if message is None else message)
            self._detail = None

    @property
    def offsets(self) -> dict[Any, int]:
        """The partitions and the offsets found out of range (empty when not given)."""
        first = self.args[0] if self.args else None
        return dict(first) if isinstance(first, dict) else {}

    @property
    def message(self) -> str:
        first = self.args[0] if self.args else None
        if not isinstance(first, dict):
            return super().message
        if self._detail:
            return self._detail
        where = ", ".join(
            f"{getattr(tp, 'topic', tp)}-{getattr(tp, 'partition', '')} at {offset}"
            for tp, offset in first.items()
        )
        return f"fetch offsets out of range: {where}"

    def __str__(self) -> str:
        return f"[Error {self.errno} {self.kafka_name}] {type(self).__name__}: {self.message}"


class LogTruncationError(OffsetOutOfRangeError):
    """The partition's log was truncated below the consumer's position (KIP-320).

    A new leader's log ended before the position (an unclean leader election, records
    acknowledged with ``acks=1`` lost on a failover). Raised by the consumer when
    ``auto_offset_reset="none"`` (with a reset policy the consumer moves to the end
    offset itself). As Java's ``LogTruncationException``: ``offsets`` maps each
    partition to the position found past the log's end, ``divergent_offsets`` to the
    first offset the new leader's log does not share with what was read (missing when
    the leader could not say); the consumer stays on the position until a seek.
    """

    def __init__(
        self,
        offsets: Any = None,
        message: str | None = None,
        *,
        divergent_offsets: dict[Any, int] | None = None,
    ) -> None:
        super().__init__(offsets, message)
        self.divergent_offsets: dict[Any, int] = dict(divergent_offsets or {})

    def __reduce__(self) -> tuple[Any, ...]:
        first = self.args[0] if self.args else None
        if isinstance(first, dict):
            return (type(self), (first, self._detail))
        return (type(self), (self.message,))


class UnknownTopicOrPartitionError(BrokerResponseError):
    """This broker does not host the topic-partition (it may not exist yet)."""

    errno = 3
    kafka_name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    invalid_metadata = True


class InvalidFetchSizeError(BrokerResponseError):
    """The fetch size in the request is invalid."""

    errno = 4
    kafka_name = "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(BrokerResponseError):
    """The partition has no leader right now (an election is in progress)."""

    errno = 5
    kafka_name = "LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True


class NotLeaderOrFollowerError(BrokerResponseError):
    """This broker is not the leader (or not a replica) of the partition."""

    errno = 6
    kafka_name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    invalid_metadata = True


class RequestTimedOutError(BrokerResponseError):
    """The broker timed the request out."""

    errno = 7
    kafka_name = "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""

    errno = 8
    kafka_name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(BrokerResponseError):
    """A replica of the partition is not available."""

    errno = 9
    kafka_name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True


class StaleControllerEpochError(BrokerResponseError):
    """The controller has moved to another broker."""

    errno = 11
    kafka_name = "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata string of an offset commit is too large."""

    errno = 12
    kafka_name = "OFFSET_METADATA_TOO_LARGE"


class NetworkExceptionError(BrokerResponseError):
    """The broker lost its connection before a response could be produced."""

    errno = 13
    kafka_name = "NETWORK_EXCEPTION"
    retriable = True
    invalid_metadata = True


class CoordinatorLoadInProgressError(BrokerResponseError):
    """The coordinator is still loading its state and cannot serve the request yet."""

    errno = 14
    kafka_name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    """The group or transaction coordinator is not available."""

    errno = 15
    kafka_name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    """This broker is not the coordinator for the group or transactional id."""

    errno = 16
    kafka_name = "NOT_COORDINATOR"
    retriable = True


class InvalidTopicError(BrokerResponseError):
    """The topic name is invalid or the topic cannot be used for this operation."""

    errno = 17
    kafka_name = "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(BrokerResponseError):
    """The record batch is larger than the broker's segment size."""

    errno = 18
    kafka_name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(BrokerResponseError):
    """Rejected: fewer in-sync replicas than min.insync.replicas."""

    errno = 19
    kafka_name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Written, but to fewer in-sync replicas than required."""

    errno = 20
    kafka_name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    """The produce request's acks value is invalid."""

    errno = 21
    kafka_name = "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerResponseError):
    """The group generation id in the request is not the current one."""

    errno = 22
    kafka_name = "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocols do not match those of the group."""

    errno = 23
    kafka_name = "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(BrokerResponseError):
    """The group id is invalid."""

    errno = 24
    kafka_name = "INVALID_GROUP_ID"


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member id."""

    errno = 25
    kafka_name = "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside the range the broker allows."""

    errno = 26
    kafka_name = "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing; the member must rejoin."""

    errno = 27
    kafka_name = "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The offset commit data is too large."""

    errno = 28
    kafka_name = "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(BrokerResponseError):
    """Not authorized to access the topic."""

    errno = 29
    kafka_name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(BrokerResponseError):
    """Not authorized to access the group."""

    errno = 30
    kafka_name = "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(BrokerResponseError):
    """Not authorized for this cluster operation."""

    errno = 31
    kafka_name = "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerResponseError):
    """A record timestamp is outside the accepted range."""

    errno = 32
    kafka_name = "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerResponseError):
    """The broker does not support the requested SASL mechanism."""

    errno = 33
    kafka_name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerResponseError):
    """The request is not valid in the current SASL state."""

    errno = 34
    kafka_name = "ILLEGAL_SASL_STATE"


class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""

    errno = 36
    kafka_name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerResponseError):
    """The number of partitions is invalid."""

    errno = 37
    kafka_name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor is below 1 or above the number of brokers."""

    errno = 38
    kafka_name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(BrokerResponseError):
    """The replica assignment is invalid."""

    errno = 39
    kafka_name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(BrokerResponseError):
    """A configuration entry in the request is invalid."""

    errno = 40
    kafka_name = "INVALID_CONFIG"


class NotControllerError(BrokerResponseError):
    """This broker is not the controller of the cluster."""

    errno = 41
    kafka_name = "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(BrokerResponseError):
    """The broker found the request malformed or not valid for its version."""

    errno = 42
    kafka_name = "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerResponseError):
    """The topic's message format does not support the request."""

    errno = 43
    kafka_name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerResponseError):
    """The request violates a policy configured on the broker."""

    errno = 44
    kafka_name = "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The broker received a producer sequence number out of order."""

    errno = 45
    kafka_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerResponseError):
    """The broker received a duplicate producer sequence number."""

    errno = 46
    kafka_name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerResponseError):
    """The producer epoch is older than the broker's (the producer was fenced)."""

    errno = 47
    kafka_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(BrokerResponseError):
    """The transactional operation is not valid in the current transaction state."""

    errno = 48
    kafka_name = "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not the one assigned to this transactional id."""

    errno = 49
    kafka_name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout exceeds the broker's maximum."""

    errno = 50
    kafka_name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(BrokerResponseError):
    """Another operation on the same transaction is still in progress."""

    errno = 51
    kafka_name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    """The transaction coordinator that sent the request is no longer current."""

    errno = 52
    kafka_name = "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """Not authorized to use the transactional id."""

    errno = 53
    kafka_name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerResponseError):
    """Security features are disabled on the broker."""

    errno = 54
    kafka_name = "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerResponseError):
    """The broker skipped this operation because another one in the batch failed."""

    errno = 55
    kafka_name = "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(BrokerResponseError):
    """The broker had a disk error accessing the log."""

    errno = 56
    kafka_name = "KAFKA_STORAGE_ERROR"
    retriable = True
    invalid_metadata = True


class LogDirNotFoundError(BrokerResponseError):
    """The requested log directory is not configured on the broker."""

    errno = 57
    kafka_name = "LOG_DIR_NOT_FOUND"


class UnknownProducerIdError(BrokerResponseError):
    """The broker has no state for this producer id (its records may have expired)."""

    errno = 59
    kafka_name = "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is in progress."""

    errno = 60
    kafka_name = "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Delegation tokens are not enabled on the broker."""

    errno = 61
    kafka_name = "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(BrokerResponseError):
    """The delegation token was not found."""

    errno = 62
    kafka_name = "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """The principal is not the owner or renewer of the delegation token."""

    errno = 63
    kafka_name = "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Delegation token requests are not allowed on this kind of channel."""

    errno = 64
    kafka_name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """Not authorized for the delegation token operation."""

    errno = 65
    kafka_name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(BrokerResponseError):
    """The delegation token has expired."""

    errno = 66
    kafka_name = "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(BrokerResponseError):
    """The principal type is not supported."""

    errno = 67
    kafka_name = "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(BrokerResponseError):
    """The group still has members."""

    errno = 68
    kafka_name = "NON_EMPTY_GROUP"


class GroupIdNotFoundError(BrokerResponseError):
    """The group id does not exist."""

    errno = 69
    kafka_name = "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(BrokerResponseError):
    """The broker does not know the fetch session id."""

    errno = 70
    kafka_name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(BrokerResponseError):
    """The fetch session epoch is not the expected one."""

    errno = 71
    kafka_name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ListenerNotFoundError(BrokerResponseError):
    """The leader has no listener matching the one this request came in on."""

    errno = 72
    kafka_name = "LISTENER_NOT_FOUND"
    retriable = True
    invalid_metadata = True


class TopicDeletionDisabledError(BrokerResponseError):
    """Topic deletion is disabled on the broker."""

    errno = 73
    kafka_name = "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is older than the broker's."""

    errno = 74
    kafka_name = "FENCED_LEADER_EPOCH"
    retriable = True
    invalid_metadata = True


class UnknownLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is newer than the broker's."""

    errno = 75
    kafka_name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    invalid_metadata = True


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The client does not support the partition's compression type."""

    errno = 76
    kafka_name = "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(BrokerResponseError):
    """The broker epoch has changed."""

    errno = 77
    kafka_name = "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(BrokerResponseError):
    """The offset is not available yet (high watermark catching up after an election)."""

    errno = 78
    kafka_name = "OFFSET_NOT_AVAILABLE"
    retriable = True


class MemberIdRequiredError(BrokerResponseError):
    """The member must rejoin with the member id the coordinator assigned."""

    errno = 79
    kafka_name = "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(BrokerResponseError):
    """The preferred leader is not available."""

    errno = 80
    kafka_name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group has reached its maximum number of members."""

    errno = 81
    kafka_name = "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(BrokerResponseError):
    """Another member with the same group.instance.id has replaced this one."""

    errno = 82
    kafka_name = "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(BrokerResponseError):
    """No eligible leader is available for the partition."""

    errno = 83
    kafka_name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True


class ElectionNotNeededError(BrokerResponseError):
    """The partition does not need a leader election."""

    errno = 84
    kafka_name = "ELECTION_NOT_NEEDED"
    retriable = True
    invalid_metadata = True


class NoReassignmentInProgressError(BrokerResponseError):
    """No partition reassignment is in progress."""

    errno = 85
    kafka_name = "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(BrokerResponseError):
    """Cannot delete offsets of a topic the group is subscribed to."""

    errno = 86
    kafka_name = "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(BrokerResponseError):
    """The broker's validation rejected a record."""

    errno = 87
    kafka_name = "INVALID_RECORD"


class UnstableOffsetCommitError(BrokerResponseError):
    """Pending transactional offsets must be resolved first."""

    errno = 88
    kafka_name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ThrottlingQuotaExceededError(BrokerResponseError):
    """The throttling quota was exceeded."""

    errno = 89
    kafka_name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional id has fenced this one."""

    errno = 90
    kafka_name = "PRODUCER_FENCED"


class ResourceNotFoundError(BrokerResponseError):
    """The request refers to a resource that does not exist."""

    errno = 91
    kafka_name = "RESOURCE_NOT_FOUND"


class DuplicateResourceError(BrokerResponseError):
    """The request refers to the same resource twice."""

    errno = 92
    kafka_name = "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(BrokerResponseError):
    """The credential does not meet the broker's criteria."""

    errno = 93
    kafka_name = "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(BrokerResponseError):
    """The sender or receiver of a voter request is not an expected voter."""

    errno = 94
    kafka_name = "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(BrokerResponseError):
    """The update version is invalid."""

    errno = 95
    kafka_name = "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(BrokerResponseError):
    """Updating finalized features failed on the broker."""

    errno = 96
    kafka_name = "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(BrokerResponseError):
    """The broker could not deserialize a forwarded request's principal."""

    errno = 97
    kafka_name = "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(BrokerResponseError):
    """The requested snapshot was not found."""

    errno = 98
    kafka_name = "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(BrokerResponseError):
    """The requested position is outside the snapshot."""

    errno = 99
    kafka_name = "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(BrokerResponseError):
    """This broker does not host a topic with this topic id."""

    errno = 100
    kafka_name = "UNKNOWN_TOPIC_ID"
    retriable = True
    invalid_metadata = True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """This broker id is already registered."""

    errno = 101
    kafka_name = "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(BrokerResponseError):
    """This broker id is not registered."""

    errno = 102
    kafka_name = "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(BrokerResponseError):
    """The topic id in the request does not match the log's topic id."""

    errno = 103
    kafka_name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    invalid_metadata = True


class InconsistentClusterIdError(BrokerResponseError):
    """The cluster id in the request does not match the broker's."""

    errno = 104
    kafka_name = "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(BrokerResponseError):
    """The transactional id was not found."""

    errno = 105
    kafka_name = "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(BrokerResponseError):
    """The fetch session used topic ids inconsistently."""

    errno = 106
    kafka_name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True


class IneligibleReplicaError(BrokerResponseError):
    """The new ISR contains an ineligible replica."""

    errno = 107
    kafka_name = "INELIGIBLE_REPLICA"


class NewLeaderElectedError(BrokerResponseError):
    """The partition state was updated but a new leader was elected."""

    errno = 108
    kafka_name = "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(BrokerResponseError):
    """The requested offset has moved to tiered storage."""

    errno = 109
    kafka_name = "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(BrokerResponseError):
    """The coordinator fenced the member epoch; the member must rejoin."""

    errno = 110
    kafka_name = "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(BrokerResponseError):
    """The instance id is still held by another member of the group."""

    errno = 111
    kafka_name = "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(BrokerResponseError):
    """The group does not support the assignor or its version."""

    errno = 112
    kafka_name = "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(BrokerResponseError):
    """The member epoch is stale; wait for the new one from a heartbeat."""

    errno = 113
    kafka_name = "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(BrokerResponseError):
    """The request was sent to an endpoint of the wrong type."""

    errno = 114
    kafka_name = "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(BrokerResponseError):
    """This endpoint type is not supported yet."""

    errno = 115
    kafka_name = "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(BrokerResponseError):
    """The controller id is not known."""

    errno = 116
    kafka_name = "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(BrokerResponseError):
    """The telemetry subscription id is unknown or outdated."""

    errno = 117
    kafka_name = "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(BrokerResponseError):
    """The telemetry push is larger than the broker accepts."""

    errno = 118
    kafka_name = "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(BrokerResponseError):
    """The controller considers the broker registration invalid."""

    errno = 119
    kafka_name = "INVALID_REGISTRATION"


class TransactionAbortableError(BrokerResponseError):
    """The transaction failed; abort it to keep using the transactional id."""

    errno = 120
    kafka_name = "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(BrokerResponseError):
    """The record state does not allow the acknowledgement."""

    errno = 121
    kafka_name = "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(BrokerResponseError):
    """The share session was not found."""

    errno = 122
    kafka_name = "SHARE_SESSION_NOT_FOUND"
    retriable = True


class InvalidShareSessionEpochError(BrokerResponseError):
    """The share session epoch is invalid."""

    errno = 123
    kafka_name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True


class FencedStateEpochError(BrokerResponseError):
    """The share-group state epoch does not match."""

    errno = 124
    kafka_name = "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(BrokerResponseError):
    """The voter key does not match the receiving replica's key."""

    errno = 125
    kafka_name = "INVALID_VOTER_KEY"


class DuplicateVoterError(BrokerResponseError):
    """The voter is already in the voter set."""

    errno = 126
    kafka_name = "DUPLICATE_VOTER"


class VoterNotFoundError(BrokerResponseError):
    """The voter is not in the voter set."""

    errno = 127
    kafka_name = "VOTER_NOT_FOUND"


class InvalidRegularExpressionError(BrokerResponseError):
    """The regular expression is invalid."""

    errno = 128
    kafka_name = "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(BrokerResponseError):
    """The client's metadata is stale; it must bootstrap again."""

    errno = 129
    kafka_name = "REBOOTSTRAP_REQUIRED"


class StreamsInvalidTopologyError(BrokerResponseError):
    """The streams topology is invalid."""

    errno = 130
    kafka_name = "STREAMS_INVALID_TOPOLOGY"


class StreamsInvalidTopologyEpochError(BrokerResponseError):
    """The streams topology epoch is invalid."""

    errno = 131
    kafka_name = "STREAMS_INVALID_TOPOLOGY_EPOCH"


class StreamsTopologyFencedError(BrokerResponseError):
    """The streams topology epoch is outdated."""

    errno = 132
    kafka_name = "STREAMS_TOPOLOGY_FENCED"


class ShareSessionLimitReachedError(BrokerResponseError):
    """The broker's limit of share sessions has been reached."""

    errno = 133
    kafka_name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True


# --- aliases: the names aiokafka and kafka-python use ------------------------

UnknownError = UnknownServerError
CorruptRecordException = CorruptRecordError
CorruptMessageError = CorruptRecordError
InvalidMessageError = CorruptRecordError
InvalidFetchRequestError = InvalidFetchSizeError
NotLeaderForPartitionError = NotLeaderOrFollowerError
MessageSizeTooLargeError = RecordTooLargeError
MessageTooLargeError = RecordTooLargeError
GroupLoadInProgressError = CoordinatorLoadInProgressError
GroupCoordinatorNotAvailableError = CoordinatorNotAvailableError
NotCoordinatorForGroupError = NotCoordinatorError
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError
InvalidConfigurationError = InvalidConfigError
IncompatibleBrokerVersion = UnsupportedVersionError
SaslAuthenticationFailedError = AuthenticationFailedError
NoBrokersAvailable = NoBrokersAvailableError
KafkaConfigurationError = ConfigurationError
ProducerFenced = ProducerFencedError
ProducerClosed = ProducerClosedError
# aiokafka spells codes 45..79 without the ``Error`` suffix.
OutOfOrderSequenceNumber = OutOfOrderSequenceNumberError
DuplicateSequenceNumber = DuplicateSequenceNumberError
InvalidProducerEpoch = InvalidProducerEpochError
InvalidTxnState = InvalidTxnStateError
InvalidProducerIdMapping = InvalidProducerIdMappingError
InvalidTransactionTimeout = InvalidTransactionTimeoutError
ConcurrentTransactions = ConcurrentTransactionsError
TransactionCoordinatorFenced = TransactionCoordinatorFencedError
TransactionalIdAuthorizationFailed = TransactionalIdAuthorizationFailedError
SecurityDisabled = SecurityDisabledError
OperationNotAttempted = OperationNotAttemptedError
LogDirNotFound = LogDirNotFoundError
SaslAuthenticationFailed = AuthenticationFailedError
UnknownProducerId = UnknownProducerIdError
ReassignmentInProgress = ReassignmentInProgressError
DelegationTokenAuthDisabled = DelegationTokenAuthDisabledError
DelegationTokenNotFound = DelegationTokenNotFoundError
DelegationTokenOwnerMismatch = DelegationTokenOwnerMismatchError
DelegationTokenRequestNotAllowed = DelegationTokenRequestNotAllowedError
DelegationTokenAuthorizationFailed = DelegationTokenAuthorizationFailedError
DelegationTokenExpired = DelegationTokenExpiredError
InvalidPrincipalType = InvalidPrincipalTypeError
NonEmptyGroup = NonEmptyGroupError
GroupIdNotFound = GroupIdNotFoundError
FetchSessionIdNotFound = FetchSessionIdNotFoundError
InvalidFetchSessionEpoch = InvalidFetchSessionEpochError
ListenerNotFound = ListenerNotFoundError
MemberIdRequired = MemberIdRequiredError
StaleLeaderEpochCodeError = NetworkExceptionError  # aiokafka's (historical) name for code 13


# --- aiokafka's client-side names this client has no separate case for -----------------
# Kept so aiokafka code that names them (in ``except`` clauses, mostly) runs unchanged.
# This client raises the errors documented with each call; it never raises these.


class IllegalArgumentError(KafkaError, ValueError):
    """An argument is not valid (aiokafka's name; this client raises ``ValueError``,
    ``TypeError`` or :class:`ConfigurationError`)."""


class NodeNotReadyError(KafkaError):
    """The broker's connection is not ready (aiokafka's name; never raised here)."""

    retriable = True


class CorrelationIdError(KafkaProtocolError):
    """A response's correlation id did not match (aiokafka's name; this client raises
    :class:`KafkaProtocolError`)."""


class Cancelled(KafkaError):
    """A request was cancelled (aiokafka's name; never raised here)."""

    retriable = True


class TooManyInFlightRequests(KafkaError):
    """Too many requests in flight (aiokafka's name; never raised here: requests wait
    for a slot)."""

    retriable = True


class StaleMetadata(KafkaError):
    """The metadata is stale (aiokafka's name; never raised here)."""

    retriable = True
    invalid_metadata = True


class UnrecognizedBrokerVersion(KafkaError):
    """The broker's version is not recognized (aiokafka's name; never raised here:
    versions are negotiated with ApiVersions)."""


class AuthenticationMethodNotSupported(KafkaError):
    """The SASL mechanism is not supported (aiokafka's name; this client raises
    :class:`UnsupportedSaslMechanismError` or :class:`ConfigurationError`)."""


class KafkaUnavailableError(KafkaError):
    """Kafka is unavailable (aiokafka's name; never raised here)."""


class MetadataEmptyBrokerList(KafkaError):
    """Metadata named no broker (aiokafka's name; never raised here)."""

    retriable = True


class QuotaViolationError(KafkaError):
    """A quota was violated (aiokafka's name; this client raises the broker's
    :class:`ThrottlingQuotaExceededError`)."""


class NoError(BrokerResponseError):
    """No error (error code 0, aiokafka's name); never raised."""

    kafka_name = "NONE"


NoError.errno = 0  # set after the class: code 0 stays out of the error registry


def for_code(error_code: int) -> type[BrokerResponseError]:
    """The class for a Kafka error code (aiokafka's ``for_code``): unknown codes give
    :class:`UnknownServerError`, 0 gives :class:`NoError`."""
    if error_code == 0:
        return NoError
    return _ERRORS_BY_CODE.get(error_code, UnknownServerError)


#: Every error class by its code (aiokafka's ``kafka_errors``), ``NoError`` included.
kafka_errors: dict[int, type[BrokerResponseError]] = {0: NoError, **_ERRORS_BY_CODE}
