#!/usr/bin/env python3
"""Generate aiokafka_lite/protocol/bodies.py: a TypedDict per message body and struct.

Dev tool only: the generated module is committed; nothing imports this script at run
time (tests/unit/test_typed_bodies.py renders it again to check the committed copy).

    python tools/gen_bodies.py [--check]

It reads the project's own schemas (the `MessageSpec`s of
aiokafka_lite/protocol/messages/, which tools/gen_schemas.py writes), so it needs
nothing outside the repository. For every API it writes, children first:

* one ``TypedDict`` per nested struct, named ``<Api><Struct>`` from Kafka's struct
  name (``Fetch`` + ``PartitionData`` -> ``FetchPartitionData``), or Kafka's name
  alone when it already starts with the API's (``FetchTopic``, ``ListOffsetsPartition``);
* ``<Api>Request`` and ``<Api>Response``;
* ``<API_KEY_NAME>: Api[<Api>Request, <Api>Response]``, the typed API key.

Which keys are required:

* response: a field present at every version where its struct can appear (the decoder
  sets every field of the version it reads); one that exists only in some versions is
  ``NotRequired``, with its versions in a comment;
* request: a field present at every such version that Kafka gives no default and that
  is not a tagged field; every other one is ``NotRequired`` (the encoder writes the
  default for a missing key and ignores keys of other versions).

Types: ``int`` (int8..int64, uint16, uint32), ``bool``, ``float`` (float64), ``str``,
``bytes``, ``uuid.UUID``; records are ``bytes | tuple[bytes | bytearray | memoryview, ...]
| None`` in requests (a tuple's parts are written one after the other: a batch's header
and its records, not joined first) and ``bytes | memoryview | None`` in responses (the
decoder hands out a view of the response frame); ``X | None`` when the field is
nullable at some version, arrays as ``Sequence[X]`` in requests (any sequence encodes)
and ``list[X]`` in responses (what the decoder returns).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiokafka_lite.protocol import messages  # noqa: E402
from aiokafka_lite.protocol.api import ApiKey  # noqa: E402
from aiokafka_lite.protocol.schema import Field, MessageSpec, VersionRange  # noqa: E402

OUT = ROOT / "aiokafka_lite" / "protocol" / "bodies.py"

_SCALARS = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes",
    "uuid": "uuid.UUID",
}


def versions_in(vr: VersionRange, among: Iterable[int]) -> frozenset[int]:
    return frozenset(v for v in among if v in vr)


def range_text(versions: Iterable[int]) -> str:
    """``{4, 5, 6}`` -> ``"v4-6"``; ``{4, 6}`` -> ``"v4, v6"``."""
    vs = sorted(versions)
    parts: list[str] = []
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        parts.append(f"v{vs[i]}" if i == j else f"v{vs[i]}-{vs[j]}")
        i = j + 1
    return ", ".join(parts)


@dataclass
class Struct:
    """One TypedDict to write: a message body or one of its nested structs."""

    name: str
    fields: tuple[Field, ...]
    where: list[str]  # the paths it appears at, for its docstring
    versions: set[int] = field(default_factory=set)  # where it can appear


def struct_name(api: str, kafka_name: str) -> str:
    return kafka_name if kafka_name.startswith(api) else api + kafka_name


def collect(api: str, spec: MessageSpec) -> list[Struct]:
    """The message's structs, each after the structs it refers to; the body last."""
    top = f"{api}{spec.kind.capitalize()}"
    all_versions = frozenset(spec.versions)
    body = Struct(top, spec.fields, [top], set(all_versions))
    found: dict[str, Struct] = {}
    order: list[Struct] = []

    def visit(fields: Sequence[Field], parent_versions: frozenset[int], path: str) -> None:
        for f in fields:
            here = versions_in(f.versions, parent_versions)
            if not here or not f.is_struct:
                continue
            name = struct_name(api, f.element)
            sub_path = f"{path}.{f.name}{'[]' if f.is_array else ''}"
            st = found.get(name)
            if st is None:
                st = found[name] = Struct(name, f.fields, [])
                visit(f.fields, here, sub_path)
                order.append(st)
            elif st.fields != f.fields:
                raise ValueError(f"{top}: two structs named {f.element} differ")
            else:
                visit(f.fields, here, sub_path)
            st.where.append(sub_path)
            st.versions |= here

    visit(spec.fields, all_versions, top)
    return [*order, body]


def annotation(f: Field, kind: str, present: frozenset[int], api: str) -> str:
    base = struct_name(api, f.element) if f.is_struct else _SCALARS[f.element]
    if f.element == "records":
        parts = "tuple[bytes | bytearray | memoryview, ...]"
        base = "bytes | memoryview" if kind == "response" else f"bytes | {parts}"
    if f.is_array:
        base = f"{'Sequence' if kind == 'request' else 'list'}[{base}]"
    nullable = bool(versions_in(f.nullable, present)) or f.type == "records"
    return f"{base} | None" if nullable else base


