"""The fixed schema of reads, the accepted schema of writes, and Arrow batch building."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aiokafka_lite import errors

__all__ = [
    "HEADERS_TYPE",
    "RecordBatchBuilder",
    "WriteColumns",
    "arrow_schema",
    "check_read_schema",
    "check_write_schema",
    "read_schema",
]

#: ``headers``: ``array<struct<key string, value binary>>``.
HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def read_schema(include_headers: bool) -> StructType:
    """The schema of every read: Spark's Kafka source's columns, in its order."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


_ARROW_HEADERS = pa.list_(
    pa.field(
        "element",
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
    )
)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for :func:`read_schema` (UTC microsecond timestamps)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _ARROW_HEADERS))
    return pa.schema(fields)


def _fail(message: str) -> errors.ConfigurationError:
    return errors.ConfigurationError(f"aiokafka_lite data source: {message}")


def check_read_schema(schema: StructType, include_headers: bool) -> None:
    """Refuse a user-given schema: the Kafka columns are fixed."""
    expected = read_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise _fail(
            "the schema of a Kafka read is fixed and cannot be set: "
            f"expected {expected.simpleString()}, got {schema.simpleString()}"
            + (" (headers need includeHeaders=true)" if "headers" in schema.names else "")
        )


class RecordBatchBuilder:
    """Collects records column by column and turns them into Arrow record batches.

    Headers are kept flat (every key, every value, and where each record's end) and
    become the list-of-structs column in one step: no per-header Python dict, which
    cost more than everything else a read does on records with headers.
    """

    __slots__ = (
        "_header_ends",
        "_header_keys",
        "_header_values",
        "_include_headers",
        "_keys",
        "_offsets",
        "_partition",
        "_schema",
        "_timestamp_types",
        "_timestamps",
        "_topic",
        "_values",
    )

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic = topic
        self._partition = partition
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._timestamp_types: list[int] = []
        self._header_keys: list[str] = []
        self._header_values: list[bytes | None] = []
        self._header_ends: list[int] = [0]

    def __len__(self) -> int:
        return len(self._offsets)

    def add_records(self, records: Sequence[Any]) -> int:
        """Append ``records`` (consumer records: ``key``, ``value``, ``offset``,
        ``timestamp``, ``timestamp_type``, ``headers``); returns their key and value
        bytes."""
        keys = [r.key for r in records]
        values = [r.value for r in records]
        self._keys += keys
        self._values += values
        self._offsets += [r.offset for r in records]
        self._timestamps += [r.timestamp for r in records]
        self._timestamp_types += [r.timestamp_type for r in records]
        if self._include_headers:
            headers = [r.headers for r in records]
            pairs = [pair for hs in headers for pair in hs]
            self._header_keys += [k for k, _ in pairs]
            self._header_values += [v for _, v in pairs]
            ends = accumulate(map(len, headers), initial=self._header_ends[-1])
            next(ends)  # the previous end, already there
            self._header_ends += ends
        return sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))

    def build(self) -> pa.RecordBatch:
        """The collected records as one batch; the builder starts empty again."""
        n = len(self._offsets)
        timestamps = pa.array(self._timestamps, pa.int64())
        micros = pc.multiply(timestamps, pa.scalar(1000, pa.int64()))
        arrays = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.repeat(pa.scalar(self._topic, pa.string()), n),
            pa.repeat(pa.scalar(self._partition, pa.int32()), n),
            pa.array(self._offsets, pa.int64()),
            micros.cast(pa.timestamp("us", tz="UTC")),
            pa.array(self._timestamp_types, pa.int32()),
        ]
        if self._include_headers:
            pairs = pa.StructArray.from_arrays(
                [
                    pa.array(self._header_keys, pa.string()),
                    pa.array(self._header_values, pa.binary()),
                ],
                fields=list(_ARROW_HEADERS.value_type),
            )
            arrays.append(
                pa.ListArray.from_arrays(
                    pa.array(self._header_ends, pa.int32()), pairs, type=_ARROW_HEADERS
                )
            )
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)


# --- writes -----------------------------------------------------------------------

_BYTES_TYPES = (BinaryType, StringType)


def _is_bytes_like(data_type: DataType) -> bool:
    return isinstance(data_type, _BYTES_TYPES)


class WriteColumns:
    """The columns a write uses, checked against the DataFrame's schema."""

    def __init__(
        self,
        value: str,
        key: str | None,
        topic: str | None,
        partition: str | None,
        headers: str | None,
    ) -> None:
        self.value = value
        self.key = key
        self.topic = topic
        self.partition = partition
        self.headers = headers

    def __repr__(self) -> str:
        return (
            f"WriteColumns(value={self.value!r}, key={self.key!r}, topic={self.topic!r}, "
            f"partition={self.partition!r}, headers={self.headers!r})"
        )


def check_write_schema(schema: StructType, topic_option: str | None) -> WriteColumns:
    """Check the columns of a DataFrame being written; other columns are ignored."""
    by_name = {f.name.lower(): f for f in schema.fields}
    value = by_name.get("value")
    if value is None:
        raise _fail(
            "writes need a 'value' column (string or binary); the DataFrame has "
            + (", ".join(schema.names) or "no columns")
        )
    if not _is_bytes_like(value.dataType):
        raise _fail(f"column 'value' must be string or binary, not {value.dataType.simpleString()}")
    key = by_name.get("key")
    if key is not None and not _is_bytes_like(key.dataType):
        raise _fail(f"column 'key' must be string or binary, not {key.dataType.simpleString()}")
    topic = by_name.get("topic")
    if topic is not None and not isinstance(topic.dataType, StringType):
        raise _fail(f"column 'topic' must be string, not {topic.dataType.simpleString()}")
    if topic is None and topic_option is None:
        raise _fail("writes need the topic option or a 'topic' column")
    partition = by_name.get("partition")
    if partition is not None and not isinstance(partition.dataType, IntegerType):
        raise _fail(f"column 'partition' must be int, not {partition.dataType.simpleString()}")
    headers = by_name.get("headers")
    if headers is not None:
        ok = (
            isinstance(headers.dataType, ArrayType)
            and isinstance(headers.dataType.elementType, StructType)
            and [f.name for f in headers.dataType.elementType.fields] == ["key", "value"]
            and isinstance(headers.dataType.elementType.fields[0].dataType, StringType)
            and _is_bytes_like(headers.dataType.elementType.fields[1].dataType)
        )
        if not ok:
            raise _fail(
                "column 'headers' must be array<struct<key:string,value:binary>>, not "
                + headers.dataType.simpleString()
            )
    return WriteColumns(
        value=value.name,
        key=key.name if key is not None else None,
        topic=None if topic_option is not None or topic is None else topic.name,
        partition=partition.name if partition is not None else None,
        headers=headers.name if headers is not None else None,
    )
