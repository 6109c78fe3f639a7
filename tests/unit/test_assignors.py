"""Assignors: properties that must hold for any group (hypothesis) and known cases."""

from __future__ import annotations

import struct
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import errors
from aiokafka_lite.consumer.assignors import (
    CooperativeStickyAssignor,
    GroupMember,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    common_protocol,
    resolve_assignors,
    sticky_assign,
)
from aiokafka_lite.protocol.group_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)
from aiokafka_lite.structs import TopicPartition as TP

Result = dict[str, list[TP]]


def member(
    member_id: str,
    topics: list[str],
    owned: list[TP] = (),  # type: ignore[assignment]
    generation: int = -1,
    instance: str | None = None,
) -> GroupMember:
    return GroupMember(
        member_id, instance, Subscription(tuple(topics), None, tuple(owned), generation)
    )


# --- strategies -------------------------------------------------------------------------

topic_counts = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 12), min_size=1, max_size=4
)


@st.composite
def groups(draw: st.DrawFn, uniform: bool = False) -> tuple[dict[str, int], dict[str, GroupMember]]:
    counts = draw(topic_counts)
    names = sorted(counts)
    n = draw(st.integers(1, 7))
    members = {}
    for i in range(n):
        if uniform:
            topics = names
        else:
            topics = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        members[f"m{i:02d}"] = member(f"m{i:02d}", topics)
    return counts, members


def all_partitions(counts: Mapping[str, int], members: Mapping[str, GroupMember]) -> set[TP]:
    subscribed = {t for m in members.values() for t in m.subscription.topics}
    return {TP(t, p) for t, n in counts.items() if t in subscribed for p in range(n)}


def check_valid(
    result: Result, counts: Mapping[str, int], members: Mapping[str, GroupMember]
) -> None:
    assert set(result) == set(members)
    seen: list[TP] = [tp for parts in result.values() for tp in parts]
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    for member_id, parts in result.items():
        for tp in parts:
            assert tp.topic in members[member_id].subscription.topics
    assert set(seen) == all_partitions(counts, members)


def check_balanced(result: Result, members: Mapping[str, GroupMember]) -> None:
    """No partition could go to another subscriber that has two or more fewer."""
    sizes = {m: len(p) for m, p in result.items()}
    for member_id, parts in result.items():
        for tp in parts:
            for other, om in members.items():
                if other != member_id and tp.topic in om.subscription.topics:
                    assert sizes[member_id] - sizes[other] < 2, (tp, member_id, other, sizes)


ASSIGNOR_CLASSES: list[type[PartitionAssignor]] = [
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    CooperativeStickyAssignor,
]


# --- properties for every assignor -------------------------------------------------------


@pytest.mark.parametrize("cls", ASSIGNOR_CLASSES, ids=lambda c: c.name)
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_every_partition_to_exactly_one_subscriber(
    cls: type[PartitionAssignor], group: tuple[dict[str, int], dict[str, GroupMember]]
) -> None:
    counts, members = group
    check_valid(cls().assign(counts, members), counts, members)


@pytest.mark.parametrize("cls", ASSIGNOR_CLASSES, ids=lambda c: c.name)
@settings(max_examples=100, deadline=None)
@given(group=groups(), data=st.data())
def test_result_does_not_depend_on_member_order(
    cls: type[PartitionAssignor],
    group: tuple[dict[str, int], dict[str, GroupMember]],
    data: st.DataObject,
) -> None:
    counts, members = group
    shuffled = dict(data.draw(st.permutations(list(members.items()))))
    assert cls().assign(counts, members) == cls().assign(counts, shuffled)


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_range_gives_contiguous_near_equal_ranges_per_topic(
    group: tuple[dict[str, int], dict[str, GroupMember]],
) -> None:
    counts, members = group
    result = RangeAssignor().assign(counts, members)
    for topic, n in counts.items():
        subscribers = sorted(m for m, mm in members.items() if topic in mm.subscription.topics)
        assert sum(len([tp for tp in result[m] if tp.topic == topic]) for m in subscribers) == (
            n if subscribers else 0
        )
        if not subscribers:
            continue
        sizes = [len([tp for tp in result[m] if tp.topic == topic]) for m in subscribers]
        assert max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True)  # extra ones go to the first members
        start = 0
        for m, size in zip(subscribers, sizes, strict=True):
            assert sorted(tp.partition for tp in result[m] if tp.topic == topic) == list(
                range(start, start + size)
            )
            start += size


