"""A small local SparkSession for demos, tests and benchmarks, with the source registered."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from aiokafka_lite.spark.datasource import KafkaDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = ["local_session"]


def local_session(
    app_name: str = "aiokafka_lite",
    *,
    cores: int = 2,
    shuffle_partitions: int = 2,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A ``local[cores]`` SparkSession whose Python workers run this interpreter.

    Spark starts its Python workers with ``$PYSPARK_PYTHON`` (default: ``python3`` on
    the ``PATH``), which may be an interpreter without aiokafka_lite; unless the
    variable is set already, it is set to ``sys.executable`` here. The data source is
    registered on the session.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.dataSource.register(KafkaDataSource)
    log.info("local Spark %s session with %d core(s)", spark.version, cores)
    return spark
