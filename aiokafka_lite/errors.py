"""Typed exceptions raised by aiokafka_lite.

Two families:

* client-side errors (connection lost, timeouts, bad bytes on the wire, bad
  configuration), raised by the client itself;
* broker errors, one class per Kafka error code (see ``BrokerResponseError``),
  built from a response's ``error_code`` with :func:`error_for_code`.

Every error has a ``retriable`` flag: ``True`` when repeating the same request
later may succeed (leader moved, coordinator loading, connection dropped).
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base class of every error this library raises."""

    retriable: ClassVar[bool] = False
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


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish within its timeout."""

    retriable = True


class KafkaConnectionError(KafkaError, ConnectionError):
    """The connection to a broker failed or was closed."""

    retriable = True


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers could be reached."""


class DecodeError(KafkaError):
    """Bytes received from the network could not be decoded."""


class UnsupportedCodecError(KafkaError):
    """A compression codec is unknown or its library is not installed."""


class UnsupportedVersionError(KafkaError):
    """The broker and this client share no version of a required API."""

    errno = 35


class AuthenticationFailedError(KafkaError):
    """SASL authentication failed (bad credentials, or mechanism refused)."""

    errno = 58


class CorruptRecordError(DecodeError):
    """A record batch failed its CRC check or is malformed."""

    errno = 2
    retriable = True


class RecordTooLargeError(KafkaError):
    """A record is larger than the configured maximum request size."""

    errno = 10


MessageSizeTooLargeError = RecordTooLargeError


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses exist for every code."""

    description: ClassVar[str] = ""

    def __str__(self) -> str:
        text = super().__str__()
        return f"[Error {self.errno}] {self.__class__.__name__}: {text}"


_ERRORS_BY_CODE: dict[int, type[KafkaError]] = {}


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """Return an exception instance for a Kafka error code (``code != 0``)."""
    cls = _ERRORS_BY_CODE.get(code)
    if cls is None:
        return UnknownBrokerError(code, message)
    return cls(message)


class UnknownBrokerError(BrokerResponseError):
    """The broker returned an error code this client does not know."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(f"unknown error code {code}" + (f": {message}" if message else ""))
        self.code = code


# The table of per-code classes follows (filled from Kafka's error list).
