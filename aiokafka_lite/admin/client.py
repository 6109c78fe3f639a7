"""`AdminClient`: one public class, composed of one part per area it manages; and
`AIOKafkaAdminClient`, the same client answering in aiokafka's shapes.

Each area is a mixin in its own module, on the shared `AdminBase` (constructor,
lifecycle, the deadline of a call); they share no state beyond it. Mixins rather than
a facade over per-area objects, so every call stays a method of `AdminClient` with
its own signature and docstring, written once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite.admin import responses
from aiokafka_lite.admin.acls import AclsAdmin
from aiokafka_lite.admin.configs import ConfigsAdmin
from aiokafka_lite.admin.groups import GroupsAdmin
from aiokafka_lite.admin.log_dirs import LogDirsAdmin
from aiokafka_lite.admin.records import RecordsAdmin
from aiokafka_lite.admin.scram import ScramAdmin
from aiokafka_lite.admin.topics import TopicsAdmin
from aiokafka_lite.admin.transactions import TransactionsAdmin
from aiokafka_lite.admin.types import (
    ConfigResource,
    NewPartitions,
    NewTopic,
    RecordsToDelete,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = ["AIOKafkaAdminClient", "AdminClient"]


class AdminClient(
    TopicsAdmin,
    ConfigsAdmin,
    GroupsAdmin,
    RecordsAdmin,
    AclsAdmin,
    ScramAdmin,
    TransactionsAdmin,
    LogDirsAdmin,
):
    """Manage a cluster: topics, configs, groups, offsets, records, ACLs, users, transactions.

    Use it as ``async with AdminClient("localhost:9092") as admin: ...`` or call
    `start` and `close`. Security is given either as a ready `SecurityConfig`
    (``security=``) or with aiokafka's keyword arguments (``security_protocol``,
    ``ssl_context``, ``sasl_mechanism``, ...). ``loop``, ``api_version``,
    ``connections_max_idle_ms`` and the ``sasl_kerberos_*`` names are accepted for
    compatibility with aiokafka and otherwise unused (versions are negotiated per
    connection; Kerberos is not supported).
    """


class AIOKafkaAdminClient(AdminClient):
    """aiokafka's admin client: `AdminClient`, its answers in aiokafka's shapes.

    The methods aiokafka has return what aiokafka's return: decoded-response objects
    (``create_topics``, ``delete_topics``, ``create_partitions``, ``describe_configs``,
    ``alter_configs``, ``describe_consumer_groups``; see
    :mod:`aiokafka_lite.admin.responses`), lists of dicts (``describe_topics``), a dict
    (``describe_cluster``), ``(group_id, protocol_type)`` tuples
    (``list_consumer_groups``), ``{TopicPartition: low_watermark}`` (``delete_records``).
    Calls that raise in aiokafka on a failed item raise here too (``create_partitions``,
    ``delete_records``, ``list_consumer_groups``); per-item errors of the others are in
    the answer's ``error_code`` fields. The methods aiokafka lacks
    (``incremental_alter_configs``, ``list_offsets``, ...) answer as `AdminClient`'s.
    """

    def __init__(self, *, bootstrap_servers: str | list[str] = "localhost", **kwargs: Any) -> None:
        super().__init__(bootstrap_servers, **kwargs)

    async def create_topics(  # type: ignore[override]
        self,
        new_topics: Iterable[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> responses.CreateTopicsResponse_v3:
        results = await AdminClient.create_topics(self, new_topics, timeout_ms, validate_only)
        return responses.CreateTopicsResponse_v3(
            0,
            [
                responses.TopicError(
                    name, responses.error_code(r.error), responses.error_message(r.error)
                )
                for name, r in results.items()
            ],
        )

    async def delete_topics(  # type: ignore[override]
        self, topics: Iterable[str], timeout_ms: int | None = None
    ) -> responses.DeleteTopicsResponse_v3:
        results = await AdminClient.delete_topics(self, topics, timeout_ms)
        return responses.DeleteTopicsResponse_v3(
            0,
            [
                responses.TopicErrorCode(name, responses.error_code(r.error))
                for name, r in results.items()
            ],
        )

    async def create_partitions(  # type: ignore[override]
        self,
        topic_partitions: Mapping[str, NewPartitions | int],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> responses.CreatePartitionsResponse_v1:
        results = await AdminClient.create_partitions(
            self, topic_partitions, timeout_ms, validate_only
        )
        results.raise_for_errors()
        return responses.CreatePartitionsResponse_v1(
            0, [responses.TopicError(name, 0, None) for name in results]
        )

    async def list_topics(  # type: ignore[override,unused-ignore]
        self, include_internal: bool = True, timeout_ms: int | None = None
    ) -> list[str]:
        """Every topic's name, internal topics included (as aiokafka)."""
        return await AdminClient.list_topics(self, include_internal, timeout_ms)

    async def describe_topics(  # type: ignore[override]
        self, topics: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> list[dict[str, Any]]:
        results = await AdminClient.describe_topics(self, topics, timeout_ms)
        return responses.topic_dicts(results.values())

    async def describe_cluster(  # type: ignore[override]
        self, timeout_ms: int | None = None
    ) -> dict[str, Any]:
        return responses.cluster_dict(await AdminClient.describe_cluster(self, timeout_ms))

    async def describe_configs(  # type: ignore[override]
        self,
        config_resources: Iterable[ConfigResource],
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> list[responses.DescribeConfigsResponse_v2]:
        resources = list(config_resources)
        results = await AdminClient.describe_configs(
            self, resources, include_synonyms, include_documentation, timeout_ms
        )
        return responses.describe_configs_responses(resources, results)

    async def alter_configs(  # type: ignore[override]
        self,
        config_resources: Iterable[ConfigResource],
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> list[responses.AlterConfigsResponse_v1]:
        resources = list(config_resources)
        results = await AdminClient.alter_configs(self, resources, validate_only, timeout_ms)
        return responses.alter_configs_responses(resources, results)

    async def list_consumer_groups(  # type: ignore[override]
        self,
        broker_ids: Iterable[int] | None = None,
        states: Iterable[str] | None = None,
        timeout_ms: int | None = None,
    ) -> list[tuple[str, str]]:
        listed = await AdminClient.list_consumer_groups(self, broker_ids, states, timeout_ms)
        return [(g.group_id, g.protocol_type) for g in listed]

    async def describe_consumer_groups(  # type: ignore[override]
        self,
        group_ids: Iterable[str],
        group_coordinator_id: int | None = None,
        include_authorized_operations: bool = False,
        timeout_ms: int | None = None,
    ) -> list[responses.DescribeGroupsResponse_v2 | responses.DescribeGroupsResponse_v3]:
        results = await AdminClient.describe_consumer_groups(
            self, group_ids, group_coordinator_id, include_authorized_operations, timeout_ms
        )
        return responses.describe_groups_responses(results.values(), include_authorized_operations)

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        group_coordinator_id: int | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets; a partition asked for by name that has none is
        given offset -1, as aiokafka does."""
        wanted = None if partitions is None else list(partitions)
        found = await AdminClient.list_consumer_group_offsets(
            self,
            group_id,
            group_coordinator_id,
            wanted,
            require_stable=require_stable,
            timeout_ms=timeout_ms,
        )
        for tp in wanted or ():
            found.setdefault(tp, OffsetAndMetadata(-1, ""))
        return found

    async def delete_records(  # type: ignore[override]
        self,
        records_to_delete: Mapping[TopicPartition, RecordsToDelete | int],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        results = await AdminClient.delete_records(self, records_to_delete, timeout_ms)
        results.raise_for_errors()
        return {tp: r.low_watermark for tp, r in results.items()}
