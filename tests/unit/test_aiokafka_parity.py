"""Every public module path and name of the installed aiokafka exists in aiokafka_lite.

Generated at test time from the installed aiokafka's sources
(:func:`aiokafka_lite.compat.aiokafka_public_names`), so a new aiokafka release shows its
new gaps here as failing tests: one test per module path, one per name, one per
argument of each public callable, one per public method of each public class. The
differences aiokafka_lite keeps on purpose are listed in ``KNOWN`` with their reason
(strict xfails: they fail once the difference is gone, and the list must shrink).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from aiokafka_lite import compat

aiokafka = pytest.importorskip("aiokafka")

#: Generated from the installed aiokafka: counted with the generated tests (docs/testing.md).
pytestmark = pytest.mark.generated

#: (aiokafka module, name, what) -> why aiokafka_lite differs.
KNOWN: dict[tuple[str, str, str], str] = {
    **{
        (module, "AIOKafkaClient", f"send({arg})"): "send() takes this library's (api_key, "
        "typed body), not aiokafka's protocol Request objects"
        for module in ("aiokafka", "aiokafka.client")
        for arg in ("request", "group")
    },
    **{
        (module, name, "metadata()"): "aiokafka's assignor classes are this library's "
        "assignors (their interface is PartitionAssignor's); assignors written against "
        "AbstractPartitionAssignor run through an adapter"
        for module, name in (
            ("aiokafka.coordinator.assignors.range", "RangePartitionAssignor"),
            ("aiokafka.coordinator.assignors.roundrobin", "RoundRobinPartitionAssignor"),
        )
    },
    **{
        ("aiokafka.coordinator.protocol", name, "SCHEMA()"): "aiokafka's protocol Struct "
        "schema; these are plain dataclasses here"
        for name in ("ConsumerProtocolMemberAssignment", "ConsumerProtocolMemberMetadata")
    },
}


def _public() -> dict[str, frozenset[str]]:
    return compat.aiokafka_public_names()


def _ours(module: str) -> ModuleType:
    return importlib.import_module(
        "aiokafka_lite" if module == "aiokafka" else compat.MODULES[module]
    )


def _cases() -> Iterator[tuple[str, str]]:
    for module, names in sorted(_public().items()):
        for name in sorted(names):
            yield module, name


def _signature(obj: Any) -> inspect.Signature | None:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _accepts(theirs: inspect.Signature, ours: inspect.Signature) -> list[str]:
    """aiokafka's argument names that ours does not take (by name)."""
    params = ours.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [
        p.name
        for p in theirs.parameters.values()
        if p.name not in ("self", "cls")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in params
    ]


def _argument_cases() -> Iterator[Any]:
    for module, name in _cases():
        if module in compat.DOCUMENTED_NAMES:
            continue  # internal classes aiokafka documents by name only
        theirs = getattr(importlib.import_module(module), name, None)
        if not callable(theirs) or (inspect.isclass(theirs) and issubclass(theirs, BaseException)):
            continue
        signature = _signature(theirs)
        if signature is None:
            continue
        for param in signature.parameters.values():
            if param.name in ("self", "cls") or param.kind in (
                param.VAR_POSITIONAL,
                param.VAR_KEYWORD,
            ):
                continue
            yield _param(module, name, f"({param.name})", param.name, None)
        if inspect.isclass(theirs):
            for member, value in vars(theirs).items():
                if member.startswith("_"):
                    continue
                yield _param(module, name, f"{member}()", None, member)
                method_sig = _signature(value) if callable(value) else None
                if method_sig is not None:
                    for param in method_sig.parameters.values():
                        if param.name in ("self", "cls") or param.kind in (
                            param.VAR_POSITIONAL,
                            param.VAR_KEYWORD,
                        ):
                            continue
                        yield _param(module, name, f"{member}({param.name})", param.name, member)


def _param(module: str, name: str, what: str, arg: str | None, member: str | None) -> Any:
    reason = KNOWN.get((module, name, what))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(module, name, arg, member, id=f"{module}.{name}{what}", marks=marks)


@pytest.mark.parametrize("module", sorted(_public()))
def test_module_path_exists(module: str) -> None:
    """``aiokafka.<path>`` has its aiokafka_lite module (what the alias maps it to)."""
    assert module in compat.MODULES, f"{module} is not mapped by aiokafka_lite.compat"
    _ours(module)


