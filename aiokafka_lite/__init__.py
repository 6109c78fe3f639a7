"""aiokafka_lite: a Kafka client for Python built for asyncio from the socket up."""

from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

__version__ = "0.1.0"

__all__ = ["OffsetAndMetadata", "TopicPartition", "__version__"]
