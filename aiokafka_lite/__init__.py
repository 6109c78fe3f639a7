"""aiokafka_lite: a Kafka client for Python built for asyncio from the socket up.

The names most programs need are here; ``import aiokafka_lite as aiokafka`` runs
typical aiokafka code (``AIOKafkaProducer``, ``AIOKafkaConsumer``,
``AIOKafkaAdminClient``, ``TopicPartition``, ``aiokafka.errors``) unchanged.
"""

__version__ = "0.1.0"

from aiokafka_lite import errors
from aiokafka_lite.admin import (
    AdminClient,
    AIOKafkaAdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    RecordsToDelete,
)
from aiokafka_lite.consumer import (
    AIOKafkaConsumer,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from aiokafka_lite.producer import (
    AIOKafkaProducer,
    DefaultPartitioner,
    Producer,
    ProducerInterceptor,
    ProducerRecord,
    RecordMetadata,
    RoundRobinPartitioner,
    murmur2,
)
from aiokafka_lite.security import SecurityConfig, create_ssl_context
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "AIOKafkaAdminClient",
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "AdminClient",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "DefaultPartitioner",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetSpec",
    "Producer",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "RecordsToDelete",
    "RoundRobinPartitioner",
    "SecurityConfig",
    "TopicPartition",
    "__version__",
    "create_ssl_context",
    "errors",
    "murmur2",
]
