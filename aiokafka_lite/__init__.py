"""aiokafka_lite: a Kafka client for Python built for asyncio from the socket up.

The names most programs need are here, aiokafka's top-level names among them; every
public module path of aiokafka has its namesake here (``aiokafka_lite.structs``,
``aiokafka_lite.abc``, ``aiokafka_lite.admin.client``, ...). For code you cannot edit,
:mod:`aiokafka_lite.compat` makes ``import aiokafka`` itself resolve to aiokafka_lite.

They are loaded on first use (PEP 562), so ``import aiokafka_lite.errors`` (or a
producer-only program) does not load the consumer, the admin client or the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Each public name and the module it comes from.
_EXPORTS = {
    "AdminClient": "aiokafka_lite.admin",
    "AIOKafkaAdminClient": "aiokafka_lite.admin",
    "ConfigResource": "aiokafka_lite.admin",
    "ConfigResourceType": "aiokafka_lite.admin",
    "NewPartitions": "aiokafka_lite.admin",
    "NewTopic": "aiokafka_lite.admin",
    "OffsetSpec": "aiokafka_lite.admin",
    "RecordsToDelete": "aiokafka_lite.admin",
    "AIOKafkaClient": "aiokafka_lite.client",
    "AIOKafkaConsumer": "aiokafka_lite.consumer",
    "Consumer": "aiokafka_lite.consumer",
    "ConsumerRebalanceListener": "aiokafka_lite.consumer",
    "ConsumerRecord": "aiokafka_lite.structs",
    "ConsumerStoppedError": "aiokafka_lite.errors",
    "IllegalOperation": "aiokafka_lite.errors",
    "OffsetAndTimestamp": "aiokafka_lite.structs",
    "AIOKafkaProducer": "aiokafka_lite.producer",
    "DefaultPartitioner": "aiokafka_lite.producer",
    "Producer": "aiokafka_lite.producer",
    "ProducerInterceptor": "aiokafka_lite.producer",
    "ProducerRecord": "aiokafka_lite.producer",
    "RecordMetadata": "aiokafka_lite.producer",
    "RoundRobinPartitioner": "aiokafka_lite.producer",
    "murmur2": "aiokafka_lite.producer",
    "SecurityConfig": "aiokafka_lite.security",
    "create_ssl_context": "aiokafka_lite.security",
    "OffsetAndMetadata": "aiokafka_lite.structs",
    "TopicPartition": "aiokafka_lite.structs",
}


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("aiokafka_lite.errors")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aiokafka_lite' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "errors"})


if TYPE_CHECKING:
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
    from aiokafka_lite.client import AIOKafkaClient
    from aiokafka_lite.consumer import AIOKafkaConsumer, Consumer, ConsumerRebalanceListener
    from aiokafka_lite.errors import ConsumerStoppedError, IllegalOperation
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
    from aiokafka_lite.structs import (
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        TopicPartition,
    )


__all__ = [
    "AIOKafkaAdminClient",
    "AIOKafkaClient",
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "AdminClient",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "DefaultPartitioner",
    "IllegalOperation",
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
