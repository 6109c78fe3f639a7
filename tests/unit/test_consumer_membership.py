"""The group membership state machine and its error table."""

from __future__ import annotations

import pytest

from aiokafka_lite.consumer.membership import (
    ErrorAction,
    GroupMembership,
    GroupState,
    error_action,
)


@pytest.mark.parametrize(
    ("api", "code", "action"),
    [
        ("join", 79, ErrorAction.MEMBER_ID_REQUIRED),
        ("join", 25, ErrorAction.RESET_MEMBER),
        ("join", 14, ErrorAction.RETRY),
        ("join", 15, ErrorAction.FIND_COORDINATOR),
        ("join", 16, ErrorAction.FIND_COORDINATOR),
        ("join", 82, ErrorAction.FATAL),
        ("join", 26, ErrorAction.FATAL),  # invalid session timeout
        ("join", 30, ErrorAction.FATAL),  # group authorization
        ("sync", 27, ErrorAction.REJOIN),
        ("sync", 22, ErrorAction.RESET_GENERATION),
        ("heartbeat", 27, ErrorAction.REJOIN),
        ("heartbeat", 22, ErrorAction.RESET_GENERATION),
        ("heartbeat", 25, ErrorAction.RESET_MEMBER),
        ("heartbeat", 82, ErrorAction.FATAL),
        ("commit", 27, ErrorAction.REJOIN),
        ("commit", 22, ErrorAction.RESET_GENERATION),
        ("commit", 16, ErrorAction.FIND_COORDINATOR),
        ("commit", 28, ErrorAction.FATAL),  # invalid commit offset size
        ("fetch_offsets", 88, ErrorAction.RETRY),
        ("fetch_offsets", 14, ErrorAction.RETRY),
        ("fetch_offsets", 30, ErrorAction.FATAL),
    ],
)
def test_error_actions(api: str, code: int, action: ErrorAction) -> None:
    assert error_action(api, code) is action


def joined(m: GroupMembership, generation: int = 1) -> None:
    m.start()
    m.coordinator_found(7)
    m.join_started()
    m.join_succeeded(generation, "member-1", "member-1", "range")
    m.sync_succeeded()


def test_happy_path_to_stable() -> None:
    m = GroupMembership("g")
    assert m.state is GroupState.UNJOINED
    m.start()
    assert m.state is GroupState.NO_COORDINATOR
    m.coordinator_found(7)
    assert m.state is GroupState.REBALANCING
    m.join_started()
    assert not m.rejoin_needed
    m.join_succeeded(3, "member-1", "member-1", "range")
    assert m.is_leader and m.generation.generation_id == 3
    m.sync_succeeded()
    assert m.state is GroupState.STABLE and m.rebalance_count == 1 and m.active


def test_rebalance_in_progress_keeps_generation_and_member() -> None:
    m = GroupMembership("g")
    joined(m)
    assert m.handle_error("heartbeat", 27) is ErrorAction.REJOIN
    assert m.state is GroupState.REBALANCING and m.rejoin_needed
    assert m.generation.valid and m.member_id == "member-1"


def test_a_heartbeat_meeting_the_rebalance_being_completed_does_not_restart_it() -> None:
    m = GroupMembership("g")
    joined(m)
    m.request_rejoin("a member joined")
    m.join_started()
    m.join_succeeded(2, "member-1", "member-2", "range")
    # a heartbeat sent before the SyncGroup answer: the broker is completing this round
    assert m.heartbeat_failed(27) is None
    assert not m.rejoin_needed and m.state is GroupState.REBALANCING
    m.sync_succeeded()
    assert m.state is GroupState.STABLE and not m.rejoin_needed
    # once stable, the same answer announces a new rebalance
    assert m.heartbeat_failed(27) is ErrorAction.REJOIN
    assert m.state is GroupState.REBALANCING and m.rejoin_needed
    assert m.generation.valid and m.member_id == "member-1"


def test_illegal_generation_keeps_member_id_unknown_member_drops_it() -> None:
    m = GroupMembership("g")
    joined(m)
    m.handle_error("heartbeat", 22)
    assert not m.generation.valid and m.member_id == "member-1" and m.rejoin_needed
    joined(m, 2)
    m.handle_error("heartbeat", 25)
    assert not m.generation.valid and m.member_id == ""


def test_coordinator_loss_and_recovery() -> None:
    m = GroupMembership("g")
    joined(m)
    m.handle_error("heartbeat", 16)
    assert m.state is GroupState.NO_COORDINATOR and m.coordinator_id is None
    assert m.generation.valid  # the generation survives a coordinator move
    m.coordinator_found(8)
    assert m.state is GroupState.STABLE
    assert m.last_error is not None and "NotCoordinator" in m.last_error


def test_fenced_static_member_is_fatal() -> None:
    m = GroupMembership("g", "instance-1")
    joined(m)
    assert m.handle_error("heartbeat", 82) is ErrorAction.FATAL
    assert m.state is GroupState.FAILED and m.fatal_error is not None
    m.request_rejoin("anything")
    assert m.state is GroupState.FAILED


def test_member_id_required_sets_the_id_for_the_next_join() -> None:
    m = GroupMembership("g")
    m.start()
    m.coordinator_found(1)
    m.join_started()
    m.member_id_required("given-id")
    assert m.member_id == "given-id" and m.rejoin_needed


def test_rejoin_requested_during_a_round_is_not_lost() -> None:
    m = GroupMembership("g")
    m.start()
    m.coordinator_found(1)
    m.join_started()
    m.join_succeeded(1, "a", "a", "range")
    m.request_rejoin("metadata changed")
    m.sync_succeeded()
    assert m.rejoin_needed and m.state is GroupState.REBALANCING


def test_leave_and_close() -> None:
    m = GroupMembership("g")
    joined(m)
    m.left("unsubscribed")
    assert m.state is GroupState.UNJOINED and not m.generation.valid
    m.close()
    assert m.state is GroupState.CLOSED
