"""What the fronts of a :class:`~aiokafka_lite.testing.SimulatedCluster` do with each
Kafka frame, without I/O: police requests against the leader map and the coordinator
placement, answer refused ones in the request's version, merge refused partitions into
the broker's answer, and rewrite Metadata, FindCoordinator and DescribeCluster.

The state (leader map, epochs, placements, which fronts run) lives in
:class:`~aiokafka_lite.testing.cluster.SimulatedCluster`, which implements the hooks of
:class:`_FrontLogic`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from aiokafka_lite.errors import DecodeError, UnsupportedVersionError
from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.testing._cluster_answers import coordinator_error, not_controller
from aiokafka_lite.testing.probe import _connect_host

logger = logging.getLogger("aiokafka_lite.testing")

#: ``"group"`` (consumer groups) or ``"transaction"`` (transactional ids).
CoordinatorKind = Literal["group", "transaction"]

_KEY_TYPES: Final[dict[int, CoordinatorKind]] = {0: "group", 1: "transaction"}

LEADER_NOT_AVAILABLE: Final = 5
NOT_LEADER_OR_FOLLOWER: Final = 6
COORDINATOR_LOAD_IN_PROGRESS: Final = 14
NOT_COORDINATOR: Final = 16
NOT_CONTROLLER: Final = 41
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75


_GROUP_APIS: Final = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    }
)
#: Requests only the controller answers (Kafka's brokers before KIP-590 forwarding, and
#: its controllers since, answer NOT_CONTROLLER elsewhere).
_CONTROLLER_APIS: Final = frozenset(
    {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS}
)
_TXN_APIS: Final = frozenset(
    {
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
    }
)


#: (min, max) version of each API whose frames the fronts read: what they can decode.
_READ_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    **{
        int(key): (api.request_spec(key).min_version, api.SUPPORTED_VERSIONS[key][1])
        for key in (
            ApiKey.PRODUCE,
            ApiKey.FETCH,
            ApiKey.LIST_OFFSETS,
            ApiKey.METADATA,
            ApiKey.FIND_COORDINATOR,
            ApiKey.DESCRIBE_CLUSTER,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            ApiKey.DELETE_RECORDS,
            *_CONTROLLER_APIS,
            *_GROUP_APIS,
            *_TXN_APIS,
        )
    },
}


@dataclass
class ClusterStats:
    """Counters of a :class:`SimulatedCluster` (a snapshot when read from ``stats``)."""

    #: Requests the fronts read, by API name.
    requests: dict[str, int] = field(default_factory=dict)
    #: Partition or request errors the fronts answered themselves, by Kafka error name.
    errors: dict[str, int] = field(default_factory=dict)
    #: Leader changes: :meth:`~SimulatedCluster.move_leader` and failovers.
    leader_moves: int = 0
    #: Coordinator changes: :meth:`~SimulatedCluster.move_coordinator` and failovers.
    coordinator_moves: int = 0
    #: Connections cut by :meth:`~SimulatedCluster.stop_broker` (and by
    #: :meth:`~SimulatedCluster.start_broker` ending a hang).
    connections_cut: int = 0
    connections_accepted: int = 0
    #: Requests a hung front read and never answered (:meth:`~SimulatedCluster.hang_broker`).
    requests_unanswered: int = 0


_ERROR_NAMES: Final = {
    LEADER_NOT_AVAILABLE: "LEADER_NOT_AVAILABLE",
    NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
    COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
    NOT_COORDINATOR: "NOT_COORDINATOR",
    NOT_CONTROLLER: "NOT_CONTROLLER",
    FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH",
    UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH",
}


@dataclass
class _Partition:
    replicas: list[int]
    leader: int
    epoch: int = 0


@dataclass
class _Placement:
    node: int
    #: Seconds of COORDINATOR_LOAD_IN_PROGRESS still to come, counted from the first
    #: request the new coordinator gets (so that a client slow to find it meets them too).
    load_for: float = 0.0
    loading_until: float = 0.0


@dataclass
class _Action:
    """What a front does with one request frame."""

    #: The response, when the front answers alone.
    local: bytes | None = None
    #: The frame to send to the broker (the request, possibly rewritten).
    forward: bytes | None = None
    #: Rewrites the broker's response frame (``None``: passed on unchanged).
    post: Callable[[bytes], bytes] | None = None
    #: Whether the broker answers (not for Produce with ``acks=0``).
    expect_response: bool = True


class _FrontLogic:
    """The frame handling of the fronts; the cluster supplies the state and the hooks."""

    host: str
    _node_ids: list[int]
    _controller: int
    _stats: ClusterStats
    _topic_names: dict[Any, str]
    _warned_many_brokers = False

    def _is_running(self, node: int) -> bool:
        raise NotImplementedError

    def _port(self, node: int) -> int:
        raise NotImplementedError

    def _partition(self, topic: str, index: int) -> _Partition:
        raise NotImplementedError

    def _placement(self, kind: CoordinatorKind, key: str) -> _Placement:
        raise NotImplementedError

    def _count_error(self, code: int, n: int = 1) -> None:
        name = _ERROR_NAMES.get(code, str(code))
        self._stats.errors[name] = self._stats.errors.get(name, 0) + n

    def _on_request(self, node: int, frame: bytes) -> _Action:
        header = api.peek_request_header(frame)
        key = header.api_key
        name = api.api_name(key)
        self._stats.requests[name] = self._stats.requests.get(name, 0) + 1
        if key == ApiKey.API_VERSIONS:
            return _Action(forward=frame, post=self._cap_api_versions(header))
        if key == ApiKey.METADATA:
            return _Action(forward=frame, post=self._rewrite_metadata(header))
        if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return self._offsets_for_leader_epoch(node, frame)
        if key == ApiKey.FIND_COORDINATOR:
            try:
                _, request = api.decode_request(frame)
            except (DecodeError, UnsupportedVersionError):
                return _Action(forward=frame)
            return _Action(forward=frame, post=self._rewrite_find_coordinator(header, request))
        if key == ApiKey.DESCRIBE_CLUSTER:
            return _Action(forward=frame, post=self._rewrite_describe_cluster(header))
        if key in _CONTROLLER_APIS and node == self._controller:
            return _Action(forward=frame)
        if key not in (
            ApiKey.PRODUCE,
            ApiKey.FETCH,
            ApiKey.LIST_OFFSETS,
            ApiKey.DELETE_RECORDS,
        ) and not (key in _GROUP_APIS or key in _TXN_APIS or key in _CONTROLLER_APIS):
            return _Action(forward=frame)
        try:
            _, body = api.decode_request(frame)
        except (DecodeError, UnsupportedVersionError):
            return _Action(forward=frame)
        if key == ApiKey.PRODUCE:
            return self._produce(node, header, frame, body)
        if key == ApiKey.FETCH:
            return self._fetch(node, header, body)
        if key == ApiKey.LIST_OFFSETS:
            return self._list_offsets(node, header, frame, body)
        if key == ApiKey.DELETE_RECORDS:
            return self._delete_records(node, header, body)
        if key in _CONTROLLER_APIS:
            self._count_error(NOT_CONTROLLER)
            return _Action(local=self._encode(header, not_controller(header, body, NOT_CONTROLLER)))
        return self._coordinated(node, header, frame, body)

    def _check_partition(self, node: int, topic: str, index: int, epoch: int = -1) -> int:
        """0 if ``node`` may serve ``topic``/``index`` at leader epoch ``epoch``, else the
        error code Kafka's broker would give."""
        p = self._partition(topic, index)
        code = 0
        if epoch >= 0 and epoch < p.epoch:
            code = FENCED_LEADER_EPOCH
        elif epoch > p.epoch:
            code = UNKNOWN_LEADER_EPOCH
        elif p.leader != node:
            code = NOT_LEADER_OR_FOLLOWER
        if code:
            self._count_error(code)
        return code

    def _split_by_leader(
        self,
        node: int,
        topics: list[dict[str, Any]],
        *,
        name: str = "name",
        parts: str = "partitions",
        index: str = "partition_index",
        epoch: str | None = None,
    ) -> tuple[list[tuple[str, int, int]], list[dict[str, Any]]]:
        """A request's ``topics`` split at ``node``: the (topic, partition, error code) of
        the partitions it may not answer for, and the topics with just those it may
        (their field names: ``name``, ``parts``, ``index``). With ``epoch``, the client's
        leader epoch in that field is checked, then cleared for the broker (ours)."""
        refused: list[tuple[str, int, int]] = []
        kept_topics: list[dict[str, Any]] = []
        for topic in topics:
            kept = []
            for part in topic[parts]:
                asked = -1 if epoch is None else part.get(epoch, -1)
                code = self._check_partition(node, topic[name], part[index], asked)
                if code:
                    refused.append((topic[name], part[index], code))
                else:
                    kept.append(part if epoch is None else {**part, epoch: -1})
            if kept:
                kept_topics.append({**topic, parts: kept})
        return refused, kept_topics

    def _current_leader(self, topic: str, index: int) -> dict[str, int]:
        p = self._partition(topic, index)
        return {"leader_id": p.leader, "leader_epoch": p.epoch}

    def _endpoints(self, nodes: Iterable[int]) -> list[dict[str, Any]]:
        return [
            {
                "node_id": n,
                "host": _connect_host(self.host),
                "port": self._port(n),
                "rack": None,
            }
            for n in sorted(set(nodes))
            if n >= 0 and self._is_running(n)
        ]

    # Produce: partitions the front leads go to the broker, the others get an error.

    def _produce(
        self, node: int, header: RequestHeader, frame: bytes, body: dict[str, Any]
    ) -> _Action:
        version = header.api_version
        refused, kept_topics = self._split_by_leader(
            node, body["topic_data"], parts="partition_data", index="index"
        )
        acks = body.get("acks", -1)
        if not refused:
            return _Action(forward=frame, expect_response=acks != 0)

        def errors() -> list[dict[str, Any]]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for t, i, code in refused:
                by_topic.setdefault(t, []).append(
                    {
                        "index": i,
                        "error_code": code,
                        "base_offset": -1,
                        "log_append_time_ms": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": None,
                        "current_leader": self._current_leader(t, i),
                    }
                )
            return [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()]

        def endpoints() -> list[dict[str, Any]]:
            return self._endpoints(self._partition(t, i).leader for t, i, _ in refused)

        if not kept_topics:
            if acks == 0:  # nothing to answer (Kafka would close the connection)
                return _Action(expect_response=False)
            response = {"responses": errors(), "throttle_time_ms": 0, "node_endpoints": endpoints()}
            return _Action(local=self._encode(header, response))
        forward = api.encode_request(
            header.api_key,
            version,
            header.correlation_id,
            header.client_id,
            {**body, "topic_data": kept_topics},
        )

        def merge(response_frame: bytes) -> bytes:
            _, response = api.decode_response(header.api_key, version, response_frame)
            response["responses"].extend(errors())
            if version >= 10:
                response["node_endpoints"] = endpoints()
            return self._encode(header, response)

        return _Action(forward=forward, post=merge, expect_response=acks != 0)

    # Fetch: always sessionless; partitions the front leads go to the broker.

    def _fetch(self, node: int, header: RequestHeader, body: dict[str, Any]) -> _Action:
        version = header.api_version
        refused: list[tuple[dict[str, Any], str, int, int]] = []
        kept_topics: list[dict[str, Any]] = []
        for topic in body["topics"]:
            name = topic.get("topic") or self._topic_names.get(topic.get("topic_id"))
            if name is None:  # a topic id never seen in Metadata: let the broker judge
                kept_topics.append(topic)
                continue
            kept = []
            for part in topic["partitions"]:
                code = self._check_partition(
                    node, name, part["partition"], part.get("current_leader_epoch", -1)
                )
                if code:
                    refused.append((topic, name, part["partition"], code))
                else:
                    kept.append({**part, "current_leader_epoch": -1})
            if kept:
                kept_topics.append({**topic, "partitions": kept})

        def errors() -> list[dict[str, Any]]:
            out: dict[int, dict[str, Any]] = {}
            for topic, name, index, code in refused:
                entry = out.setdefault(
                    id(topic),
                    {
                        "topic": name,
                        "topic_id": topic.get("topic_id"),
                        "partitions": [],
                    },
                )
                entry["partitions"].append(
                    {
                        "partition_index": index,
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "current_leader": self._current_leader(name, index),
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                )
            for entry in out.values():
                if entry["topic_id"] is None:
                    del entry["topic_id"]
            return list(out.values())

        def endpoints() -> list[dict[str, Any]]:
            return self._endpoints(self._partition(n, i).leader for _, n, i, _ in refused)

        if not kept_topics and refused:
            response = {
                "throttle_time_ms": 0,
                "error_code": 0,
                "session_id": 0,
                "responses": errors(),
                "node_endpoints": endpoints(),
            }
            return _Action(local=self._encode(header, response))
        request = {
            **body,
            "session_id": 0,
            "session_epoch": -1,
            "forgotten_topics_data": [],
            "topics": kept_topics,
        }
        if refused:
            request["max_wait_ms"] = 0
        forward = api.encode_request(
            header.api_key, version, header.correlation_id, header.client_id, request
        )
        if not refused:
            return _Action(forward=forward)

        def merge(response_frame: bytes) -> bytes:
            _, response = api.decode_response(header.api_key, version, response_frame)
            response["responses"].extend(errors())
            if version >= 16:
                response["node_endpoints"] = endpoints()
            return self._encode(header, response)

        return _Action(forward=forward, post=merge)

    # ListOffsets: small; always rewritten (the leader epoch in the answer is ours).

    def _list_offsets(
        self, node: int, header: RequestHeader, frame: bytes, body: dict[str, Any]
    ) -> _Action:
        version = header.api_version
        refused, kept_topics = self._split_by_leader(
            node, body["topics"], epoch="current_leader_epoch"
        )

        def errors() -> list[dict[str, Any]]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for t, i, code in refused:
                by_topic.setdefault(t, []).append(
                    {
                        "partition_index": i,
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
            return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

        if not kept_topics:
            response = {"throttle_time_ms": 0, "topics": errors()}
            return _Action(local=self._encode(header, response))
        forward = api.encode_request(
            header.api_key,
            version,
            header.correlation_id,
            header.client_id,
            {**body, "topics": kept_topics},
        )

        def merge(response_frame: bytes) -> bytes:
            _, response = api.decode_response(header.api_key, version, response_frame)
            for topic in response["topics"]:
                for part in topic["partitions"]:
                    if part.get("error_code") == 0 and "leader_epoch" in part:
                        part["leader_epoch"] = self._partition(
                            topic["name"], part["partition_index"]
                        ).epoch
            response["topics"].extend(errors())
            return self._encode(header, response)

        return _Action(forward=forward, post=merge)

    # DeleteRecords: partitions the front leads go to the broker, the others get an error.

    def _delete_records(self, node: int, header: RequestHeader, body: dict[str, Any]) -> _Action:
        version = header.api_version
        refused, kept_topics = self._split_by_leader(node, body["topics"])

        def errors() -> list[dict[str, Any]]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for t, i, code in refused:
                by_topic.setdefault(t, []).append(
                    {"partition_index": i, "low_watermark": -1, "error_code": code}
                )
            return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

        if not kept_topics:
            return _Action(local=self._encode(header, {"throttle_time_ms": 0, "topics": errors()}))
        forward = api.encode_request(
            header.api_key,
            version,
            header.correlation_id,
            header.client_id,
            {**body, "topics": kept_topics},
        )
        if not refused:
            return _Action(forward=forward)

        def merge(response_frame: bytes) -> bytes:
            _, response = api.decode_response(header.api_key, version, response_frame)
            response["topics"].extend(errors())
            return self._encode(header, response)

        return _Action(forward=forward, post=merge)

    # Group and transaction requests: only at their coordinator.

    def _coordinated(
        self, node: int, header: RequestHeader, frame: bytes, body: dict[str, Any]
    ) -> _Action:
        key = header.api_key
        if key in _GROUP_APIS:
            kind: CoordinatorKind = "group"
            if key == ApiKey.OFFSET_FETCH and "groups" in body and header.api_version >= 8:
                names = [g["group_id"] for g in body["groups"]]
            elif key == ApiKey.DESCRIBE_GROUPS:
                names = list(body["groups"])
            elif key == ApiKey.DELETE_GROUPS:
                names = list(body["groups_names"])
            else:
                names = [body["group_id"]]
        else:
            kind = "transaction"
            if key == ApiKey.INIT_PRODUCER_ID:
                if not body.get("transactional_id"):
                    return _Action(forward=frame)
                names = [body["transactional_id"]]
            elif key == ApiKey.ADD_PARTITIONS_TO_TXN and header.api_version >= 4:
                names = [t["transactional_id"] for t in body.get("transactions", [])]
            elif key == ApiKey.ADD_PARTITIONS_TO_TXN:
                names = [body["v3_and_below_transactional_id"]]
            else:
                names = [body["transactional_id"]]
        now = time.monotonic()
        codes = []
        for name in names:
            placement = self._placement(kind, name)
            if placement.node != node:
                codes.append(NOT_COORDINATOR)
                continue
            if placement.load_for > 0:
                placement.loading_until = now + placement.load_for
                placement.load_for = 0.0
            if placement.loading_until > now:
                codes.append(COORDINATOR_LOAD_IN_PROGRESS)
            else:
                codes.append(0)
        if not codes or not all(codes):
            return _Action(forward=frame)  # some key is coordinated here: the broker judges
        code = codes[0]
        self._count_error(code)
        return _Action(local=self._encode(header, coordinator_error(header, body, code)))

    # Responses the fronts rewrite.

    def _encode(self, header: RequestHeader, body: Mapping[str, Any]) -> bytes:
        return api.encode_response(header.api_key, header.api_version, header.correlation_id, body)

    def _cap_api_versions(self, header: RequestHeader) -> Callable[[bytes], bytes]:
        """The broker's API versions, but the APIs whose frames the fronts read only in
        the versions the protocol layer knows (an API none of whose versions it knows is
        left out): a client never sends a frame the fronts cannot police."""

        def rewrite(frame: bytes) -> bytes:
            _, body = api.decode_response(header.api_key, header.api_version, frame)
            if body.get("error_code"):
                return frame
            kept = []
            for entry in body["api_keys"]:
                known = _READ_VERSIONS.get(entry["api_key"])
                if known is not None:
                    lo = max(entry["min_version"], known[0])
                    hi = min(entry["max_version"], known[1])
                    if lo > hi:
                        continue
                    entry["min_version"], entry["max_version"] = lo, hi
                kept.append(entry)
            body["api_keys"] = kept
            return self._encode(header, body)

        return rewrite

    def _offsets_for_leader_epoch(self, node: int, frame: bytes) -> _Action:
        try:
            header, body = api.decode_request(frame)
        except (DecodeError, UnsupportedVersionError):
            return _Action(forward=frame)
        key = header.api_key
        version = header.api_version
        refused, kept_topics = self._split_by_leader(
            node, body["topics"], name="topic", index="partition", epoch="current_leader_epoch"
        )

        def encode(request: dict[str, Any]) -> bytes:
            return api.encode_request(
                key, version, header.correlation_id, header.client_id, request
            )

        def errors() -> list[dict[str, Any]]:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for t, i, code in refused:
                by_topic.setdefault(t, []).append(
                    {"error_code": code, "partition": i, "leader_epoch": -1, "end_offset": -1}
                )
            return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]

        correlation_id = header.correlation_id
        if not kept_topics:
            body = {"throttle_time_ms": 0, "topics": errors()}
            return _Action(local=api.encode_response(key, version, correlation_id, body))
        if not refused:
            return _Action(forward=encode({**body, "topics": kept_topics}))

        def merge(response_frame: bytes) -> bytes:
            _, response = api.decode_response(key, version, response_frame)
            response["topics"].extend(errors())
            return api.encode_response(key, version, correlation_id, response)

        return _Action(forward=encode({**body, "topics": kept_topics}), post=merge)

    def _rewrite_metadata(self, header: RequestHeader) -> Callable[[bytes], bytes]:
        def rewrite(frame: bytes) -> bytes:
            _, body = api.decode_response(header.api_key, header.api_version, frame)
            if len(body["brokers"]) > 1 and not self._warned_many_brokers:
                self._warned_many_brokers = True
                logger.warning(
                    "simulated cluster: the broker behind it is a cluster of %d; "
                    "the fronts stand for one broker",
                    len(body["brokers"]),
                )
            body["brokers"] = self._endpoints(self._node_ids)
            body["controller_id"] = self._controller
            for topic in body["topics"]:
                name = topic.get("name")
                topic_id = topic.get("topic_id")
                if name and topic_id is not None and topic_id.int:  # (noida-db: all zero)
                    self._topic_names[topic_id] = name
                if topic.get("error_code") or not name:
                    continue
                for part in topic["partitions"]:
                    p = self._partition(name, part["partition_index"])
                    live = [r for r in p.replicas if self._is_running(r)]
                    part["leader_id"] = p.leader
                    part["leader_epoch"] = p.epoch
                    part["replica_nodes"] = list(p.replicas)
                    part["isr_nodes"] = live
                    part["offline_replicas"] = [r for r in p.replicas if r not in live]
                    if p.leader < 0:
                        part["error_code"] = LEADER_NOT_AVAILABLE
            return self._encode(header, body)

        return rewrite

    def _rewrite_find_coordinator(
        self, header: RequestHeader, request: Mapping[str, Any]
    ) -> Callable[[bytes], bytes]:
        kind = _KEY_TYPES.get(request.get("key_type", 0))
        keys = list(request.get("coordinator_keys") or [request.get("key", "")])

        def rewrite(frame: bytes) -> bytes:
            _, body = api.decode_response(header.api_key, header.api_version, frame)
            if kind is None:
                return frame
            entries = body.get("coordinators")
            if header.api_version >= 4 and entries is not None:
                for entry in entries:
                    if not entry.get("error_code"):
                        self._point(entry, self._placement(kind, entry["key"]).node)
            elif not body.get("error_code") and keys:
                self._point(body, self._placement(kind, keys[0]).node)
            return self._encode(header, body)

        return rewrite

    def _point(self, entry: dict[str, Any], node: int) -> None:
        entry["node_id"] = node
        entry["host"] = _connect_host(self.host)
        entry["port"] = self._port(node)

    def _rewrite_describe_cluster(self, header: RequestHeader) -> Callable[[bytes], bytes]:
        def rewrite(frame: bytes) -> bytes:
            _, body = api.decode_response(header.api_key, header.api_version, frame)
            body["brokers"] = [
                {"broker_id": e["node_id"], "host": e["host"], "port": e["port"], "rack": None}
                for e in self._endpoints(self._node_ids)
            ]
            body["controller_id"] = self._controller
            return self._encode(header, body)

        return rewrite
