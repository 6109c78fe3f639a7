"""The error table: every Kafka error code maps to a typed class."""

from __future__ import annotations

import pickle
import re

import pytest

from aiokafka_lite import errors
from aiokafka_lite.errors import (
    BrokerResponseError,
    KafkaError,
    UnknownBrokerError,
    error_class_for_code,
    error_for_code,
    raise_for_code,
)

ALL_CODES = list(range(-1, 134))
ALL_CODES.remove(0)

# A hand-checked sample of Kafka's list: code -> (protocol name, retriable).
KNOWN = {
    -1: ("UNKNOWN_SERVER_ERROR", False),
    1: ("OFFSET_OUT_OF_RANGE", False),
    2: ("CORRUPT_MESSAGE", True),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    5: ("LEADER_NOT_AVAILABLE", True),
    6: ("NOT_LEADER_OR_FOLLOWER", True),
    7: ("REQUEST_TIMED_OUT", True),
    10: ("MESSAGE_TOO_LARGE", False),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True),
    16: ("NOT_COORDINATOR", True),
    22: ("ILLEGAL_GENERATION", False),
    25: ("UNKNOWN_MEMBER_ID", False),
    27: ("REBALANCE_IN_PROGRESS", False),
    30: ("GROUP_AUTHORIZATION_FAILED", False),
    35: ("UNSUPPORTED_VERSION", False),
    36: ("TOPIC_ALREADY_EXISTS", False),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    47: ("INVALID_PRODUCER_EPOCH", False),
    51: ("CONCURRENT_TRANSACTIONS", True),
    58: ("SASL_AUTHENTICATION_FAILED", False),
    74: ("FENCED_LEADER_EPOCH", True),
    82: ("FENCED_INSTANCE_ID", False),
    89: ("THROTTLING_QUOTA_EXCEEDED", True),
    90: ("PRODUCER_FENCED", False),
    100: ("UNKNOWN_TOPIC_ID", True),
    133: ("SHARE_SESSION_LIMIT_REACHED", True),
}


@pytest.mark.generated
def _check_code(code: int) -> None:
    err = error_for_code(code, "broker said so")
    cls = type(err)
    assert cls is error_class_for_code(code)
    assert isinstance(err, BrokerResponseError)
    assert isinstance(err, KafkaError)
    assert err.errno == code
    assert cls.__name__.endswith("Error")
    assert re.fullmatch(r"[A-Z][A-Z0-9_]+", cls.kafka_name)
    assert cls.description and "\n" not in cls.description
    assert isinstance(cls.retriable, bool)
    assert isinstance(cls.invalid_metadata, bool)
    # Every class is importable by its own name from the module.
    assert getattr(errors, cls.__name__) is cls
    text = str(err)
    assert cls.__name__ in text
    assert "broker said so" in text
    assert str(code) in text


def test_every_code_maps_to_its_class() -> None:
    # Every code is checked; the failure names each code that failed and how.
    failures = []
    for code in ALL_CODES:
        try:
            _check_code(code)
        except AssertionError as exc:
            failures.append(f"code {code}: {exc}")
    assert not failures, "\n".join(failures)


def test_codes_are_unique_and_complete() -> None:
    assert sorted(errors._ERRORS_BY_CODE) == ALL_CODES
    names = [cls.kafka_name for cls in errors._ERRORS_BY_CODE.values()]
    assert len(names) == len(set(names))


def test_known_names_and_retriable_flags() -> None:
    found = {}
    for code in KNOWN:
        cls = error_class_for_code(code)
        found[code] = (cls.kafka_name, cls.retriable) if cls is not None else None
    assert found == KNOWN


def test_invalid_metadata_flags() -> None:
    for cls in (
        errors.NotLeaderOrFollowerError,
        errors.UnknownTopicOrPartitionError,
        errors.LeaderNotAvailableError,
        errors.FencedLeaderEpochError,
        errors.UnknownTopicIdError,
    ):
        assert cls.invalid_metadata and cls.retriable
    for cls in (
        errors.NotCoordinatorError,
        errors.RequestTimedOutError,
        errors.TopicAlreadyExistsError,
        errors.KafkaConnectionError,
    ):
        assert not cls.invalid_metadata
    # An error that asks for a metadata refresh is always worth retrying.
    for cls in errors._ERRORS_BY_CODE.values():
        assert cls.retriable or not cls.invalid_metadata, cls


def test_message_defaults_to_description() -> None:
    err = error_for_code(3)
    assert err.message == errors.UnknownTopicOrPartitionError.description
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(err)


