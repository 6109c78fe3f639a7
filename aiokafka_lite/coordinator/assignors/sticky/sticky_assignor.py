"""aiokafka's ``StickyPartitionAssignor``: this library's sticky (eager) assignor."""

from __future__ import annotations

from aiokafka_lite.consumer.assignors import StickyAssignor

#: aiokafka's name for :class:`~aiokafka_lite.consumer.assignors.StickyAssignor`.
StickyPartitionAssignor = StickyAssignor

__all__ = ["StickyPartitionAssignor"]
