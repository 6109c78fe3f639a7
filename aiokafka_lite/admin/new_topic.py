"""aiokafka's ``aiokafka.admin.new_topic`` path: NewTopic (defined in
:mod:`aiokafka_lite.admin.types`)."""

from __future__ import annotations

from aiokafka_lite.admin.types import NewTopic

__all__ = ["NewTopic"]
