"""aiokafka's ``aiokafka.coordinator.protocol``: the member metadata and assignment
types its assignors exchange."""

from __future__ import annotations

from aiokafka_lite.consumer.assignor_adapter import (
    ConsumerProtocol,
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

__all__ = [
    "ConsumerProtocol",
    "ConsumerProtocolMemberAssignment",
    "ConsumerProtocolMemberMetadata",
]