def test_special_classes_keep_their_other_bases() -> None:
    corrupt = error_for_code(2)
    assert isinstance(corrupt, errors.CorruptRecordError)
    assert isinstance(corrupt, errors.DecodeError)
    assert isinstance(error_for_code(10), errors.RecordTooLargeError)
    assert isinstance(error_for_code(35), errors.UnsupportedVersionError)
    assert isinstance(error_for_code(58), errors.AuthenticationFailedError)
    # Raised client-side without a code lookup, they still carry the code.
    assert errors.UnsupportedVersionError("no common ApiVersions version").errno == 35
    with pytest.raises(errors.DecodeError):
        raise errors.CorruptRecordError("bad CRC")


def test_aliases() -> None:
    assert errors.NotLeaderForPartitionError is errors.NotLeaderOrFollowerError
    assert errors.MessageSizeTooLargeError is errors.RecordTooLargeError
    assert errors.SaslAuthenticationFailedError is errors.AuthenticationFailedError
    assert errors.GroupCoordinatorNotAvailableError is errors.CoordinatorNotAvailableError
    assert errors.NotCoordinatorForGroupError is errors.NotCoordinatorError
    assert errors.UnknownError is errors.UnknownServerError
    assert errors.OutOfOrderSequenceNumber is errors.OutOfOrderSequenceNumberError


def test_client_side_errors_are_builtin_compatible() -> None:
    assert issubclass(errors.KafkaTimeoutError, TimeoutError)
    assert issubclass(errors.KafkaConnectionError, ConnectionError)
    assert issubclass(errors.ConfigurationError, ValueError)
    assert errors.KafkaTimeoutError.retriable
    assert errors.KafkaTimeoutError("late").errno == -1


def test_producer_and_consumer_errors() -> None:
    assert issubclass(errors.SerializationError, TypeError)
    assert issubclass(errors.ProducerClosedError, errors.IllegalStateError)
    # As in aiokafka: not a KafkaError, so "except KafkaError: retry" does not retry it.
    assert not issubclass(errors.ConsumerStoppedError, KafkaError)
    assert issubclass(errors.IllegalOperationError, errors.IllegalStateError)
    assert issubclass(errors.IllegalOperationError, errors.IllegalOperation)
    assert not issubclass(errors.IllegalOperation, KafkaError)
    assert issubclass(KafkaError, RuntimeError)
    for cls in (
        errors.TransactionAbortedError,
        errors.CommitFailedError,
        errors.NoOffsetForPartitionError,
        errors.RecordDeserializationError,
    ):
        assert issubclass(cls, KafkaError) and not issubclass(cls, BrokerResponseError)
        assert not cls.retriable
    assert errors.ProducerClosed is errors.ProducerClosedError


def test_unknown_code() -> None:
    err = error_for_code(31999, "new in Kafka 9")
    assert isinstance(err, UnknownBrokerError)
    assert err.code == 31999
    assert "31999" in str(err) and "new in Kafka 9" in str(err)
    assert error_class_for_code(31999) is None


def test_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError):
        error_for_code(0)
    raise_for_code(0)
    with pytest.raises(errors.RebalanceInProgressError, match="rejoin"):
        raise_for_code(27)


@pytest.mark.parametrize("err", [error_for_code(6, "moved"), error_for_code(4242, "x")])
def test_errors_pickle(err: BrokerResponseError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)


def test_covers_every_code_kafka_python_knows() -> None:
    kafka_errors = pytest.importorskip("kafka.errors")
    for value in vars(kafka_errors).values():
        if (
            isinstance(value, type)
            and issubclass(value, kafka_errors.BrokerResponseError)
            and isinstance(getattr(value, "errno", None), int)
            and value.errno != 0
        ):
            assert error_class_for_code(value.errno) is not None, value


def test_offset_out_of_range_error_carries_offsets_as_aiokafka() -> None:
    import pickle

    from aiokafka_lite.structs import TopicPartition

    tp = TopicPartition("t", 3)
    exc = errors.OffsetOutOfRangeError({tp: 42}, "fetch offset 42 of t-3 is out of range")
    assert exc.args[0] == {tp: 42}  # what aiokafka's own examples read
    assert exc.offsets == {tp: 42}
    assert str(exc).endswith("fetch offset 42 of t-3 is out of range")
    assert "t-3 at 42" in str(errors.OffsetOutOfRangeError({tp: 42}))
    again = pickle.loads(pickle.dumps(exc))
    assert again.args[0] == {tp: 42} and str(again) == str(exc)
    # From a broker's error code it is a plain message, as every other error.
    assert errors.error_for_code(1, "x").offsets == {}


def test_aiokafka_names_for_codes() -> None:
    assert errors.for_code(0) is errors.NoError
    assert errors.for_code(13) is errors.StaleLeaderEpochCodeError is errors.NetworkExceptionError
    assert errors.for_code(10_000) is errors.UnknownServerError
    assert errors.kafka_errors[1] is errors.OffsetOutOfRangeError
    assert 0 not in errors._ERRORS_BY_CODE  # error_for_code(0) still refuses
