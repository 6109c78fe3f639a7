"""The record the library hands to applications: ``ConsumerRecord``.

It is defined with the other shared value types in :mod:`aiokafka_lite.structs` (where
aiokafka keeps it too); the record codec builds it.
"""

from __future__ import annotations

from aiokafka_lite.structs import ConsumerRecord

__all__ = ["ConsumerRecord"]
