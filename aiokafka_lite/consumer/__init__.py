"""The consumer: fetching, consumer groups with cooperative rebalancing, offsets.

See ``docs/consumer.md`` for a guide.
"""

from aiokafka_lite.consumer._errors import (
    CommitFailedError,
    ConsumerStoppedError,
    LogTruncationError,
    NoOffsetForPartitionError,
    RecordDeserializationError,
)
from aiokafka_lite.consumer.assignors import (
    CooperativeStickyAssignor,
    GroupMember,
    PartitionAssignor,
    PartitionRacks,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
)
from aiokafka_lite.consumer.config import ConsumerConfig
from aiokafka_lite.consumer.consumer import AIOKafkaConsumer, Consumer, OffsetAndTimestamp
from aiokafka_lite.consumer.health import ConsumerHealth, PartitionHealth
from aiokafka_lite.consumer.membership import GroupState
from aiokafka_lite.consumer.subscription import ConsumerRebalanceListener
from aiokafka_lite.protocol.group_protocol import Assignment, Subscription
from aiokafka_lite.protocol.records import ConsumerRecord, TimestampType

__all__ = [
    "AIOKafkaConsumer",
    "Assignment",
    "CommitFailedError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerHealth",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "CooperativeStickyAssignor",
    "GroupMember",
    "GroupState",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "PartitionAssignor",
    "PartitionHealth",
    "PartitionRacks",
    "RangeAssignor",
    "RebalanceProtocol",
    "RecordDeserializationError",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TimestampType",
]
