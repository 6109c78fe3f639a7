"""Topics, partitions and the cluster's brokers: the admin calls about what Metadata
describes, and the controller's topic changes (create, delete, add partitions)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, ControllerAnswers, item_error, request_metadata
from aiokafka_lite.admin.types import (
    AdminResults,
    ClusterDescription,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteTopicResult,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from aiokafka_lite.admin.validation import check_name, config_value, unique_names
from aiokafka_lite.cluster import BrokerMetadata, ClusterMetadata
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsCreatableReplicaAssignment,
    CreateTopicsCreatableTopic,
    CreateTopicsCreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsDeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    MetadataResponseTopic,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request_any_node

__all__ = ["TopicsAdmin"]

_ZERO_UUID = uuid.UUID(int=0)


class TopicsAdmin(AdminBase):
    """Create, delete, grow, list and describe topics; describe the cluster."""

    # --- topics ------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> AdminResults[str, CreateTopicResult]:
        """Create topics; ``validate_only`` checks the request without creating anything.

        Returns one result per topic; an existing topic gets `TopicAlreadyExistsError`
        and does not prevent the others from being created.
        """
        specs = list(new_topics)
        by_name: dict[str, NewTopic] = {}
        for spec in specs:
            if not isinstance(spec, NewTopic):
                raise errors.ConfigurationError(f"expected NewTopic, got {spec!r}")
            unique_names("topic", [*by_name, spec.name])
            _check_new_topic(spec)
            by_name[spec.name] = spec

        def build(names: list[str], deadline: Deadline) -> CreateTopicsRequest:
            return {
                "topics": [_creatable_topic(by_name[name]) for name in names],
                "timeout_ms": deadline.remaining_ms(),
                "validate_only": validate_only,
            }

        def parse(
            response: CreateTopicsResponse,
        ) -> ControllerAnswers[CreateTopicsCreatableTopicResult]:
            return {
                t["name"]: (t["error_code"], t.get("error_message"), t)
                for t in response.get("topics", ())
            }

        async def body(deadline: Deadline) -> AdminResults[str, CreateTopicResult]:
            outcome = await self._controller_rounds(
                bodies.CREATE_TOPICS, list(by_name), build, parse, deadline
            )
            results: AdminResults[str, CreateTopicResult] = AdminResults()
            for name in by_name:
                code, message, entry = outcome[name]
                if code or entry is None:  # (no entry: code is -1)
                    results[name] = CreateTopicResult(
                        name, item_error(code, message, f"topic {name!r}")
                    )
                    continue
                configs = {c["name"]: c.get("value") for c in entry.get("configs") or ()}
                results[name] = CreateTopicResult(
                    name,
                    None,
                    topic_id=_uuid_or_none(entry.get("topic_id")),
                    num_partitions=entry.get("num_partitions", -1),
                    replication_factor=entry.get("replication_factor", -1),
                    configs=configs,
                )
            return results

        if not by_name:
            return AdminResults()
        return await self._run("create_topics", timeout_ms, body)

    async def delete_topics(
        self, topics: Iterable[str], timeout_ms: int | None = None
    ) -> AdminResults[str, DeleteTopicResult]:
        """Delete topics; a missing one gets `UnknownTopicOrPartitionError`."""
        names = unique_names("topic", topics)

        def build(pending: list[str], deadline: Deadline) -> DeleteTopicsRequest:
            return {
                "topic_names": pending,
                # By name: a zero topic id is none.
                "topics": [{"name": name, "topic_id": _ZERO_UUID} for name in pending],
                "timeout_ms": deadline.remaining_ms(),
            }

        def parse(
            response: DeleteTopicsResponse,
        ) -> ControllerAnswers[DeleteTopicsDeletableTopicResult]:
            return {
                name: (t["error_code"], t.get("error_message"), t)
                for t in response.get("responses", ())
                if (name := t.get("name")) is not None
            }

        async def body(deadline: Deadline) -> AdminResults[str, DeleteTopicResult]:
            outcome = await self._controller_rounds(
                bodies.DELETE_TOPICS, names, build, parse, deadline
            )
            results: AdminResults[str, DeleteTopicResult] = AdminResults()
            for name in names:
                code, message, entry = outcome[name]
                error = item_error(code, message, f"topic {name!r}") if code else None
                topic_id = _uuid_or_none(entry.get("topic_id")) if entry is not None else None
                results[name] = DeleteTopicResult(name, error, topic_id)
            return results

        if not names:
            return AdminResults()
        return await self._run("delete_topics", timeout_ms, body)

    async def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions | int],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> AdminResults[str, CreatePartitionsResult]:
        """Grow topics to a new total partition count (``{"topic": NewPartitions(6)}``)."""
        wanted: dict[str, NewPartitions] = {}
        for name, spec in topic_partitions.items():
            check_name("topic", name)
            if isinstance(spec, int) and not isinstance(spec, bool):
                spec = NewPartitions(spec)
            if not isinstance(spec, NewPartitions):
                raise errors.ConfigurationError(
                    f"expected NewPartitions for {name!r}, got {spec!r}"
                )
            if not isinstance(spec.total_count, int) or spec.total_count < 1:
                raise errors.ConfigurationError(
                    f"total_count for {name!r} must be a positive int, got {spec.total_count!r}"
                )
            wanted[name] = spec

        def build(names: list[str], deadline: Deadline) -> CreatePartitionsRequest:
            topics: list[CreatePartitionsTopic] = []
            for name in names:
                spec = wanted[name]
                assignments: list[CreatePartitionsAssignment] | None = (
                    None
                    if spec.new_assignments is None
                    else [{"broker_ids": list(ids)} for ids in spec.new_assignments]
                )
                topics.append({"name": name, "count": spec.total_count, "assignments": assignments})
            return {
                "topics": topics,
                "timeout_ms": deadline.remaining_ms(),
                "validate_only": validate_only,
            }

        def parse(
            response: CreatePartitionsResponse,
        ) -> ControllerAnswers[CreatePartitionsTopicResult]:
            return {
                t["name"]: (t["error_code"], t.get("error_message"), t)
                for t in response.get("results", ())
            }

        async def body(deadline: Deadline) -> AdminResults[str, CreatePartitionsResult]:
            outcome = await self._controller_rounds(
                bodies.CREATE_PARTITIONS, list(wanted), build, parse, deadline
            )
            results: AdminResults[str, CreatePartitionsResult] = AdminResults()
            for name, spec in wanted.items():
                code, message, _entry = outcome[name]
                error = item_error(code, message, f"topic {name!r}") if code else None
                results[name] = CreatePartitionsResult(name, spec.total_count, error)
            return results

        if not wanted:
            return AdminResults()
        return await self._run("create_partitions", timeout_ms, body)

    async def list_topics(
        self, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """Names of the cluster's topics, sorted (internal topics only when asked)."""

        async def body(deadline: Deadline) -> list[str]:
            response = await request_metadata(self._client, None, deadline)
            return sorted(
                name
                for t in response.get("topics", ())
                if (name := t.get("name")) and (include_internal or not t.get("is_internal", False))
            )

        return await self._run("list_topics", timeout_ms, body)

    async def describe_topics(
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> AdminResults[str, TopicDescription]:
        """Partitions, leaders, replicas, ISR and topic id of each topic (all when None).

        A missing topic gets `UnknownTopicOrPartitionError` in its result.
        """
        names = None if topics is None else unique_names("topic", topics)

        async def body(deadline: Deadline) -> AdminResults[str, TopicDescription]:
            results: AdminResults[str, TopicDescription] = AdminResults()
            pending = names
            while True:
                response = await request_metadata(self._client, pending, deadline)
                by_name = {name: t for t in response.get("topics", ()) if (name := t.get("name"))}
                retry: list[str] = []
                for name in by_name if pending is None else pending:
                    entry = by_name.get(name)
                    if entry is None:
                        results[name] = TopicDescription(
                            name, errors.UnknownTopicOrPartitionError(f"topic {name!r}")
                        )
                        continue
                    # A topic being created has no leaders yet: ask again shortly.
                    if (
                        entry.get("error_code") == errors.LeaderNotAvailableError.errno
                        and deadline.remaining() > 2 * self._backoff
                    ):
                        retry.append(name)
                        continue
                    results[name] = _topic_description(name, entry)
                if not retry:
                    break
                pending = retry
                await self._pause(deadline, None)
            order = names if names is not None else sorted(results)
            return AdminResults((name, results[name]) for name in order)

        if names == []:
            return AdminResults()
        return await self._run("describe_topics", timeout_ms, body)

    # --- cluster -----------------------------------------------------------------

    async def describe_cluster(self, timeout_ms: int | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on older brokers)."""

        async def body(deadline: Deadline) -> ClusterDescription:
            if await self._version(bodies.DESCRIBE_CLUSTER, deadline) is not None:
                request: DescribeClusterRequest = {
                    "include_cluster_authorized_operations": False,
                    "endpoint_type": 1,
                }
                response = await request_any_node(
                    self._client, bodies.DESCRIBE_CLUSTER, request, deadline
                )
                code = response.get("error_code", 0)
                if code:
                    raise item_error(code, response.get("error_message"), "describe_cluster")
                brokers = tuple(
                    BrokerMetadata(b["broker_id"], b["host"], b["port"], b.get("rack"))
                    for b in response.get("brokers", ())
                )
                return ClusterDescription(
                    response.get("cluster_id"), response.get("controller_id", -1), brokers
                )
            metadata = await request_metadata(self._client, [], deadline)
            meta = ClusterMetadata.from_response(metadata, version=0)
            return ClusterDescription(
                meta.cluster_id, meta.controller_id, tuple(meta.brokers.values())
            )

        result = await self._run("describe_cluster", timeout_ms, body)
        return ClusterDescription(
            result.cluster_id,
            result.controller_id,
            tuple(sorted(result.brokers, key=lambda b: b.node_id)),
        )


# --- request/response conversions ------------------------------------------------------


def _check_new_topic(spec: NewTopic) -> None:
    for attr in ("num_partitions", "replication_factor"):
        value = getattr(spec, attr)
        if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and value != -1):
            raise errors.ConfigurationError(
                f"{attr} of topic {spec.name!r} must be a positive int or -1 (broker default), "
                f"got {value!r}"
            )
    if spec.replica_assignments is not None:
        if not isinstance(spec.replica_assignments, Mapping):
            raise errors.ConfigurationError(
                f"replica_assignments of {spec.name!r} must map partition -> broker ids"
            )
        if spec.num_partitions != -1 and spec.num_partitions != len(spec.replica_assignments):
            raise errors.ConfigurationError(
                f"topic {spec.name!r}: num_partitions disagrees with replica_assignments"
            )
    if spec.topic_configs is not None and not isinstance(spec.topic_configs, Mapping):
        raise errors.ConfigurationError(f"topic_configs of {spec.name!r} must be a mapping")


def _creatable_topic(spec: NewTopic) -> CreateTopicsCreatableTopic:
    assignments: list[CreateTopicsCreatableReplicaAssignment] = [
        {"partition_index": int(p), "broker_ids": [int(b) for b in brokers]}
        for p, brokers in sorted((spec.replica_assignments or {}).items())
    ]
    return {
        "name": spec.name,
        # With explicit assignments, Kafka wants both counts at -1.
        "num_partitions": -1 if assignments else spec.num_partitions,
        "replication_factor": -1 if assignments else spec.replication_factor,
        "assignments": assignments,
        "configs": [
            {"name": str(k), "value": config_value(v)}
            for k, v in (spec.topic_configs or {}).items()
        ],
    }


def _topic_description(name: str, entry: MetadataResponseTopic) -> TopicDescription:
    code = entry.get("error_code", 0)
    if code:
        return TopicDescription(name, item_error(code, None, f"topic {name!r}"))
    partitions = tuple(
        sorted(
            (
                PartitionDescription(
                    partition=p["partition_index"],
                    leader=p.get("leader_id", -1),
                    leader_epoch=p.get("leader_epoch", -1),
                    replicas=tuple(p.get("replica_nodes") or ()),
                    isr=tuple(p.get("isr_nodes") or ()),
                    offline_replicas=tuple(p.get("offline_replicas") or ()),
                    error=(
                        item_error(p["error_code"], None, f"{name}[{p['partition_index']}]")
                        if p.get("error_code")
                        else None
                    ),
                )
                for p in entry.get("partitions", ())
            ),
            key=lambda d: d.partition,
        )
    )
    return TopicDescription(
        name,
        None,
        topic_id=_uuid_or_none(entry.get("topic_id")),
        is_internal=bool(entry.get("is_internal", False)),
        partitions=partitions,
    )


def _uuid_or_none(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID) and value != _ZERO_UUID:
        return value
    return None