@pytest.mark.parametrize("cls", [RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor])
@settings(max_examples=150, deadline=None)
@given(group=groups(uniform=True))
def test_uniform_subscriptions_are_balanced_within_one(
    cls: type[PartitionAssignor], group: tuple[dict[str, int], dict[str, GroupMember]]
) -> None:
    counts, members = group
    sizes = [len(p) for p in cls().assign(counts, members).values()]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor])
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_sticky_is_balanced_for_any_subscriptions(
    cls: type[PartitionAssignor], group: tuple[dict[str, int], dict[str, GroupMember]]
) -> None:
    counts, members = group
    check_balanced(cls().assign(counts, members), members)


# --- stickiness and cooperative rebalancing ------------------------------------------------


@st.composite
def membership_changes(draw: st.DrawFn) -> tuple[dict[str, int], list[str], list[str]]:
    counts = draw(topic_counts)
    before = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True))
    after = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True))
    return counts, sorted(before), sorted(after)


@settings(max_examples=200, deadline=None)
@given(change=membership_changes())
def test_sticky_moves_only_what_balance_requires(
    change: tuple[dict[str, int], list[str], list[str]],
) -> None:
    counts, before_ids, after_ids = change
    topics = sorted(counts)
    before = {m: member(m, topics) for m in before_ids}
    first = sticky_assign(counts, before, {})
    after = {m: member(m, topics) for m in after_ids}
    previous = {m: (first[m], 1) for m in before_ids if m in after}
    second = sticky_assign(counts, after, previous)
    check_valid(second, counts, after)
    sizes = [len(p) for p in second.values()]
    assert max(sizes) - min(sizes) <= 1
    for m in after_ids:
        if m in first:
            kept = set(first[m]) & set(second[m])
            # A surviving member only loses partitions when its share shrinks.
            assert len(kept) == min(len(first[m]), len(second[m]))


@settings(max_examples=200, deadline=None)
@given(change=membership_changes())
def test_cooperative_two_phase_never_revokes_partitions_that_stay(
    change: tuple[dict[str, int], list[str], list[str]],
) -> None:
    counts, before_ids, after_ids = change
    topics = sorted(counts)
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(counts, {m: member(m, topics) for m in before_ids})
    owned = {m: first[m] for m in after_ids if m in first}

    # Round 1: members report what they own.
    round1_members = {m: member(m, topics, owned.get(m, []), 1) for m in after_ids}
    round1 = assignor.assign(counts, round1_members)
    seen = [tp for parts in round1.values() for tp in parts]
    assert len(seen) == len(set(seen))
    for m, parts in round1.items():
        for tp in parts:
            for other, other_owned in owned.items():
                if other != m:
                    assert tp not in other_owned, f"{tp} given to {m} while {other} owns it"
    # Each member keeps what it owned and was not asked to give up.
    after_revoke = {m: [tp for tp in owned.get(m, []) if tp in round1[m]] for m in after_ids}

    # Round 2: after revoking, the assignment completes and keeps round 1's partitions.
    round2_members = {
        m: member(
            m, topics, after_revoke[m] + [tp for tp in round1[m] if tp not in after_revoke[m]], 2
        )
        for m in after_ids
    }
    round2 = assignor.assign(counts, round2_members)
    check_valid(round2, counts, round2_members)
    sizes = [len(p) for p in round2.values()]
    assert max(sizes) - min(sizes) <= 1
    for m in after_ids:
        assert set(round1[m]) <= set(round2[m]), "a partition kept in round 1 moved in round 2"
        revoked_in_round1 = set(owned.get(m, [])) - set(round1[m])
        assert not (revoked_in_round1 & set(round2[m])), "revoked, then given back"


