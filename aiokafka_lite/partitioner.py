"""aiokafka's ``aiokafka.partitioner``: ``DefaultPartitioner`` and ``murmur2``.

``DefaultPartitioner`` is this library's default (murmur2 for keyed records, as aiokafka
and the Java client; keyless records use the uniform sticky strategy where aiokafka picks
a random partition per record). Instances are callable with aiokafka's
``(key, all_partitions, available_partitions)`` signature.
"""

from __future__ import annotations

from aiokafka_lite.producer.partitioner import DefaultPartitioner
from aiokafka_lite.producer.partitioner import murmur2 as _signed_murmur2

__all__ = ["DefaultPartitioner", "murmur2"]


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """aiokafka's ``murmur2``: Kafka's MurmurHash2 of ``data`` as an unsigned 32-bit
    int (:func:`aiokafka_lite.producer.murmur2` gives the same hash signed, as Java's
    ``Utils.murmur2``; ``& 0x7fffffff`` of either picks the same partition)."""
    return _signed_murmur2(data) & 0xFFFFFFFF
