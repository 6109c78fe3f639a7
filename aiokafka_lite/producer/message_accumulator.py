"""aiokafka's ``aiokafka.producer.message_accumulator`` path, for the one name aiokafka
documents there: ``BatchBuilder``, what ``create_batch()`` returns. The accumulator
itself is :mod:`aiokafka_lite.producer.accumulator`."""

from __future__ import annotations

from aiokafka_lite.producer.batch import BatchBuilder

__all__ = ["BatchBuilder"]