def is_required(f: Field, kind: str, present: frozenset[int], parent: frozenset[int]) -> bool:
    if present != parent:
        return False
    if kind == "response":
        return True
    return not f.has_default and f.tag is None


def field_note(f: Field, present: frozenset[int], parent: frozenset[int]) -> str:
    notes: list[str] = []
    if present != parent:
        notes.append(range_text(present))
    tagged = versions_in(f.tagged, present) if f.tag is not None else frozenset()
    if tagged:
        notes.append(f"tag {f.tag}" + (f" in {range_text(tagged)}" if tagged != present else ""))
    nullable = versions_in(f.nullable, present)
    if nullable and nullable != present:
        notes.append(f"nullable in {range_text(nullable)}")
    return f"  # {'; '.join(notes)}" if notes else ""


def render_struct(st: Struct, kind: str, api: str, spec: MessageSpec) -> list[str]:
    parent = frozenset(st.versions)
    lines = [f"class {st.name}(TypedDict):"]
    if st.where == [st.name]:
        plural = "s" if len(parent) > 1 else ""
        lines.append(f'    """{spec.name} body, version{plural} {range_text(parent)[1:]}."""')
    else:
        paths = [f"``{w}``" for w in st.where]
        one_line = f'    """{", ".join(paths)}."""'
        if len(one_line) <= 100:
            lines.append(one_line)
        else:  # one path a line
            lines.append(f'    """{paths[0]},')
            lines.extend(f"    {p}," for p in paths[1:-1])
            lines.append(f'    {paths[-1]}."""')
    lines.append("")
    for f in st.fields:
        present = versions_in(f.versions, parent)
        if not present:
            continue
        ann = annotation(f, kind, present, api)
        if not is_required(f, kind, present, parent):
            ann = f"NotRequired[{ann}]"
        lines.append(f"    {f.name}: {ann}{field_note(f, present, parent)}")
    if lines[-1] == "":
        lines.pop()  # no fields: the docstring is the body
    return lines


def render() -> str:
    lines = [
        "# Long: generated, one TypedDict per body and struct of every API the client speaks.",
        '"""Typed message bodies: a ``TypedDict`` per request, response and nested struct.',
        "",
        "Generated by tools/gen_bodies.py from the schemas in",
        "aiokafka_lite/protocol/messages/; do not edit. At run time the bodies are the",
        "plain dicts the codecs read and write (no conversion); the types are for mypy.",
        "The typed API keys (``FETCH: Api[FetchRequest, FetchResponse]``) tie each API to",
        "its bodies for the senders (`BrokerConnection.send`, `KafkaClient.send`, routing).",
        "",
        "Request keys without a default in Kafka's schema that exist in every version",
        "are required; the others are ``NotRequired`` (the encoder writes the schema",
        "default for a missing key and skips keys of other versions). Response keys",
        "are required when every version has them. A comment gives the versions of",
        "a key that not every version has.",
        '"""',
        "",
        "import sys",
        "import uuid",
        "from collections.abc import Sequence",
        "from typing import Final",
        "",
        "from aiokafka_lite.protocol.api import Api, ApiKey",
        "",
        "if sys.version_info >= (3, 11):",
        "    from typing import NotRequired, TypedDict",
        "else:",
        "    from typing_extensions import NotRequired, TypedDict",
        "",
    ]
    names: dict[str, str] = {}
    exported: list[str] = []
    for module in sorted(messages.MODULES, key=lambda m: m.API_KEY):
        api: str = module.NAME
        key = ApiKey(module.API_KEY)
        lines.append("")
        lines.append(f"# --- {api} (API key {int(key)}) " + "-" * max(0, 70 - len(api)))
        for spec in (module.REQUEST, module.RESPONSE):
            for st in collect(api, spec):
                if st.name in names:
                    raise ValueError(f"{st.name} named twice ({names[st.name]}, {api})")
                names[st.name] = api
                exported.append(st.name)
                lines.append("")
                lines.append("")
                lines.extend(render_struct(st, spec.kind, api, spec))
        lines.append("")
        lines.append("")
        lines.append(
            f"{key.name}: Final[Api[{api}Request, {api}Response]] = Api(ApiKey.{key.name})"
        )
        exported.append(key.name)
    lines.append("")
    lines.append("__all__ = [")
    # (sorted as ruff wants: the API keys first)
    lines.extend(f"    {n!r}," for n in sorted(exported, key=lambda n: (not n.isupper(), n)))
    lines.append("]")
    return "\n".join(lines) + "\n"


def formatted(text: str) -> str:
    """``text`` as ruff formats it (unchanged when ruff is not installed)."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        return text
    out = subprocess.run(
        [str(ruff), "format", "--stdin-filename", str(OUT), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return out.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="fail if the committed file differs")
    args = ap.parse_args(argv)
    text = formatted(render())
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run tools/gen_bodies.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
