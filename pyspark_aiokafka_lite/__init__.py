"""Spark's automatic discovery of the aiokafka_lite data source (``pyspark_*`` modules).

Spark imports every top-level module named ``pyspark_*`` and registers its
``DefaultSource``; see docs/spark.md. Importing it needs the ``spark`` extra.
"""

from aiokafka_lite.spark.datasource import KafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
