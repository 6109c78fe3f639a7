"""aiokafka's ``aiokafka.consumer.group_coordinator`` path, for the one name aiokafka
documents there: ``GroupCoordinator``, the consumer's group membership (its
``member_id``, ``generation`` and ``group_id`` read as aiokafka's do). It is defined in
:mod:`aiokafka_lite.consumer.coordinator`."""

from __future__ import annotations

from aiokafka_lite.consumer.coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]
