"""The typed message bodies (aiokafka_lite/protocol/bodies.py).

* mypy reports the mistakes in tests/typing/misspelt_fields.py, each where it is marked;
* the TypedDicts match the schemas: every field of every version is a key, under its
  name, and no key is anything else; a required key is in every version (responses: the
  decoder always sets it; requests: it has no default); the types follow the field types;
* each typed API key is its ApiKey and names that API's request and response;
* the committed module is what tools/gen_bodies.py writes (so neither can drift).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import types
import typing
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.protocol import api, bodies, messages

if sys.version_info >= (3, 11):
    from typing import NotRequired, Required, get_type_hints, is_typeddict
else:  # the bodies' TypedDicts are typing_extensions' there, which typing does not know
    from typing_extensions import NotRequired, Required, get_type_hints, is_typeddict
from aiokafka_lite.protocol.schema import Field, MessageSpec

ROOT = Path(__file__).resolve().parents[2]
TYPING_CASES = ROOT / "tests" / "typing" / "misspelt_fields.py"

_SCALARS: dict[str, object] = {
    "bool": bool,
    "int8": int,
    "int16": int,
    "uint16": int,
    "int32": int,
    "uint32": int,
    "int64": int,
    "float64": float,
    "string": str,
    "bytes": bytes,
    "records": bytes,
    "uuid": uuid.UUID,
}


# --- mypy catches the mistakes ------------------------------------------------------------


def _expected_errors() -> set[tuple[int, str]]:
    expected: set[tuple[int, str]] = set()
    for number, line in enumerate(TYPING_CASES.read_text().splitlines(), start=1):
        mark = re.search(r"# E: ([\w\- ]+)$", line)
        if mark:
            expected.update((number, code) for code in mark.group(1).split())
    return expected


def test_mypy_reports_the_misspelt_and_misplaced_fields(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    stdout, stderr, _status = mypy_api.run(
        [
            str(TYPING_CASES),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--show-error-codes",
            "--no-error-summary",
            "--no-pretty",
        ]
    )
    assert not stderr, stderr
    found: set[tuple[int, str]] = set()
    for line in stdout.splitlines():
        m = re.match(r"(.+?):(\d+): error: .*\[([\w-]+)\]$", line)
        if m is None:
            continue
        assert Path(m.group(1)).resolve() == TYPING_CASES, f"an error outside the cases: {line}"
        found.add((int(m.group(2)), m.group(3)))
    expected = _expected_errors()
    assert len(expected) >= 10
    assert found == expected, stdout


# --- the TypedDicts match the schemas ------------------------------------------------------


def _unwrap(hint: object) -> tuple[object, bool, bool]:
    """``NotRequired[list[X] | None]`` -> (X, is a sequence, may be None); a response's
    records, ``bytes | memoryview | None`` -> (memoryview, False, True); a request's records,
    ``bytes | tuple[...] | None`` -> (tuple, False, True)."""
    if typing.get_origin(hint) in (NotRequired, Required):
        (hint,) = typing.get_args(hint)
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(hint))
        if args == [bytes, memoryview]:
            return memoryview, False, nullable
        if len(args) == 2 and args[0] is bytes and typing.get_origin(args[1]) is tuple:
            return tuple, False, nullable
        (hint,) = args
    sequence = typing.get_origin(hint) in (list, Sequence)
    if sequence:
        (hint,) = typing.get_args(hint)
    return hint, sequence, nullable


def _structs(spec: MessageSpec) -> Iterator[tuple[type[Any], tuple[Field, ...], range]]:
    """Each TypedDict of a message with its fields and the versions it is in."""
    top = getattr(bodies, spec.name)
    pending: list[tuple[type[Any], tuple[Field, ...], range]] = [(top, spec.fields, spec.versions)]
    seen: set[tuple[type[Any], range]] = set()
    while pending:
        cls, fields, versions = pending.pop()
        if (cls, versions) in seen:
            continue
        seen.add((cls, versions))
        yield cls, fields, versions
        hints = get_type_hints(cls, include_extras=True)
        for f in fields:
            if f.is_struct and f.name in hints:
                inner, _, _ = _unwrap(hints[f.name])
                present = range(max(versions.start, f.versions.lo), versions.stop)
                if f.versions.hi is not None:
                    present = range(present.start, min(present.stop, f.versions.hi + 1))
                if present:
                    pending.append((inner, f.fields, present))  # type: ignore[arg-type]


SPECS = [spec for m in messages.MODULES for spec in (m.REQUEST, m.RESPONSE)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_typed_dicts_have_every_field_of_every_version(spec: MessageSpec) -> None:
    for cls, fields, versions in _structs(spec):
        assert is_typeddict(cls), cls
        hints = get_type_hints(cls, include_extras=True)
        keys = set(hints)
        required = set(cls.__required_keys__)
        assert required | set(cls.__optional_keys__) == keys
        named: set[str] = set()
        for version in versions:
            present = {f.name for f in fields if version in f.versions}
            assert present <= keys, f"{cls.__name__} v{version} lacks {present - keys}"
            assert required <= present, f"{cls.__name__} v{version}: {required - present}"
            named |= present
        assert keys == named, f"{cls.__name__} has keys of no version: {keys - named}"
        for f in fields:
            if f.name not in keys:
                continue
            inner, sequence, nullable = _unwrap(hints[f.name])
            where = f"{cls.__name__}.{f.name}"
            assert sequence == f.is_array, where
            if f.is_struct:
                assert is_typeddict(inner), where
            elif f.element == "records" and spec.kind == "response":
                # decoded as a view of the response frame (see schema._records_view)
                assert inner is memoryview, where
            elif f.element == "records":
                # bytes, or parts written one after the other (see schema's encoder)
                assert inner is tuple, where
            else:
                assert inner is _SCALARS[f.element], where
            if any(v in f.nullable for v in versions) or f.type == "records":
                assert nullable, f"{where} is nullable"
            else:
                assert not nullable, f"{where} is never null"
            everywhere = all(v in f.versions for v in versions)
            if spec.kind == "response":
                # The decoder sets every field of the version it reads.
                assert (f.name in required) == everywhere, where
            else:
                # The encoder writes the default of a field left out.
                must = everywhere and not f.has_default and f.tag is None
                assert (f.name in required) == must, where


@pytest.mark.parametrize("module", messages.MODULES, ids=lambda m: m.NAME)
def test_typed_api_keys(module: types.ModuleType) -> None:
    key = api.ApiKey(module.API_KEY)
    typed = getattr(bodies, key.name)
    assert isinstance(typed, api.Api) and typed == key and int(typed) == module.API_KEY
    hint = get_type_hints(bodies, include_extras=True)[key.name]
    (inner,) = typing.get_args(hint)  # Final[...]
    request, response = typing.get_args(inner)
    assert request is getattr(bodies, module.REQUEST.name)
    assert response is getattr(bodies, module.RESPONSE.name)
    assert api.api_name(typed) == module.NAME


def test_bodies_are_the_plain_dicts_of_the_codecs() -> None:
    body: bodies.HeartbeatRequest = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    frame = api.encode_request(api.ApiKey.HEARTBEAT, 4, 7, "c", body)
    header, decoded = api.decode_request(frame)
    assert header.api_key == bodies.HEARTBEAT and type(decoded) is dict
    assert decoded == {**body, "group_instance_id": None}


# --- the committed module is the generator's ----------------------------------------------


def test_generated_module_is_up_to_date() -> None:
    if shutil.which("ruff", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("ruff (which formats the generated module) is not installed")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_bodies.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
