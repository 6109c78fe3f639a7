"""aiokafka's ``RoundRobinPartitionAssignor``: this library's round-robin assignor."""

from __future__ import annotations

from aiokafka_lite.consumer.assignors import RoundRobinAssignor

#: aiokafka's name for :class:`~aiokafka_lite.consumer.assignors.RoundRobinAssignor`.
RoundRobinPartitionAssignor = RoundRobinAssignor

__all__ = ["RoundRobinPartitionAssignor"]
