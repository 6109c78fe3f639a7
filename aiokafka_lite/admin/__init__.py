"""The admin client: topics, configs, groups, offsets, records, ACLs, users, transactions,
log directories.

`AdminClient` sits on one `KafkaClient` and turns each admin operation into the
requests Kafka defines for it, sent to the node that must answer them: the
controller for topic changes, the group coordinator for group operations, the
partition leader for offsets and record deletion, the broker itself for its
configuration and log directories, any broker for ACLs, the controller for SCRAM
credentials, each transaction coordinator for transactions.

Every call is bounded by a timeout (``timeout_ms``, default ``request_timeout_ms``)
and returns typed results. Calls about several items (topics, groups, partitions,
config resources) return an `AdminResults` mapping: one entry per item, each with
its own ``error`` (``None`` on success), so one bad item never hides the outcome
of the others. Routing errors (``NOT_CONTROLLER``, ``NOT_COORDINATOR``, a moved
leader, a coordinator still loading) are retried within the timeout; other errors
are reported as they come.

A broker that lacks an API answers with
:class:`~aiokafka_lite.errors.UnsupportedVersionError` naming the API.

The package: `types` and `security_types` (arguments and results), `client`
(`AdminClient`, composed of `topics`, `configs`, `groups`, `records`, `acls`, `scram`,
`transactions` and `log_dirs`, each on `base`), `validation` (argument checks). Every
name below is importable from ``aiokafka_lite.admin``.
"""

from aiokafka_lite.admin.client import AdminClient, AIOKafkaAdminClient
from aiokafka_lite.admin.security_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    CreateAclResult,
    DeleteAclsResult,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialsResult,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.admin.types import (
    AdminResults,
    AlterConfigOp,
    AlterConfigOpType,
    BrokerLogDirs,
    ClusterDescription,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConsumerGroupLag,
    CreatePartitionsResult,
    CreateTopicResult,
    DeleteRecordsResult,
    DeleteTopicResult,
    DescribeProducersResult,
    GroupDescription,
    GroupListing,
    GroupResult,
    ListOffsetsResult,
    LogDirDescription,
    MemberDescription,
    MemberRemovalResult,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    PartitionDescription,
    PartitionResult,
    ProducerState,
    RecordsToDelete,
    ReplicaInfo,
    ResourceResult,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)

__all__ = [
    "AIOKafkaAdminClient",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AdminResults",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerLogDirs",
    "ClusterDescription",
    "ConfigDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerGroupLag",
    "CreateAclResult",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteAclsResult",
    "DeleteRecordsResult",
    "DeleteTopicResult",
    "DescribeProducersResult",
    "GroupDescription",
    "GroupListing",
    "GroupResult",
    "ListOffsetsResult",
    "LogDirDescription",
    "MemberDescription",
    "MemberRemovalResult",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionDescription",
    "PartitionResult",
    "ProducerState",
    "RecordsToDelete",
    "ReplicaInfo",
    "ResourcePatternType",
    "ResourceResult",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "UserScramCredentialsResult",
]