def test_cooperative_withholds_moving_partitions_until_revoked() -> None:
    counts = {"t": 6}
    owned = [TP("t", p) for p in range(6)]
    members = {
        "a": member("a", ["t"], owned, 3),
        "b": member("b", ["t"]),
    }
    round1 = CooperativeStickyAssignor().assign(counts, members)
    assert len(round1["a"]) == 3 and round1["b"] == []
    members = {
        "a": member("a", ["t"], round1["a"], 4),
        "b": member("b", ["t"], [], 4),
    }
    round2 = CooperativeStickyAssignor().assign(counts, members)
    assert round2["a"] == round1["a"]
    assert sorted(round2["b"]) == sorted(set(owned) - set(round1["a"]))


def test_sticky_prefers_claim_of_highest_generation() -> None:
    counts = {"t": 2}
    members = {
        "a": member("a", ["t"], [TP("t", 0)], 5),
        "b": member("b", ["t"], [TP("t", 0), TP("t", 1)], 4),
    }
    result = sticky_assign(
        counts,
        members,
        {
            m: (g.subscription.owned_partitions, g.subscription.generation_id)
            for m, g in members.items()
        },
    )
    assert result == {"a": [TP("t", 0)], "b": [TP("t", 1)]}


def test_eager_sticky_keeps_assignment_through_user_data() -> None:
    counts = {"t": 4}
    assignor = StickyAssignor()
    assignor.on_assignment(Assignment((TP("t", 1), TP("t", 3))), 7)
    data = assignor.subscription_user_data(["t"])
    assert data is not None
    assert decode_sticky_user_data(data) == ([TP("t", 1), TP("t", 3)], 7)
    members = {
        "x": GroupMember("x", None, Subscription(("t",), data)),
        "y": GroupMember("y", None, Subscription(("t",))),
    }
    assert StickyAssignor().assign(counts, members)["x"] == [TP("t", 1), TP("t", 3)]


def test_static_members_sort_by_instance_id() -> None:
    counts = {"t": 2}
    members = {
        "zzz": member("zzz", ["t"], instance="a"),
        "aaa": member("aaa", ["t"], instance="b"),
    }
    assert RangeAssignor().assign(counts, members) == {"zzz": [TP("t", 0)], "aaa": [TP("t", 1)]}


def test_range_and_roundrobin_known_cases() -> None:
    counts = {"t0": 3, "t1": 3}
    members = {"c0": member("c0", ["t0", "t1"]), "c1": member("c1", ["t0", "t1"])}
    assert RangeAssignor().assign(counts, members) == {
        "c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "c1": [TP("t0", 2), TP("t1", 2)],
    }
    assert RoundRobinAssignor().assign(counts, members) == {
        "c0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
        "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)],
    }


def test_topics_without_metadata_are_skipped() -> None:
    members = {"a": member("a", ["known", "unknown"])}
    for cls in ASSIGNOR_CLASSES:
        assert cls().assign({"known": 2}, members) == {"a": [TP("known", 0), TP("known", 1)]}


# --- resolution and protocols --------------------------------------------------------------


def test_resolve_assignors_accepts_names_classes_instances_and_java_names() -> None:
    custom = RoundRobinAssignor()
    resolved = resolve_assignors(
        [
            "range",
            StickyAssignor,
            custom,
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        ]
    )
    assert [a.name for a in resolved] == ["range", "sticky", "roundrobin", "cooperative-sticky"]
    assert resolved[2] is custom
    assert [a.name for a in resolve_assignors("roundrobin")] == ["roundrobin"]


def test_resolve_assignors_accepts_aiokafka_assignor_classes() -> None:
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assert [a.name for a in resolve_assignors([RoundRobinPartitionAssignor])] == ["roundrobin"]


@pytest.mark.parametrize("bad", [[], ["nope"], [42], ["range", "range"]])
def test_resolve_assignors_rejects_bad_specs(bad: list[object]) -> None:
    with pytest.raises(errors.ConfigurationError, match=r"partition_assignment_strategy|assignor"):
        resolve_assignors(bad)  # type: ignore[arg-type]


def test_common_protocol() -> None:
    assert (
        common_protocol(resolve_assignors(["range", "cooperative-sticky"]))
        is RebalanceProtocol.EAGER
    )
    assert (
        common_protocol(resolve_assignors(["cooperative-sticky"])) is RebalanceProtocol.COOPERATIVE
    )


