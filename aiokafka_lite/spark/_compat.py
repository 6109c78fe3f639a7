"""What differs between the Spark 4.x releases the data source runs on.

* ``pyspark.sql.streaming.datasource`` (read limits, ``Trigger.AvailableNow`` support
  for Python sources) exists from Spark 4.2; before it a stream reader's
  ``latestOffset()`` takes no arguments, and ``maxOffsetsPerTrigger`` cannot be honoured.
* ``DataSourceStreamArrowWriter`` (Arrow batches for streaming writes) exists from 4.1.
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass
from typing import TYPE_CHECKING

__all__ = [
    "HAS_ADMISSION_CONTROL",
    "HAS_STREAM_ARROW_WRITER",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
]

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_ADMISSION_CONTROL: bool
else:
    try:
        from pyspark.sql.streaming.datasource import (
            ReadAllAvailable,
            ReadLimit,
            ReadMaxRows,
            SupportsTriggerAvailableNow,
        )

        HAS_ADMISSION_CONTROL = True
    except ImportError:  # Spark < 4.2
        HAS_ADMISSION_CONTROL = False

        class ReadLimit:
            pass

        @dataclass
        class ReadAllAvailable(ReadLimit):
            pass

        @dataclass
        class ReadMaxRows(ReadLimit):
            max_rows: int

        class SupportsTriggerAvailableNow(ABC):  # noqa: B024 - a marker on old Spark
            pass


try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter  # noqa: F401

    HAS_STREAM_ARROW_WRITER = True
except ImportError:  # Spark < 4.1
    HAS_STREAM_ARROW_WRITER = False
