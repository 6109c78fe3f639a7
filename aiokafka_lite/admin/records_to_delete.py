"""aiokafka's ``aiokafka.admin.records_to_delete`` path: RecordsToDelete (defined in
:mod:`aiokafka_lite.admin.types`)."""

from __future__ import annotations

from aiokafka_lite.admin.types import RecordsToDelete

__all__ = ["RecordsToDelete"]
