"""A Spark (>= 4.0) Python data source for Kafka, with aiokafka_lite doing the I/O.

::

    from aiokafka_lite.spark import register

    register(spark)   # once per SparkSession
    df = (spark.read.format("aiokafka_lite")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Reads (batch and streaming) and writes (batch and streaming) need nothing beyond
``pip install aiokafka-lite[spark]`` on the driver and the workers: no JVM packages.
See ``docs/spark.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    import pyspark.sql.datasource  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aiokafka_lite.spark needs PySpark >= 4.0 and PyArrow: pip install 'aiokafka-lite[spark]'"
    ) from exc

from aiokafka_lite.spark.datasource import FORMAT, KafkaDataSource
from aiokafka_lite.spark.offsets import DataLossError
from aiokafka_lite.spark.options import (
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)
from aiokafka_lite.spark.session import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FORMAT",
    "DataLossError",
    "KafkaDataSource",
    "ReadOptions",
    "WriteOptions",
    "local_session",
    "parse_read_options",
    "parse_write_options",
    "register",
]


def register(spark: SparkSession) -> str:
    """Register the data source with ``spark``; returns the format name ``"aiokafka_lite"``.

    Call it once per session, before the first ``format("aiokafka_lite")``.
    """
    spark.dataSource.register(KafkaDataSource)
    return FORMAT
