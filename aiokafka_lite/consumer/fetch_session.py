"""The client side of a KIP-227 fetch session with one broker: after a full fetch that
opened a session, later fetches carry only the partitions whose fetch state changed,
and name the ones no longer wanted."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiokafka_lite.structs import TopicPartition

__all__ = ["FetchSessionHandler"]

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
# After it there is no session to close; after any other error the next (full) fetch
# closes the session.
_FETCH_SESSION_ID_NOT_FOUND = 70


class FetchSessionHandler:
    """Client side of a KIP-227 fetch session with one broker."""

    INITIAL_EPOCH = 0
    FINAL_EPOCH = -1

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session_id = 0
        self.epoch = self.INITIAL_EPOCH
        #: What the broker's session holds per partition: (fetch_offset, max_bytes, epoch).
        self.session: dict[TopicPartition, tuple[int, int, int]] = {}
        self._pending: dict[TopicPartition, tuple[int, int, int]] | None = None
        self._pending_full = True

    @property
    def full_next(self) -> bool:
        return self.session_id == 0 or self.epoch == self.INITIAL_EPOCH

    def build(
        self, wanted: Mapping[TopicPartition, tuple[int, int, int]]
    ) -> tuple[dict[TopicPartition, tuple[int, int, int]], list[TopicPartition], int, int]:
        """Partitions to send, partitions to forget, session id and epoch."""
        self._pending = dict(wanted)
        if self.full_next:
            self._pending_full = True
            return dict(wanted), [], self.session_id, self.epoch
        self._pending_full = False
        to_send = {tp: data for tp, data in wanted.items() if self.session.get(tp) != data}
        forget = [tp for tp in self.session if tp not in wanted]
        return to_send, forget, self.session_id, self.epoch

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Update after a response; False when the session broke (retry with a full fetch)."""
        pending, self._pending = self._pending, None
        if error_code:
            log.debug(
                "fetch session %s with node %s reset: error %s",
                self.session_id,
                self.node_id,
                error_code,
            )
            if error_code == _FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0  # nothing left to close
            self.reset()
            return False
        if pending is None:
            # Reset while this fetch was in flight (see reset): its answer may be read,
            # but the session it speaks of is given up; the next fetch is a full one,
            # which closes the session this answer opened, if it opened one.
            if session_id and not self.session_id:
                self.session_id = session_id
            return True
        if self._pending_full:
            if session_id:
                self.session_id = session_id
                self.epoch = 1
                self.session = dict(pending)
            else:
                # The broker made no session (or does not support them): stay sessionless.
                self.session_id = 0
                self.epoch = self.INITIAL_EPOCH
                self.session = {}
            return True
        self.session = dict(pending)
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1
        return True

    def reset(self) -> None:
        """Give the session up: the next fetch is a full one. A fetch in flight meanwhile
        leaves it so (its answer does not take the session up again).

        The full fetch names the old session at epoch 0, which asks the broker to close
        it (KIP-227); a session id of 0 would leave it taking a slot of the broker's
        session cache until evicted.
        """
        self.epoch = self.INITIAL_EPOCH
        self.session = {}
        self._pending = None
