"""The data source class Spark instantiates: ``format("aiokafka_lite")``."""

from __future__ import annotations

import logging

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from aiokafka_lite import errors
from aiokafka_lite.spark._compat import HAS_ADMISSION_CONTROL
from aiokafka_lite.spark.options import parse_read_options, parse_write_options
from aiokafka_lite.spark.reader import KafkaBatchReader, KafkaStreamReader
from aiokafka_lite.spark.schema import check_read_schema, check_write_schema, read_schema
from aiokafka_lite.spark.writer import KafkaBatchWriter, KafkaStreamWriter

log = logging.getLogger(__name__)

__all__ = ["FORMAT", "KafkaDataSource"]

#: The format name: ``spark.read.format(FORMAT)``.
FORMAT = "aiokafka_lite"


def _append_only(overwrite: bool, streaming: bool) -> None:
    if overwrite:
        raise errors.ConfigurationError(
            "aiokafka_lite data source: Kafka topics can only be appended to; use "
            + ('outputMode("append")' if streaming else 'mode("append")')
            + (" (complete/update output modes are not supported)" if streaming else "")
        )


class KafkaDataSource(DataSource):
    """Kafka topics as a Spark data source, with aiokafka_lite doing the I/O.

    Register it once per session with :func:`aiokafka_lite.spark.register`. See
    ``docs/spark.md`` for the options and the schema.
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # Called when a read is defined (load()), before Spark says whether it is a batch
        # or a streaming read: everything else is checked here already, the rest by
        # reader() / streamReader() when the query is planned.
        parsed = parse_read_options(dict(self.options), streaming=None)
        return read_schema(parsed.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(dict(self.options), streaming=False)
        check_read_schema(schema, opts.include_headers)
        return KafkaBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(dict(self.options), streaming=True)
        if opts.max_offsets_per_trigger is not None and not HAS_ADMISSION_CONTROL:
            raise errors.ConfigurationError(
                "aiokafka_lite data source: maxOffsetsPerTrigger needs Spark >= 4.2 "
                "(read limits for Python data sources)"
            )
        check_read_schema(schema, opts.include_headers)
        return KafkaStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite, streaming=False)
        opts = parse_write_options(dict(self.options), streaming=False)
        return KafkaBatchWriter(opts, check_write_schema(schema, opts.topic))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _append_only(overwrite, streaming=True)
        opts = parse_write_options(dict(self.options), streaming=True)
        writer: DataSourceStreamWriter = KafkaStreamWriter(
            opts, check_write_schema(schema, opts.topic)
        )
        return writer