@pytest.mark.parametrize(("module", "name"), list(_cases()), ids=[f"{m}.{n}" for m, n in _cases()])
def test_public_name_exists(module: str, name: str) -> None:
    assert hasattr(_ours(module), name), f"aiokafka_lite has no {module}.{name}"


@pytest.mark.parametrize(("module", "name", "arg", "member"), list(_argument_cases()))
def test_callables_take_aiokafka_arguments(
    module: str, name: str, arg: str | None, member: str | None
) -> None:
    """Each public callable takes aiokafka's arguments by name, each public class has
    aiokafka's public methods, and those take aiokafka's arguments."""
    theirs: Any = getattr(importlib.import_module(module), name)
    ours: Any = getattr(_ours(module), name)
    if member is not None:
        assert hasattr(ours, member), f"{module}.{name} has no {member}"
        theirs, ours = getattr(theirs, member), getattr(ours, member)
    if arg is None:
        return
    their_sig, our_sig = _signature(theirs), _signature(ours)
    assert their_sig is not None
    assert our_sig is not None, f"cannot read the signature of {ours!r}"
    assert arg not in _accepts(their_sig, our_sig), f"{ours!r} takes no {arg!r}"


def _error_classes() -> dict[str, tuple[type[BaseException], type[BaseException]]]:
    theirs = importlib.import_module("aiokafka.errors")
    ours = importlib.import_module("aiokafka_lite.errors")
    pairs = {}
    for name in _public()["aiokafka.errors"]:
        a, b = getattr(theirs, name, None), getattr(ours, name, None)
        if inspect.isclass(a) and issubclass(a, BaseException) and inspect.isclass(b):
            pairs[name] = (a, b)
    return pairs


@pytest.mark.parametrize("name", sorted(_error_classes()))
def test_exception_hierarchy_matches(name: str) -> None:
    """Whatever catches an aiokafka error (its class or any of its aiokafka bases, or
    RuntimeError) catches ours; and ours is no KafkaError where aiokafka's is none."""
    pairs = _error_classes()
    theirs, ours = pairs[name]
    for base_name, (their_base, our_base) in pairs.items():
        if issubclass(theirs, their_base):
            assert issubclass(ours, our_base), f"{name} should derive from {base_name}"
    their_kafka, our_kafka = pairs["KafkaError"]
    assert issubclass(ours, our_kafka) == issubclass(theirs, their_kafka)
    assert issubclass(ours, RuntimeError) == issubclass(theirs, RuntimeError)


def test_error_codes_match() -> None:
    theirs = importlib.import_module("aiokafka.errors")
    ours = importlib.import_module("aiokafka_lite.errors")
    for code, cls in theirs.kafka_errors.items():
        assert ours.for_code(code).errno == cls.errno, code


def _struct_fields() -> Iterator[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    theirs = importlib.import_module("aiokafka.structs")
    ours = importlib.import_module("aiokafka_lite.structs")
    for name in ("TopicPartition", "OffsetAndMetadata", "RecordMetadata", "OffsetAndTimestamp"):
        yield name, getattr(theirs, name), getattr(ours, name)


@pytest.mark.parametrize(("name", "theirs", "ours"), list(_struct_fields()))
def test_struct_fields_start_with_aiokafkas(name: str, theirs: Any, ours: Any) -> None:
    """Named tuples: aiokafka's fields first, in order (unpacking and indexing work);
    aiokafka_lite may add fields after them, with defaults."""
    assert ours._fields[: len(theirs._fields)] == theirs._fields
    extra = ours._fields[len(theirs._fields) :]
    assert all(f in ours._field_defaults for f in extra), extra


def test_consumer_record_fields() -> None:
    import dataclasses

    theirs = [f.name for f in dataclasses.fields(aiokafka.structs.ConsumerRecord)]
    ours = [
        f.name for f in dataclasses.fields(importlib.import_module("aiokafka_lite").ConsumerRecord)
    ]
    assert ours[: len(theirs)] == theirs


def test_known_differences_are_all_tested() -> None:
    """Every entry of KNOWN names a generated case (a stale entry would hide nothing)."""
    ids = {p.id for p in _argument_cases()}
    for module, name, what in KNOWN:
        assert f"{module}.{name}{what}" in ids, (module, name, what)
