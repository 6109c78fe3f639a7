"""The admin package keeps every import path admin.py had.

``NAMES`` is ``__all__`` of ``aiokafka_lite/admin.py`` as it was before it became the
package ``aiokafka_lite/admin/`` (commit dafd687); ``METHODS`` are the public members of
its ``AdminClient``; ``ADDED_NAMES`` and ``ADDED_METHODS`` came later (ACLs,
transactions and producers, log directories, SCRAM credentials).
No broker needed.
"""

from __future__ import annotations

import importlib

import pytest

import aiokafka_lite

NAMES = [
    "AIOKafkaAdminClient",
    "AdminClient",
    "AdminResults",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerGroupLag",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteRecordsResult",
    "DeleteTopicResult",
    "GroupDescription",
    "GroupListing",
    "GroupResult",
    "ListOffsetsResult",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionResult",
    "RecordsToDelete",
    "ResourceResult",
    "TopicDescription",
]

#: Names added to ``__all__`` since the package split.
ADDED_NAMES = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "BrokerLogDirs",
    "CreateAclResult",
    "DeleteAclsResult",
    "DescribeProducersResult",
    "LogDirDescription",
    "MemberRemovalResult",
    "ProducerState",
    "ReplicaInfo",
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "UserScramCredentialsResult",
]

ADDED_METHODS = [
    "alter_user_scram_credentials",
    "create_acls",
    "delete_acls",
    "describe_acls",
    "describe_log_dirs",
    "describe_producers",
    "describe_transactions",
    "describe_user_scram_credentials",
    "list_transactions",
    "remove_members_from_consumer_group",
]

METHODS = [
    "alter_configs",
    "alter_consumer_group_offsets",
    "client",
    "close",
    "consumer_group_lag",
    "create_partitions",
    "create_topics",
    "delete_consumer_group_offsets",
    "delete_consumer_groups",
    "delete_records",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "describe_consumer_groups",
    "describe_topics",
    "find_coordinator",
    "incremental_alter_configs",
    "list_consumer_group_offsets",
    "list_consumer_groups",
    "list_offsets",
    "list_topics",
    "start",
]

#: The admin names the package root re-exports.
ROOT_NAMES = [
    "AdminClient",
    "AIOKafkaAdminClient",
    "ConfigResource",
    "ConfigResourceType",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "RecordsToDelete",
]


@pytest.mark.parametrize("name", NAMES)
def test_every_former_name_imports_from_aiokafka_lite_admin(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from aiokafka_lite.admin import {name}", namespace)
    assert namespace[name] is not None


def test_admin_all_is_the_former_names_and_the_added_ones() -> None:
    admin = importlib.import_module("aiokafka_lite.admin")
    assert sorted(admin.__all__) == sorted(NAMES + ADDED_NAMES)


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_package_root_names_are_the_admin_ones(name: str) -> None:
    admin = importlib.import_module("aiokafka_lite.admin")
    assert getattr(aiokafka_lite, name) is getattr(admin, name)


def test_the_client_keeps_every_public_member_and_alias() -> None:
    from aiokafka_lite.admin import AdminClient, AIOKafkaAdminClient

    # aiokafka's name answers in aiokafka's shapes; it is still an AdminClient.
    assert issubclass(AIOKafkaAdminClient, AdminClient)
    public = sorted(name for name in dir(AdminClient) if not name.startswith("_"))
    assert public == sorted(METHODS + ADDED_METHODS)
