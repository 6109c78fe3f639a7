"""aiokafka's ``aiokafka.admin.new_partitions`` path: NewPartitions (defined in
:mod:`aiokafka_lite.admin.types`)."""

from __future__ import annotations

from aiokafka_lite.admin.types import NewPartitions

__all__ = ["NewPartitions"]
