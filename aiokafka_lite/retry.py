"""When to try again: the backoff between attempts and the deadline that ends them.

`backoff_delay` is the one backoff formula of the client (reconnects, producer
retries, group and offset requests): the base doubled per failed attempt, capped,
with random jitter so that many clients do not retry in lockstep. `Deadline` is the
end of one bounded call; it hands each request the time left and refuses a retry
whose backoff would not end before it.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import NoReturn

from aiokafka_lite import errors

__all__ = ["BACKOFF_JITTER", "Deadline", "backoff_delay", "retried_error"]

#: Each delay is scaled by a random factor in [1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER].
BACKOFF_JITTER = 0.2


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """The pause before retry number ``attempt`` (1 for the first retry).

    ``base * 2 ** (attempt - 1)``, at most ``cap``, times a random factor within
    ``BACKOFF_JITTER`` of 1. The result is in the unit of ``base`` and ``cap``;
    ``cap == base`` gives a constant backoff with jitter.
    """
    exponent = min(max(attempt - 1, 0), 62)  # beyond this the cap has long won
    return min(base * 2.0**exponent, cap) * random.uniform(1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER)


def retried_error(last: errors.KafkaError | None, exc: errors.KafkaError) -> errors.KafkaError:
    """The error a retry loop names when it gives up, after an attempt failed with ``exc``.

    ``exc``, unless it is a timeout, or an attempt skipped because its node is in
    reconnect backoff, and an earlier error (``last``) started the retries: an attempt
    cut short by the call's deadline says only that time ran out, a skipped one only
    that the node failed before, while ``last`` says why the call needed another attempt
    (a refused or dropped connection, a moved coordinator), which is what the caller can
    act on.
    """
    if last is not None and (
        isinstance(exc, errors.KafkaTimeoutError) or getattr(exc, "skipped_attempt", False)
    ):
        return last
    return exc


class Deadline:
    """The end of one bounded call (``what`` names it in the timeout error).

    Times are `time.monotonic` seconds, the clock `KafkaClient.send_before` takes.
    """

    __slots__ = ("end", "timeout_ms", "what")

    def __init__(self, timeout_ms: int, what: str) -> None:
        self.timeout_ms = timeout_ms
        self.what = what
        self.end = time.monotonic() + timeout_ms / 1000

    @classmethod
    def until(cls, end: float, what: str) -> Deadline:
        """A deadline at ``end``, a `time.monotonic` time a caller set before: its
        timeout is what is left of it now."""
        deadline = cls(max(int((end - time.monotonic()) * 1000), 0), what)
        deadline.end = end
        return deadline

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.end - time.monotonic()

    def remaining_ms(self) -> int:
        """Milliseconds left, at least 1: a request's own timeout field must be positive."""
        return max(int(self.remaining() * 1000), 1)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def allows(self, delay: float) -> bool:
        """Whether a retry after ``delay`` seconds would still start before the end."""
        return self.remaining() > delay

    def timeout_error(self, last: errors.KafkaError | None = None) -> errors.KafkaTimeoutError:
        message = f"{self.what} did not complete within {self.timeout_ms} ms"
        if last is not None:
            # The last error may be this deadline's own timeout (a part of the call
            # gave up first): say it once, with what it named.
            said = str(last)
            message = said if said.startswith(message) else f"{message} (last error: {said})"
        return errors.KafkaTimeoutError(message)

    def check(self, last: errors.KafkaError | None = None) -> None:
        """Raise the timeout (naming ``last``, the error being retried) once the end has
        passed; a retry loop calls it before each attempt, since a backoff on a busy
        loop can overrun the end."""
        if self.expired:
            raise self.timeout_error(last)

    def raise_cut_short(
        self, exc: errors.KafkaTimeoutError, last: errors.KafkaError | None
    ) -> NoReturn:
        """Raise for an attempt that ended in ``exc``, a timeout at this deadline: a first
        attempt's own timeout, or, on a retry, this deadline's naming ``last``, the error
        that made the call retry (see `retried_error`)."""
        if last is None:
            raise exc
        raise self.timeout_error(last) from exc

    async def pause(self, delay: float, last: errors.KafkaError | None) -> None:
        """Sleep ``delay`` seconds before a retry, or raise the timeout (with ``last``,
        the error being retried) when the retry could not start in time."""
        if not self.allows(delay):
            raise self.timeout_error(last)
        await asyncio.sleep(delay)
