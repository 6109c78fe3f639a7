"""Subscription state: subscription kinds, assignment, positions, pause, revocation."""

from __future__ import annotations

import re

import pytest

from aiokafka_lite import errors
from aiokafka_lite.cluster import TopicMetadata
from aiokafka_lite.consumer.subscription import OffsetResetStrategy, SubscriptionState
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

A, B, C = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_subscribe_assign_and_pattern_are_exclusive() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    with pytest.raises(errors.IllegalStateError):
        s.assign_from_user([A])
    with pytest.raises(errors.IllegalStateError):
        s.subscribe_pattern(re.compile("a.*"))
    s.unsubscribe()
    s.assign_from_user([A])
    with pytest.raises(errors.IllegalStateError):
        s.subscribe(["a"])


def test_pattern_matches_at_the_start_as_aiokafka() -> None:
    # aiokafka uses re.match: anchored at the start only (FastStream relies on it);
    # "$" asks for a full match, as Java's client does.
    s = SubscriptionState()
    s.subscribe_pattern(re.compile(r"orders-\d+"))
    assert s.match_pattern(["orders-1", "orders-12", "orders-1x", "xorders-1"]) == {
        "orders-1",
        "orders-12",
        "orders-1x",
    }
    s.unsubscribe()
    s.subscribe_pattern(re.compile(r"orders-\d+$"))
    assert s.match_pattern(["orders-1", "orders-1x", "xorders-1"]) == {"orders-1"}


def test_reassignment_keeps_state_of_kept_partitions() -> None:
    s = SubscriptionState()
    s.subscribe(["a", "b"])
    s.assign_from_subscribed([A, B])
    s.seek(A, 10)
    old_b = s.state(B)
    epoch = old_b.epoch
    s.assign_from_subscribed([A, C])
    assert s.state(A).position == 10
    assert s.get_state(B) is None and old_b.epoch > epoch  # detached
    assert s.state(C).position is None


def test_positions_resets_and_commits() -> None:
    s = SubscriptionState(OffsetResetStrategy.EARLIEST)
    s.assign_from_user([A, B])
    assert s.need_position() == [A, B]
    s.request_reset(A)
    assert s.state(A).reset_strategy is OffsetResetStrategy.EARLIEST
    assert s.need_position() == [B] and s.need_reset() == [A]
    s.seek(A, 5, leader_epoch=2)
    assert s.need_reset() == []
    assert s.all_consumed() == {A: OffsetAndMetadata(5, "", 2)}
    assert s.fetchable() == [A]
    with pytest.raises(ValueError):
        s.seek(A, -1)
    with pytest.raises(errors.IllegalStateError):
        s.seek(C, 1)


def test_pause_drops_data_fetched_ahead() -> None:
    s = SubscriptionState()
    s.assign_from_user([A])
    s.seek(A, 5)
    state = s.state(A)
    state.fetch_offset = 50  # fetched ahead
    epoch = state.epoch
    s.pause(A)
    assert s.paused_partitions() == {A} and state.fetch_offset == 5 and state.epoch > epoch
    assert s.fetchable() == []
    s.resume(A)
    assert s.fetchable() == [A]


def test_pending_revocation_stops_fetching() -> None:
    s = SubscriptionState()
    s.subscribe(["a"])
    s.assign_from_subscribed([A, B])
    s.seek(A, 1)
    s.seek(B, 1)
    s.mark_pending_revocation([A])
    assert s.fetchable() == [B]


def test_lag_uses_lso_with_read_committed() -> None:
    s = SubscriptionState()
    s.assign_from_user([A])
    assert s.lag(A) is None
    s.seek(A, 10)
    s.update_fetch_info(A, 30, 25, 0)
    assert s.lag(A) == 20 and s.lag(A, read_committed=True) == 15


def test_change_listener_and_version() -> None:
    s = SubscriptionState()
    calls: list[int] = []
    s.add_change_listener(lambda: calls.append(s.version))
    s.subscribe(["a"])
    assert not s.subscribe(["a"])  # unchanged
    s.assign_from_subscribed([A])
    assert calls == [1, 2]


def _topics(**codes: int) -> dict[str, TopicMetadata]:
    return {
        name: TopicMetadata(name, None, name.startswith("__"), {}, code)
        for name, code in codes.items()
    }


def test_a_pattern_keeps_a_topic_with_a_passing_metadata_error() -> None:
    """A subscribed topic answered LEADER_NOT_AVAILABLE (5) stays subscribed (with a
    group, dropping it revoked its partitions and read them again from the last commit);
    UNKNOWN_TOPIC_OR_PARTITION (3: deleted) drops it; a topic not yet subscribed joins
    only once it has no error; internal topics only when asked."""
    s = SubscriptionState()
    s.subscribe_pattern(re.compile("o"))
    s.follow_pattern(_topics(o1=0, o2=0, x=0), exclude_internal=True)
    assert s.subscription == {"o1", "o2"}
    s.follow_pattern(_topics(o1=5, o2=0, o3=5), exclude_internal=True)
    assert s.subscription == {"o1", "o2"}
    s.follow_pattern(_topics(o1=3, o2=0, o3=0), exclude_internal=True)
    assert s.subscription == {"o2", "o3"}
    s.subscribe_pattern(re.compile("_*o"))
    s.follow_pattern(_topics(__o=0, o2=0), exclude_internal=True)
    assert s.subscription == {"o2"}
    s.follow_pattern(_topics(__o=0, o2=0), exclude_internal=False)
    assert s.subscription == {"__o", "o2"}
