"""The producer: awaitable sends, per-partition batching, idempotence and transactions."""

from aiokafka_lite.errors import (
    ProducerClosedError,
    SerializationError,
    TransactionAbortedError,
)
from aiokafka_lite.producer.accumulator import RecordFuture, RecordFutures
from aiokafka_lite.producer.batch import BatchBuilder, BatchRecordMetadata
from aiokafka_lite.producer.partitioner import (
    DefaultPartitioner,
    Murmur2Partitioner,
    Partitioner,
    RandomPartitioner,
    RoundRobinPartitioner,
    StickyPartitioner,
    murmur2,
    murmur2_partition,
)
from aiokafka_lite.producer.producer import AIOKafkaProducer, Producer, TransactionContext
from aiokafka_lite.producer.types import ProducerInterceptor, ProducerRecord, RecordMetadata

__all__ = [
    "AIOKafkaProducer",
    "BatchBuilder",
    "BatchRecordMetadata",
    "DefaultPartitioner",
    "Murmur2Partitioner",
    "Partitioner",
    "Producer",
    "ProducerClosedError",
    "ProducerInterceptor",
    "ProducerRecord",
    "RandomPartitioner",
    "RecordFuture",
    "RecordFutures",
    "RecordMetadata",
    "RoundRobinPartitioner",
    "SerializationError",
    "StickyPartitioner",
    "TransactionAbortedError",
    "TransactionContext",
    "murmur2",
    "murmur2_partition",
]
