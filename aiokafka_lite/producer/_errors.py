"""Producer errors, taken from :mod:`aiokafka_lite.errors` when it defines them.

Fallback definitions keep the producer working until the shared module has them; the
public names are re-exported by :mod:`aiokafka_lite.producer`.
"""

from __future__ import annotations

from aiokafka_lite import errors

__all__ = ["ProducerClosedError", "SerializationError", "TransactionAbortedError"]


class _SerializationError(errors.KafkaError, TypeError):
    """A key or value could not be turned into bytes (wrong type and no serializer, or
    the serializer failed)."""


class _TransactionAbortedError(errors.KafkaError):
    """The record was not sent because its transaction was aborted."""


class _ProducerClosedError(errors.IllegalStateError):
    """The producer is closed (or closing) and accepts no more records."""


SerializationError: type[errors.KafkaError] = getattr(
    errors, "SerializationError", _SerializationError
)
TransactionAbortedError: type[errors.KafkaError] = getattr(
    errors, "TransactionAbortedError", _TransactionAbortedError
)
ProducerClosedError: type[errors.KafkaError] = getattr(
    errors, "ProducerClosedError", _ProducerClosedError
)