# --- the embedded consumer protocol ----------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    topics=st.lists(st.text(min_size=1, max_size=10), max_size=5),
    user_data=st.none() | st.binary(max_size=20),
    owned=st.lists(st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 50)), unique=True),
    generation=st.integers(-1, 2**31 - 1),
    rack=st.none() | st.text(max_size=5),
    version=st.integers(0, 3),
)
def test_subscription_roundtrip(
    topics: list[str],
    user_data: bytes | None,
    owned: list[tuple[str, int]],
    generation: int,
    rack: str | None,
    version: int,
) -> None:
    sub = Subscription(
        tuple(topics),
        user_data,
        tuple(sorted(TP(t, p) for t, p in owned)),
        generation,
        rack,
        version,
    )
    decoded = decode_subscription(encode_subscription(sub))
    assert decoded.topics == sub.topics
    assert decoded.user_data == sub.user_data
    assert decoded.version == version
    assert decoded.owned_partitions == (sub.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (generation if version >= 2 else -1)
    assert decoded.rack_id == (rack if version >= 3 else None)


@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(0, 99)), unique=True),
    user_data=st.none() | st.binary(max_size=20),
)
def test_assignment_roundtrip(parts: list[tuple[str, int]], user_data: bytes | None) -> None:
    tps = [TP(t, p) for t, p in parts]
    decoded = decode_assignment(encode_assignment(tps, user_data))
    assert sorted(decoded.partitions) == sorted(tps)
    assert decoded.user_data == user_data


def test_subscription_from_a_newer_version_keeps_known_fields() -> None:
    data = encode_subscription(Subscription(("t",), None, (TP("t", 1),), 9, "r1", 3))
    newer = struct.pack(">h", 4) + data[2:] + b"future-field"
    decoded = decode_subscription(newer)
    assert decoded.topics == ("t",) and decoded.owned_partitions == (TP("t", 1),)
    assert decoded.generation_id == 9 and decoded.rack_id == "r1"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_garbage_raises_decode_error_only(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment, decode_sticky_user_data):
        try:
            decode(data)
        except errors.DecodeError:
            pass


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"").partitions == ()


def test_cooperative_user_data_carries_generation() -> None:
    a = CooperativeStickyAssignor()
    a.on_assignment(Assignment(), 12)
    assert a.subscription_user_data(["t"]) == struct.pack(">i", 12)
    assert encode_sticky_user_data([], 3) == struct.pack(">ii", 0, 3)


# --- rack-aware assignment (KIP-881) -----------------------------------------------------

RACKS = ["r0", "r1", "r2"]
RACK_AWARE = [RangeAssignor, StickyAssignor, CooperativeStickyAssignor]


def racked(
    member_id: str, topics: list[str], rack: str | None, owned: list[TP] = ()
) -> GroupMember:  # type: ignore[assignment]
    return GroupMember(member_id, None, Subscription(tuple(topics), None, tuple(owned), -1, rack))


@st.composite
def racked_groups(
    draw: st.DrawFn,
) -> tuple[dict[str, int], dict[str, GroupMember], dict[TP, frozenset[str]]]:
    counts, plain = draw(groups())
    members = {
        m: racked(m, list(g.subscription.topics), draw(st.sampled_from([*RACKS, None])))
        for m, g in plain.items()
    }
    racks = {
        TP(t, p): frozenset(draw(st.lists(st.sampled_from(RACKS), max_size=2)))
        for t, n in counts.items()
        for p in range(n)
    }
    return counts, members, racks


def local_count(
    result: Result, members: Mapping[str, GroupMember], racks: Mapping[TP, frozenset[str]]
) -> int:
    return sum(
        1
        for m, parts in result.items()
        for tp in parts
        if members[m].subscription.rack_id in racks.get(tp, ())
    )


