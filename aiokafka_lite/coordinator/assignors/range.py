"""aiokafka's ``RangePartitionAssignor``: this library's range assignor."""

from __future__ import annotations

from aiokafka_lite.consumer.assignors import RangeAssignor

#: aiokafka's name for :class:`~aiokafka_lite.consumer.assignors.RangeAssignor`.
RangePartitionAssignor = RangeAssignor

__all__ = ["RangePartitionAssignor"]
