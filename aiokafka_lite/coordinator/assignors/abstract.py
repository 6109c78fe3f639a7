"""aiokafka's ``AbstractPartitionAssignor``: assignors written for it run here too
(:mod:`aiokafka_lite.consumer.assignor_adapter`)."""

from __future__ import annotations

from aiokafka_lite.consumer.assignor_adapter import AbstractPartitionAssignor

__all__ = ["AbstractPartitionAssignor"]
