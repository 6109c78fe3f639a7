"""Consumer groups and their offsets: list, describe and delete groups, read, change
and delete their committed offsets, and measure their lag.

Every group request goes to the group's coordinator through
`routing.send_to_coordinator`, which finds it again while it moves or loads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error
from aiokafka_lite.admin.records import list_offsets_by_leader
from aiokafka_lite.admin.types import (
    LATEST,
    AdminResults,
    ConsumerGroupLag,
    GroupDescription,
    GroupListing,
    GroupResult,
    MemberDescription,
    MemberRemovalResult,
    PartitionResult,
)
from aiokafka_lite.admin.validation import check_name, check_tp, isolation_code, unique_names
from aiokafka_lite.client import COORDINATOR_GROUP
from aiokafka_lite.cluster import BrokerMetadata
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.protocol.bodies import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsDescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetFetchResponse,
)
from aiokafka_lite.protocol.group_protocol import decode_assignment, decode_subscription
from aiokafka_lite.protocol.offsets import (
    offset_commit_body,
    offset_fetch_body,
    partition_error_codes,
    read_offset_fetch,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import coordinator_lookup, coordinator_not_ready, send_to_coordinator
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["GroupsAdmin"]

log = logging.getLogger(__name__)

_CONSUMER_PROTOCOL = "consumer"
#: ListGroups answers of a broker whose groups are not all loaded yet: asked again.
_GROUPS_LOADING = frozenset(
    {errors.CoordinatorLoadInProgressError.errno, errors.CoordinatorNotAvailableError.errno}
)


class GroupsAdmin(AdminBase):
    """Consumer groups: listing, description, deletion, committed offsets and lag."""

    async def find_coordinator(
        self,
        group_id: str,
        coordinator_type: int = COORDINATOR_GROUP,
        timeout_ms: int | None = None,
    ) -> int:
        """Node id of the coordinator of a group (``coordinator_type`` 1: a transactional id)."""
        check_name("group id", group_id)
        if coordinator_type not in (0, 1):
            raise errors.ConfigurationError(
                f"coordinator_type must be 0 (group) or 1 (transaction), got {coordinator_type!r}"
            )

        async def body(deadline: Deadline) -> int:
            return await self._client.find_coordinator(
                group_id, coordinator_type, timeout_ms=deadline.remaining_ms()
            )

        return await self._run("find_coordinator", timeout_ms, body)

    async def _group_call(
        self,
        group_id: str,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        deadline: Deadline,
        error_of: Callable[[ResponseT], int],
        unsettled: Callable[[ResponseT], errors.KafkaError | None] | None = None,
    ) -> tuple[int, ResponseT]:
        """Send to the group's coordinator, re-finding it while it moves or loads.

        ``error_of`` reads the answer's group-level error code; ``unsettled``, when
        given, names an error in an answer without one that is worth asking again for.
        """

        def retry_on(response: ResponseT) -> errors.KafkaError | None:
            code = error_of(response)
            if code or unsettled is None:
                return coordinator_not_ready(code, f"group {group_id!r}")
            return unsettled(response)

        return await send_to_coordinator(
            self._client,
            api_key,
            body,
            deadline,
            find=coordinator_lookup(self._client, group_id),
            retry_on=retry_on,
        )

    async def list_consumer_groups(
        self,
        broker_ids: Iterable[int] | None = None,
        states: Iterable[str] | None = None,
        timeout_ms: int | None = None,
    ) -> list[GroupListing]:
        """Consumer groups (and offset-only groups) known to the brokers, by group id.

        ``states`` keeps groups in those states (``"Stable"``, ``"Empty"``, ...). Every
        broker of a fresh Metadata answer is asked (those of ``broker_ids`` when given: one
        not in it raises `BrokerNotAvailableError`); one still loading its groups, or
        whose connection fails (restarting), is asked again until the timeout.
        """
        wanted_states = None if states is None else {s.lower() for s in states}
        chosen = None if broker_ids is None else list(broker_ids)

        async def body(deadline: Deadline) -> list[GroupListing]:
            await self._refresh(deadline)  # brokers come and go: ask the ones there now
            brokers = self._client.cluster.brokers
            nodes = chosen if chosen is not None else sorted(brokers)
            for node in nodes:
                if node not in brokers:
                    raise errors.BrokerNotAvailableError(
                        f"no broker {node} in the cluster metadata, to list its groups"
                    )
            request: ListGroupsRequest = {
                "states_filter": sorted(wanted_states or ()),
                "types_filter": [],
            }
            responses = await asyncio.gather(
                *(
                    # A coordinator that just took over groups answers 14 or 15 until it
                    # has loaded them (Java's admin client asks again on both too).
                    self._send_to_node_loaded(
                        node,
                        bodies.LIST_GROUPS,
                        request,
                        deadline,
                        lambda r: r.get("error_code", 0),
                        _GROUPS_LOADING,
                        "listing groups",
                    )
                    for node in nodes
                )
            )
            found: dict[str, GroupListing] = {}
            for node, response in zip(nodes, responses, strict=True):
                code = response.get("error_code", 0)
                if code:
                    raise item_error(code, None, f"listing groups on node {node}")
                for g in response.get("groups", ()):
                    protocol_type = g.get("protocol_type", "")
                    if protocol_type not in (_CONSUMER_PROTOCOL, ""):
                        continue
                    state = g.get("group_state") or None
                    if wanted_states is not None and state and state.lower() not in wanted_states:
                        continue
                    found[g["group_id"]] = GroupListing(
                        g["group_id"], protocol_type, state, g.get("group_type") or None, node
                    )
            return [found[k] for k in sorted(found)]

        return await self._run("list_consumer_groups", timeout_ms, body)

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[str, GroupDescription]:
        """State, protocol, members and their assignments of each group.

        A group that does not exist gets `GroupIdNotFoundError` in its result.
        ``group_coordinator_id`` is accepted for aiokafka compatibility; each group's
        coordinator is always looked up.
        """
        groups = unique_names("group id", group_ids)

        async def one(group_id: str, deadline: Deadline) -> GroupDescription:
            request: DescribeGroupsRequest = {
                "groups": [group_id],
                "include_authorized_operations": include_authorized_operations,
            }

            def code_of(response: DescribeGroupsResponse) -> int:
                entries = response.get("groups", ())
                return int(entries[0]["error_code"]) if entries else 0

            try:
                node, response = await self._group_call(
                    group_id, bodies.DESCRIBE_GROUPS, request, deadline, code_of
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return GroupDescription(group_id, exc)
            entries = [g for g in response.get("groups", ()) if g.get("group_id") == group_id]
            if not entries:
                return GroupDescription(
                    group_id, errors.UnknownServerError(f"no result for group {group_id!r}")
                )
            return _group_description(entries[0], self._client.cluster.brokers.get(node))

        async def body(deadline: Deadline) -> AdminResults[str, GroupDescription]:
            described = await asyncio.gather(*(one(g, deadline) for g in groups))
            return AdminResults(zip(groups, described, strict=True))

        if not groups:
            return AdminResults()
        return await self._run("describe_consumer_groups", timeout_ms, body)

    async def delete_consumer_groups(
        self, group_ids: Iterable[str], timeout_ms: int | None = None
    ) -> AdminResults[str, GroupResult]:
        """Delete empty groups and their offsets; a group with members gets `NonEmptyGroupError`."""
        groups = unique_names("group id", group_ids)

        async def one(group_id: str, deadline: Deadline) -> GroupResult:
            def code_of(response: DeleteGroupsResponse) -> int:
                for r in response.get("results", ()):
                    if r.get("group_id") == group_id:
                        return int(r["error_code"])
                return 0

            request: DeleteGroupsRequest = {"groups_names": [group_id]}
            try:
                _node, response = await self._group_call(
                    group_id, bodies.DELETE_GROUPS, request, deadline, code_of
                )
            except errors.KafkaError as exc:
                if isinstance(exc, errors.UnsupportedVersionError):
                    raise
                return GroupResult(group_id, exc)
            code = code_of(response)
            return GroupResult(
                group_id, item_error(code, None, f"group {group_id!r}") if code else None
            )

        async def body(deadline: Deadline) -> AdminResults[str, GroupResult]:
            done = await asyncio.gather(*(one(g, deadline) for g in groups))
            return AdminResults(zip(groups, done, strict=True))

        if not groups:
            return AdminResults()
        return await self._run("delete_consumer_groups", timeout_ms, body)

    async def remove_members_from_consumer_group(
        self,
        group_id: str,
        group_instance_ids: Iterable[str] | None = None,
        reason: str | None = None,
        timeout_ms: int | None = None,
    ) -> AdminResults[str, MemberRemovalResult]:
        """Remove members from a group, as if they had left it (KIP-345).

        A static member (``group_instance_id``) does not leave when it stops, so its
        partitions wait for its session to time out; this removes it now. Name members by
        their ``group_instance_ids``, or give None to remove every current member (the
        group is described first; dynamic members by member id). Results are keyed by
        instance id (member id for dynamic members); one the group does not know gets
        `UnknownMemberIdError`. Needs LeaveGroup v3 (Kafka 2.4).
        """
        check_name("group id", group_id)
        named = (
            None
            if group_instance_ids is None
            else unique_names("group instance id", group_instance_ids)
        )
        if reason is not None and not isinstance(reason, str):
            raise errors.ConfigurationError(f"reason must be a str or None, got {reason!r}")

        async def body(deadline: Deadline) -> AdminResults[str, MemberRemovalResult]:
            version = await self._version(bodies.LEAVE_GROUP, deadline)
            if version is not None and version < 3:
                raise errors.UnsupportedVersionError(
                    "removing members needs LeaveGroup v3 (Kafka 2.4); the broker supports "
                    f"v{version}"
                )
            members: list[tuple[str, str | None]]  # (member id, instance id)
            if named is not None:
                members = [("", instance) for instance in named]
            else:
                described = (
                    await self.describe_consumer_groups(
                        [group_id], timeout_ms=deadline.remaining_ms()
                    )
                )[group_id]
                if described.error is not None:
                    raise described.error
                members = [
                    ("", m.group_instance_id) if m.group_instance_id else (m.member_id, None)
                    for m in described.members
                ]
            if not members:
                return AdminResults()
            request: LeaveGroupRequest = {
                "group_id": group_id,
                "members": [
                    {"member_id": member, "group_instance_id": instance, "reason": reason}
                    for member, instance in members
                ],
            }

            def code_of(response: LeaveGroupResponse) -> int:
                return int(response["error_code"])

            _node, response = await self._group_call(
                group_id, bodies.LEAVE_GROUP, request, deadline, code_of
            )
            if response["error_code"]:
                raise item_error(response["error_code"], None, f"group {group_id!r}")
            # Kafka answers each member with its instance id (static) or its member id.
            answered = {
                r["group_instance_id"] if r["group_instance_id"] is not None else r["member_id"]: r
                for r in response["members"]
            }
            results: AdminResults[str, MemberRemovalResult] = AdminResults()
            for member, instance in members:
                key = instance if instance is not None else member
                r = answered.get(key)
                if r is None:
                    error: errors.KafkaError | None = item_error(
                        -1, "the broker returned no result", f"member {key!r}"
                    )
                elif r["error_code"]:
                    error = item_error(r["error_code"], None, f"member {key!r}")
                else:
                    error = None
                results[key] = MemberRemovalResult(key, error)
            return results

        return await self._run("remove_members_from_consumer_group", timeout_ms, body)

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all, or of ``partitions``).

        ``group_coordinator_id`` is accepted for aiokafka compatibility; the coordinator
        is always looked up.

        Partitions without a committed offset are left out; a group that does not
        exist has no offsets (an empty dict), as Kafka reports it. A partition the
        broker answers with an error (``TopicAuthorizationFailedError``, say) raises that
        error, naming the group and the partition.
        """
        check_name("group id", group_id)
        wanted = None if partitions is None else [check_tp(tp) for tp in partitions]

        async def body(deadline: Deadline) -> dict[TopicPartition, OffsetAndMetadata]:
            return await self._fetch_offsets(group_id, wanted, require_stable, deadline)

        if wanted == []:
            return {}
        return await self._run("list_consumer_group_offsets", timeout_ms, body)

    async def _fetch_offsets(
        self,
        group_id: str,
        wanted: list[TopicPartition] | None,
        require_stable: bool,
        deadline: Deadline,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        request = offset_fetch_body(group_id, wanted, require_stable=require_stable)

        def code_of(response: OffsetFetchResponse) -> int:
            return int(read_offset_fetch(response)[0])

        def unsettled(response: OffsetFetchResponse) -> errors.KafkaError | None:
            # A retriable partition error: an offset a transaction has yet to settle.
            for tp, (code, _committed) in read_offset_fetch(response)[1].items():
                if code:
                    error = item_error(code, None, f"group {group_id!r} {tp}")
                    if error.retriable:
                        return error
            return None

        _node, response = await self._group_call(
            group_id, bodies.OFFSET_FETCH, request, deadline, code_of, unsettled
        )
        code, found = read_offset_fetch(response)
        if code == errors.GroupIdNotFoundError.errno:
            return {}
        if code:
            raise item_error(code, None, f"group {group_id!r}")
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, (pcode, committed) in found.items():
            if pcode:
                # Not "nothing committed": the broker refused this partition (an
                # authorization failure, say), so the caller hears it (aiokafka raises too).
                raise item_error(pcode, None, f"group {group_id!r} {tp}")
            if committed is not None:
                offsets[tp] = committed
        return dict(sorted(offsets.items()))

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, PartitionResult]:
        """Commit ``offsets`` for a group that has no active members.

        A group with active members rejects it (`UnknownMemberIdError` per partition).
        """
        check_name("group id", group_id)
        commits: dict[TopicPartition, OffsetAndMetadata] = {}
        for raw_tp, value in offsets.items():
            tp = check_tp(raw_tp)
            if isinstance(value, int) and not isinstance(value, bool):
                value = OffsetAndMetadata(value)
            if not isinstance(value, OffsetAndMetadata) or value.offset < 0:
                raise errors.ConfigurationError(
                    f"offset for {tp} must be an int >= 0 or OffsetAndMetadata, got {value!r}"
                )
            commits[tp] = value

        async def body(deadline: Deadline) -> AdminResults[TopicPartition, PartitionResult]:
            request = offset_commit_body(group_id, dict(sorted(commits.items())))

            def code_of(response: OffsetCommitResponse) -> int:
                # A coordinator problem shows on every partition alike.
                return next(iter(partition_error_codes(response).values()), 0)

            _node, response = await self._group_call(
                group_id, bodies.OFFSET_COMMIT, request, deadline, code_of
            )
            return _partition_results(commits, partition_error_codes(response), group_id)

        if not commits:
            return AdminResults()
        return await self._run("alter_consumer_group_offsets", timeout_ms, body)

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, PartitionResult]:
        """Delete the group's committed offsets of ``partitions``.

        A partition of a topic the group still subscribes to gets
        `GroupSubscribedToTopicError`; a missing group fails every partition with
        `GroupIdNotFoundError`.
        """
        check_name("group id", group_id)
        tps = list(dict.fromkeys(check_tp(tp) for tp in partitions))

        async def body(deadline: Deadline) -> AdminResults[TopicPartition, PartitionResult]:
            by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
            for tp in sorted(tps):
                by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
            request: OffsetDeleteRequest = {
                "group_id": group_id,
                "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
            }
            _node, response = await self._group_call(
                group_id,
                bodies.OFFSET_DELETE,
                request,
                deadline,
                lambda r: int(r.get("error_code", 0)),
            )
            code = int(response.get("error_code", 0))
            if code:
                error = item_error(code, None, f"group {group_id!r}")
                return AdminResults((tp, PartitionResult(tp, error)) for tp in tps)
            return _partition_results(tps, partition_error_codes(response), group_id)

        if not tps:
            return AdminResults()
        return await self._run("delete_consumer_group_offsets", timeout_ms, body)

    async def consumer_group_lag(
        self,
        group_id: str,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> AdminResults[TopicPartition, ConsumerGroupLag]:
        """Committed offset, end offset and lag of each partition the group consumes.

        Covers the partitions with a committed offset and those assigned to a member.
        The end offset is the ListOffsets ``latest`` answer (the last stable offset
        with ``read_committed``).
        """
        check_name("group id", group_id)
        isolation_code(isolation_level)

        async def body(deadline: Deadline) -> AdminResults[TopicPartition, ConsumerGroupLag]:
            committed = await self._fetch_offsets(group_id, None, False, deadline)
            owners: dict[TopicPartition, MemberDescription] = {}
            describe: DescribeGroupsRequest = {"groups": [group_id]}
            try:
                _node, response = await self._group_call(
                    group_id,
                    bodies.DESCRIBE_GROUPS,
                    describe,
                    deadline,
                    lambda r: int(r["groups"][0]["error_code"]) if r.get("groups") else 0,
                )
            except errors.UnsupportedVersionError:
                raise
            except errors.KafkaError as exc:
                log.debug("could not describe group %r for its lag: %s", group_id, exc)
            else:
                if response.get("groups"):
                    description = _group_description(response["groups"][0], None)
                    for member in description.members:
                        for tp in member.assignment:
                            owners[tp] = member
            tps = sorted(set(committed) | set(owners))
            ends = await list_offsets_by_leader(
                self._client, {tp: LATEST for tp in tps}, isolation_code(isolation_level), deadline
            )
            results: AdminResults[TopicPartition, ConsumerGroupLag] = AdminResults()
            for tp in tps:
                end = ends[tp]
                owner = owners.get(tp)
                om = committed.get(tp)
                results[tp] = ConsumerGroupLag(
                    tp,
                    end.error,
                    None if om is None else om.offset,
                    end.offset,
                    owner.member_id if owner else None,
                    owner.client_id if owner else None,
                    owner.client_host if owner else None,
                )
            return results

        return await self._run("consumer_group_lag", timeout_ms, body)


# --- request/response conversions ------------------------------------------------------


def _group_description(
    entry: DescribeGroupsDescribedGroup, coordinator: BrokerMetadata | None
) -> GroupDescription:
    group_id = entry["group_id"]
    code = entry.get("error_code", 0)
    if code:
        return GroupDescription(group_id, item_error(code, None, f"group {group_id!r}"))
    state = entry.get("group_state", "")
    members_raw = entry.get("members", ())
    if state == "Dead" and not members_raw:
        return GroupDescription(
            group_id, errors.GroupIdNotFoundError(f"group {group_id!r} does not exist")
        )
    protocol_type = entry.get("protocol_type", "")
    members = []
    for m in members_raw:
        assignment: tuple[TopicPartition, ...] = ()
        subscription: tuple[str, ...] = ()
        metadata = bytes(m.get("member_metadata") or b"")
        raw_assignment = bytes(m.get("member_assignment") or b"")
        if protocol_type == _CONSUMER_PROTOCOL:
            try:
                assignment = tuple(sorted(decode_assignment(raw_assignment).partitions))
            except errors.DecodeError as exc:
                log.debug("group %r member %s: bad assignment: %s", group_id, m["member_id"], exc)
            if metadata:
                try:
                    subscription = decode_subscription(metadata).topics
                except errors.DecodeError as exc:
                    log.debug(
                        "group %r member %s: bad subscription: %s", group_id, m["member_id"], exc
                    )
        members.append(
            MemberDescription(
                member_id=m["member_id"],
                client_id=m.get("client_id", ""),
                client_host=m.get("client_host", ""),
                group_instance_id=m.get("group_instance_id"),
                assignment=assignment,
                subscription=subscription,
                member_metadata=metadata,
                member_assignment=raw_assignment,
            )
        )
    operations = entry.get("authorized_operations", -(2**31))
    return GroupDescription(
        group_id,
        None,
        state=state,
        protocol_type=protocol_type,
        protocol=entry.get("protocol_data", ""),
        members=tuple(members),
        coordinator=coordinator,
        authorized_operations=None if operations == -(2**31) else operations,
    )


def _partition_results(
    wanted: Iterable[TopicPartition], codes: Mapping[TopicPartition, int], group_id: str
) -> AdminResults[TopicPartition, PartitionResult]:
    results: AdminResults[TopicPartition, PartitionResult] = AdminResults()
    for tp in wanted:
        code = codes.get(tp)
        if code is None:
            error: errors.KafkaError | None = errors.UnknownServerError(
                f"the broker returned no result for {tp}"
            )
        else:
            error = item_error(code, None, f"group {group_id!r} {tp}") if code else None
        results[tp] = PartitionResult(tp, error)
    return results
