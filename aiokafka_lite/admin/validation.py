"""Checks of the admin calls' arguments: each raises `ConfigurationError` naming the
argument before anything is sent, and returns the value in the form requests take."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka_lite import errors
from aiokafka_lite.admin.types import OffsetSpec
from aiokafka_lite.structs import TopicPartition

__all__ = [
    "check_name",
    "check_non_negative_int",
    "check_timeout",
    "check_tp",
    "config_value",
    "isolation_code",
    "offset_spec",
    "unique_names",
]


def config_value(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    raise errors.ConfigurationError(f"config value {value!r} must be a str, number or bool")


def check_timeout(timeout_ms: int | None) -> None:
    if timeout_ms is not None and (
        not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0
    ):
        raise errors.ConfigurationError(f"timeout_ms must be a positive int, got {timeout_ms!r}")


def check_non_negative_int(kind: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise errors.ConfigurationError(f"{kind} must be an int >= 0, got {value!r}")
    return value


def check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise errors.ConfigurationError(f"{kind} must be a non-empty str, got {name!r}")
    return name


def check_tp(tp: object) -> TopicPartition:
    if (
        not isinstance(tp, tuple)
        or len(tp) != 2
        or not isinstance(tp[0], str)
        or not tp[0]
        or not isinstance(tp[1], int)
        or tp[1] < 0
    ):
        raise errors.ConfigurationError(f"expected a TopicPartition(topic, partition), got {tp!r}")
    return TopicPartition(tp[0], tp[1])


def unique_names(kind: str, names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        check_name(kind, name)
        if name in seen:
            raise errors.ConfigurationError(f"{kind} {name!r} is given more than once")
        seen[name] = None
    return list(seen)


def isolation_code(level: str) -> int:
    if level == "read_uncommitted":
        return 0
    if level == "read_committed":
        return 1
    raise errors.ConfigurationError(
        f"isolation_level must be 'read_uncommitted' or 'read_committed', got {level!r}"
    )


def offset_spec(spec: object) -> OffsetSpec:
    if isinstance(spec, OffsetSpec):
        return spec
    if spec == "earliest":
        return OffsetSpec.earliest()
    if spec == "latest":
        return OffsetSpec.latest()
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return OffsetSpec.for_timestamp(spec)
    raise errors.ConfigurationError(
        f"offset spec must be OffsetSpec, 'earliest', 'latest' or a timestamp >= 0, got {spec!r}"
    )