@pytest.mark.parametrize("cls", RACK_AWARE, ids=lambda c: c.name)
@settings(max_examples=200, deadline=None)
@given(group=racked_groups(), data=st.data())
def test_racks_change_where_partitions_go_not_how_many(
    cls: type[PartitionAssignor],
    group: tuple[dict[str, int], dict[str, GroupMember], dict[TP, frozenset[str]]],
    data: st.DataObject,
) -> None:
    counts, members, racks = group
    plain = cls().assign(counts, members)
    aware = cls().assign(counts, members, partition_racks=racks)
    check_valid(aware, counts, members)
    assert {m: len(p) for m, p in aware.items()} == {m: len(p) for m, p in plain.items()}
    if cls is not RangeAssignor:
        check_balanced(aware, members)
        # Swaps only ever gain: never fewer rack-local partitions than without racks.
        assert local_count(aware, members, racks) >= local_count(plain, members, racks)
    shuffled = dict(data.draw(st.permutations(list(members.items()))))
    assert cls().assign(counts, shuffled, partition_racks=racks) == aware


@settings(max_examples=200, deadline=None)
@given(group=racked_groups(), data=st.data())
def test_racks_never_take_a_kept_partition_away(
    group: tuple[dict[str, int], dict[str, GroupMember], dict[TP, frozenset[str]]],
    data: st.DataObject,
) -> None:
    counts, members, racks = group
    everything = sorted(all_partitions(counts, members))
    # Each partition claimed by one member at most (or by none).
    owners = data.draw(
        st.lists(
            st.sampled_from([*members, None]), min_size=len(everything), max_size=len(everything)
        )
    )
    previous = {
        m: ([tp for tp, o in zip(everything, owners, strict=True) if o == m], 1) for m in members
    }
    plain = sticky_assign(counts, members, previous)
    aware = sticky_assign(counts, members, previous, racks)
    for m, (claimed, _) in previous.items():
        kept = set(claimed) & set(plain[m])
        assert kept <= set(aware[m])


def test_rack_aware_known_cases() -> None:
    counts = {"t": 4}
    # t-0 and t-3 live on rack a, t-1 and t-2 on rack b: plain ranges would give each
    # member one partition of the other rack, whichever member sorts first.
    racks = {TP("t", 0): frozenset({"a"}), TP("t", 3): frozenset({"a"})}
    racks |= {TP("t", 1): frozenset({"b"}), TP("t", 2): frozenset({"b"})}
    for first, second in (("a", "b"), ("b", "a")):
        members = {"m1": racked("m1", ["t"], first), "m2": racked("m2", ["t"], second)}
        on_a = "m1" if first == "a" else "m2"
        on_b = "m2" if on_a == "m1" else "m1"
        for cls in RACK_AWARE:
            result = cls().assign(counts, members, partition_racks=racks)
            assert result[on_a] == [TP("t", 0), TP("t", 3)], cls
            assert result[on_b] == [TP("t", 1), TP("t", 2)], cls
    # Replicas on every rack, or members without racks: nothing to gain, plain result.
    members = {"m1": racked("m1", ["t"], "b"), "m2": racked("m2", ["t"], "a")}
    everywhere = {TP("t", p): frozenset({"a", "b"}) for p in range(4)}
    no_racks = {"m1": racked("m1", ["t"], None), "m2": racked("m2", ["t"], None)}
    for cls in RACK_AWARE:
        assert cls().assign(counts, members, partition_racks=everywhere) == cls().assign(
            counts, members
        )
        assert cls().assign(counts, no_racks, partition_racks=racks) == cls().assign(
            counts, no_racks
        )


def test_range_keeps_co_partitioned_topics_together_with_racks() -> None:
    counts = {"x": 2, "y": 2}
    members = {"m1": racked("m1", ["x", "y"], "b"), "m2": racked("m2", ["x", "y"], "a")}
    local = {TP(t, 0): frozenset({"a"}) for t in "xy"} | {TP(t, 1): frozenset({"b"}) for t in "xy"}
    result = RangeAssignor().assign(counts, members, partition_racks=local)
    assert result == {"m1": [TP("x", 1), TP("y", 1)], "m2": [TP("x", 0), TP("y", 0)]}
    # Partition 0 is on rack a for x but rack b for y: local for nobody in both topics,
    # so the co-partitioned pair still goes to one member.
    split = dict(local) | {TP("y", 0): frozenset({"b"}), TP("y", 1): frozenset({"a"})}
    result = RangeAssignor().assign(counts, members, partition_racks=split)
    for parts in result.values():
        assert {tp.partition for tp in parts} in ({0}, {1})
