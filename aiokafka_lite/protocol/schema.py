# Long: the schema model and its compiler to encoders and decoders are one thing.
"""Schema model (`Field`, `MessageSpec`) and the codec compiler.

A message spec mirrors Kafka's JSON message definitions: an ordered list of
fields, each with the versions it exists in, the versions it may be null in and,
for KIP-482 tagged fields, its tag. Arrays of structs carry their nested fields.

For each (message, version) the compiler generates Python source for one encoder
(``dict -> bytearray``) and one decoder (``Reader -> dict``) and ``exec``s it.
Generated code is flat and specialised: no per-field dispatch at run time, runs of
fixed-width fields are packed/unpacked with a single ``struct.Struct`` call, and
nested arrays become plain ``for`` loops. Compiled codecs are cached on the spec.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

from aiokafka_lite.errors import DecodeError, UnsupportedVersionError
from aiokafka_lite.protocol.primitives import (
    ZERO_UUID,
    BytesLike,
    Reader,
    decode_uvarint,
    encode_uvarint,
    uuid_bytes,
)

__all__ = [
    "UNKNOWN_TAGGED_FIELDS",
    "Decoder",
    "Encoder",
    "Field",
    "MessageSpec",
    "VersionRange",
    "snake_case",
]

#: Key under which a decoded struct keeps tagged fields this schema does not know
#: (``{tag: raw bytes}``). Only present when there were some; the encoder writes
#: them back, so a decoded message re-encodes to the same bytes.
UNKNOWN_TAGGED_FIELDS: Final = "_unknown_tagged_fields"

Encoder = Callable[[bytearray, Mapping[str, Any]], None]
Decoder = Callable[[Reader], dict[str, Any]]


def snake_case(name: str) -> str:
    """``ProducerId`` -> ``producer_id``; ``V3AndBelowTopics`` -> ``v3_and_below_topics``."""
    out: list[str] = []
    n = len(name)
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < n else ""
            if prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower()):
                out.append("_")
        out.append(ch.lower())
    return "".join(out)


class VersionRange:
    """A Kafka version range: ``"3+"``, ``"0-12"``, ``"5"`` or ``"none"``."""

    __slots__ = ("hi", "lo", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        text = text.strip()
        lo: int
        hi: int | None
        if text == "none":
            lo, hi = 1, 0  # empty
        elif text.endswith("+"):
            lo, hi = int(text[:-1]), None
        elif "-" in text:
            a, b = text.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
        self.lo = lo
        self.hi = hi

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"


_NONE = VersionRange("none")

# Fixed-width scalar types: struct code and size.
_FIXED: Final[dict[str, tuple[str, int]]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
_VARIABLE: Final = frozenset({"string", "bytes", "records", "uuid"})
PRIMITIVE_TYPES: Final = frozenset(_FIXED) | _VARIABLE

_MISSING: Final = object()


class Field:
    """One field of a message or struct.

    ``type`` is Kafka's type string: a primitive (``"int32"``, ``"string"``,
    ``"records"``, ``"uuid"`` ...), ``"[]<element>"`` for arrays (element is a
    primitive or a struct name), or a struct name (capitalised) for a single
    nested struct. Struct-typed fields carry their ``fields``.
    ``default`` is the schema default; when omitted the type's zero value is used
    (0, False, "", b"", [], zero UUID; null for records), as Kafka does.
    ``has_default`` says whether the schema gave one (the typed bodies make a request
    field without one required).
    """

    __slots__ = (
        "default",
        "element",
        "fields",
        "has_default",
        "is_array",
        "is_struct",
        "name",
        "nullable",
        "tag",
        "tagged",
        "type",
        "versions",
    )

    def __init__(
        self,
        name: str,
        type: str,
        versions: str,
        *,
        nullable: str = "none",
        tag: int | None = None,
        tagged: str = "none",
        default: Any = _MISSING,
        fields: Sequence[Field] = (),
    ) -> None:
        self.name = name
        self.type = type
        self.versions = VersionRange(versions)
        self.nullable = VersionRange(nullable)
        self.tag = tag
        self.tagged = VersionRange(tagged)
        self.fields: tuple[Field, ...] = tuple(fields)
        self.is_array = type.startswith("[]")
        self.element = type[2:] if self.is_array else type
        # element is a struct when it is not a primitive type name
        self.is_struct = self.element not in PRIMITIVE_TYPES
        if self.is_struct and not self.fields:
            raise ValueError(f"field {name!r}: struct type {type!r} needs fields")
        if tag is not None and self.tagged is _NONE:
            raise ValueError(f"field {name!r}: tag without tagged versions")
        self.has_default = default is not _MISSING
        if default is _MISSING:
            default = _zero(self)
        self.default = default

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions.text!r})"

    def is_tagged_at(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged


def _zero(f: Field) -> Any:
    if f.is_array:
        return []
    if f.is_struct:
        return {}  # every sub-field at its default
    t = f.type
    if t == "bool":
        return False
    if t == "float64":
        return 0.0
    if t in _FIXED:
        return 0
    if t == "string":
        return ""
    if t == "bytes":
        return b""
    if t == "records":
        return None
    if t == "uuid":
        return ZERO_UUID
    raise ValueError(f"unknown type {t!r}")


class MessageSpec:
    """A request or response body schema for one API."""

    def __init__(
        self,
        name: str,
        api_key: int,
        kind: str,
        *,
        valid: str,
        flexible: str,
        fields: Sequence[Field],
        latest_unstable: bool = False,
    ) -> None:
        if kind not in ("request", "response"):
            raise ValueError(f"kind must be 'request' or 'response', not {kind!r}")
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.valid = VersionRange(valid)
        self.flexible = VersionRange(flexible)
        self.fields: tuple[Field, ...] = tuple(fields)
        #: Kafka marks the newest version as still under development.
        self.latest_unstable = latest_unstable
        self._encoders: dict[int, Encoder] = {}
        self._decoders: dict[int, Decoder] = {}

    def __repr__(self) -> str:
        return f"MessageSpec({self.name!r}, valid={self.valid.text!r})"

    @property
    def min_version(self) -> int:
        return self.valid.lo

    @property
    def max_version(self) -> int:
        assert self.valid.hi is not None, "message specs have a closed version range"
        return self.valid.hi

    @property
    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def _check_version(self, version: int) -> None:
        if version not in self.valid:
            raise UnsupportedVersionError(
                f"{self.name} version {version} is not supported "
                f"(this client knows versions {self.min_version}-{self.max_version})"
            )

    def encoder(self, version: int) -> Encoder:
        enc = self._encoders.get(version)
        if enc is None:
            self._check_version(version)
            enc = self._encoders[version] = _compile_encoder(self, version)
        return enc

    def decoder(self, version: int) -> Decoder:
        dec = self._decoders.get(version)
        if dec is None:
            self._check_version(version)
            dec = self._decoders[version] = _compile_decoder(self, version)
        return dec

    def encode(self, version: int, body: Mapping[str, Any], buf: bytearray | None = None) -> bytes:
        """Encode ``body`` at ``version``; appends to ``buf`` if given. Returns the bytes."""
        out = bytearray() if buf is None else buf
        start = len(out)
        self.encoder(version)(out, body)
        return bytes(out[start:])

    def decode(self, version: int, data: bytes | bytearray | memoryview | Reader) -> dict[str, Any]:
        reader = data if isinstance(data, Reader) else Reader(data)
        return self.decoder(version)(reader)

    def source(self, version: int) -> str:
        """The generated Python source of both codecs (for debugging)."""
        return _gen_encoder(self, version)[0] + "\n" + _gen_decoder(self, version)[0]


# --- code generation helpers ---------------------------------------------------


class _Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.consts: dict[str, Any] = {}

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def var(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any, prefix: str = "_K") -> str:
        """Name a constant in the generated module's namespace."""
        for name, existing in self.consts.items():
            if existing is value:
                return name
        name = f"{prefix}{len(self.consts)}"
        self.consts[name] = value
        return name


def _struct_pack(fmt: str) -> Callable[..., bytes]:
    return struct.Struct(">" + fmt).pack


def _struct_unpack(fmt: str) -> Callable[..., tuple[Any, ...]]:
    return struct.Struct(">" + fmt).unpack_from


def _present(fields: Sequence[Field], version: int) -> list[Field]:
    return [f for f in fields if version in f.versions]


def _write_tagged(
    buf: bytearray, known: list[tuple[int, bytes]], unknown: Mapping[int, bytes] | None
) -> None:
    """Write a tagged-field section from known (encoded) fields plus passthrough ones."""
    items: list[tuple[int, bytes]] = list(known)
    if unknown:
        seen = {t for t, _ in known}
        items.extend((t, bytes(v)) for t, v in unknown.items() if t not in seen)
        items.sort()
    buf += encode_uvarint(len(items))
    for tag, data in items:
        buf += encode_uvarint(tag)
        buf += encode_uvarint(len(data))
        buf += data


def _check_bool(value: Any, path: str) -> Any:
    if value is None:
        raise ValueError(f"field {path!r} is not nullable")
    return value


def _not_nullable(path: str, version: int) -> ValueError:
    return ValueError(f"field {path!r} is not nullable at version {version}, got None")


_BASE_ENC_NS: Final[dict[str, Any]] = {
    "_pb": _struct_pack("b"),
    "_ph": _struct_pack("h"),
    "_pi": _struct_pack("i"),
    "_u2": _struct_pack("BB"),
    "_euv": encode_uvarint,
    "_uuidb": uuid_bytes,
    "_wtags": _write_tagged,
    "_chkb": _check_bool,
    "_nn": _not_nullable,
    "_MISSING": _MISSING,
    "_EMPTY": {},
    "_spack": struct.pack,
    "_struct_error": struct.error,
}


# --- encoder --------------------------------------------------------------------


def _gen_encoder(spec: MessageSpec, version: int) -> tuple[str, dict[str, Any], list[Any]]:
    code = _Code()
    flexible = spec.is_flexible(version)
    # tagged-field encoders are separate functions so their default encoding can be
    # computed once: a tagged field is written only when its encoding differs from it.
    tag_funcs: list[tuple[str, str, Field]] = []
    extra: list[str] = []

    def emit_len(buf: str, n: str, compact: bool, plus_one: bool = True) -> None:
        if compact:
            nv = code.var("n")
            code(f"{nv} = {n}{' + 1' if plus_one else ''}")
            code(f"if {nv} < 128: {buf}.append({nv})")
            code(f"elif {nv} < 16384: {buf} += _u2({nv} & 127 | 128, {nv} >> 7)")
            code(f"else: {buf} += _euv({nv})")
        else:
            code(f"{buf} += _pi({n})")

    def emit_null(buf: str, compact: bool, kind: str) -> None:
        if kind == "struct":
            # a nullable struct has an int8 marker (-1 null, 1 present) in every version
            code(f'{buf} += b"\\xff"')
        elif compact:
            code(f"{buf}.append(0)")
        elif kind == "string":
            code(f'{buf} += b"\\xff\\xff"')
        else:
            code(f'{buf} += b"\\xff\\xff\\xff\\xff"')

    def emit_value(f: Field, v: str, buf: str, path: str) -> None:
        """Encode the value in variable ``v`` (already defaulted) into ``buf``."""
        nullable = version in f.nullable
        compact = flexible
        if f.is_array:
            with code.block(f"if {v} is None:"):
                if nullable:
                    emit_null(buf, compact, "array")
                else:
                    code(f"raise _nn({path!r}, {version})")
            with code.block("else:"):
                emit_len(buf, f"len({v})", compact)
                el = f.element
                if f.is_struct:
                    d = code.var("d")
                    with code.block(f"for {d} in {v}:"):
                        emit_struct(f.fields, d, buf, path + "[]")
                elif el in _FIXED and el != "bool":
                    code(f'{buf} += _spack(">%d{_FIXED[el][0]}" % len({v}), *{v})')
                else:
                    item = code.var("x")
                    with code.block(f"for {item} in {v}:"):
                        emit_scalar(el, False, item, buf, path + "[]", compact)
        elif f.is_struct:
            with code.block(f"if {v} is None:"):
                if nullable:
                    emit_null(buf, compact, "struct")
                else:
                    code(f"raise _nn({path!r}, {version})")
            with code.block("else:"):
                if nullable:
                    code(f"{buf}.append(1)")
                emit_struct(f.fields, v, buf, path)
        else:
            emit_scalar(f.type, nullable, v, buf, path, compact)

    def emit_scalar(t: str, nullable: bool, v: str, buf: str, path: str, compact: bool) -> None:
        if t in _FIXED:
            if t == "bool":
                code(f"{buf}.append(1 if _chkb({v}, {path!r}) else 0)")
            else:
                code(f"{buf} += {code.const(_struct_pack(_FIXED[t][0]), '_P')}({v})")
            return
        if t == "uuid":
            code(f"{buf} += _uuidb({v})")
            return
        with code.block(f"if {v} is None:"):
            if nullable:
                emit_null(buf, compact, t)
            else:
                code(f"raise _nn({path!r}, {version})")
        with code.block("else:"):
            if t == "string":
                s = code.var("s")
                code(f'{s} = {v}.encode("utf-8")')
                if compact:
                    emit_len(buf, f"len({s})", True)
                else:
                    code(f"{buf} += _ph(len({s}))")
                code(f"{buf} += {s}")
            elif t == "records":
                # A tuple of parts (a batch's header, its records) is written part after
                # part: the records are not copied into one bytes object first.
                part = code.var("part")
                with code.block(f"if {v}.__class__ is tuple:"):
                    emit_len(buf, f"sum(map(len, {v}))", compact)
                    with code.block(f"for {part} in {v}:"):
                        code(f"{buf} += {part}")
                with code.block("else:"):
                    emit_len(buf, f"len({v})", compact)
                    code(f"{buf} += {v}")
            else:  # bytes
                emit_len(buf, f"len({v})", compact)
                code(f"{buf} += {v}")

    def fetch(f: Field, d: str) -> str:
        v = code.var("v")
        code(f"{v} = {d}.get({snake(f)!r}, {default_const(f)})")
        return v

    def default_const(f: Field) -> str:
        dv = f.default
        if dv is None or isinstance(dv, bool | int | float | str | bytes):
            return repr(dv)
        if f.is_struct and not f.is_array and dv == {}:
            return "_EMPTY"
        if isinstance(dv, list) and not dv:
            return "()"
        return code.const(dv)

    def snake(f: Field) -> str:
        return f.name

    def emit_struct(fields: Sequence[Field], d: str, buf: str, path: str) -> None:
        present = _present(fields, version)
        regular = [f for f in present if not f.is_tagged_at(version)]
        tagged = [f for f in present if f.is_tagged_at(version)]
        i = 0
        while i < len(regular):
            f = regular[i]
            fpath = f"{path}.{f.name}" if path else f.name
            if f.type in _FIXED and not f.is_array:
                # gather a run of fixed-width fields into one pack call
                run = [f]
                while (
                    i + len(run) < len(regular)
                    and regular[i + len(run)].type in _FIXED
                    and not regular[i + len(run)].is_array
                ):
                    run.append(regular[i + len(run)])
                args = []
                for g in run:
                    gpath = f"{path}.{g.name}" if path else g.name
                    expr = f"{d}.get({g.name!r}, {default_const(g)})"
                    if g.type == "bool":
                        expr = f"_chkb({expr}, {gpath!r})"
                    args.append(expr)
                fmt = "".join(_FIXED[g.type][0] for g in run)
                names = ", ".join((f"{path}." if path else "") + g.name for g in run)
                code(f"_f = {names!r}")
                code(f"{buf} += {code.const(_struct_pack(fmt), '_P')}({', '.join(args)})")
                i += len(run)
                continue
            code(f"_f = {fpath!r}")
            v = fetch(f, d)
            emit_value(f, v, buf, fpath)
            i += 1
        if not flexible:
            return
        if not tagged:
            u = code.var("u")
            code(f"{u} = {d}.get({UNKNOWN_TAGGED_FIELDS!r})")
            code(f"if {u}: _wtags({buf}, [], {u})")
            code(f"else: {buf}.append(0)")
            return
        t = code.var("t")
        code(f"{t} = []")
        for f in sorted(tagged, key=lambda g: g.tag or 0):
            fpath = f"{path}.{f.name}" if path else f.name
            fname = f"_tagenc_{len(tag_funcs)}"
            tag_funcs.append((fname, fpath, f))
            v = code.var("v")
            code(f"_f = {fpath!r}")
            code(f"{v} = {d}.get({f.name!r}, _MISSING)")
            with code.block(f"if {v} is not _MISSING:"):
                tb = code.var("tb")
                code(f"{tb} = {fname}({v})")
                code(f"if {tb} != _DEF{fname}: {t}.append(({f.tag}, {tb}))")
        u = code.var("u")
        code(f"{u} = {d}.get({UNKNOWN_TAGGED_FIELDS!r})")
        code(f"if {t} or {u}: _wtags({buf}, {t}, {u})")
        code(f"else: {buf}.append(0)")

    code.depth = 2
    emit_struct(spec.fields, "d", "buf", "")
    body = code.lines
    code.lines = []
    # tagged field encoder functions (they may themselves register more)
    done = 0
    while done < len(tag_funcs):
        fname, fpath, f = tag_funcs[done]
        done += 1
        code.depth = 0
        code(f"def {fname}(v):")
        code.depth = 1
        code("b = bytearray()")
        emit_value(f, "v", "b", fpath)
        code("return bytes(b)")
        extra.extend(code.lines)
        code.lines = []
    where = f"{spec.name} v{version}"
    src = "\n".join(
        [
            *extra,
            "def encode(buf, d):",
            "    _f = ''",
            "    try:",
            *(body or ["        pass"]),
            "    except (_struct_error, AttributeError, TypeError, OverflowError) as e:",
            f"        raise ValueError(f'cannot encode {where} field {{_f!r}}: {{e}}') from e",
            "",
        ]
    )
    defaults = [f.default for _, _, f in tag_funcs]
    return src, code.consts, defaults


def _compile_encoder(spec: MessageSpec, version: int) -> Encoder:
    src, consts, defaults = _gen_encoder(spec, version)
    ns: dict[str, Any] = dict(_BASE_ENC_NS)
    ns.update(consts)
    exec(compile(src, f"<encoder {spec.name} v{version}>", "exec"), ns)
    for i, dv in enumerate(defaults):
        fn = ns[f"_tagenc_{i}"]
        ns[f"_DEF_tagenc_{i}"] = fn(dv)
    enc: Encoder = ns["encode"]
    return enc


# --- decoder --------------------------------------------------------------------


def _min_size(f: Field, version: int, flexible: bool) -> int:
    """Fewest wire bytes a value of ``f`` can take at ``version``."""
    if f.is_array:
        return 1 if flexible else 4
    if f.is_struct:
        if version in f.nullable:
            return 1
        return _struct_min_size(f.fields, version, flexible)
    if f.type in _FIXED:
        return _FIXED[f.type][1]
    if f.type == "uuid":
        return 16
    if flexible:
        return 1
    return 2 if f.type == "string" else 4


def _struct_min_size(fields: Sequence[Field], version: int, flexible: bool) -> int:
    size = 1 if flexible else 0
    for f in _present(fields, version):
        if not f.is_tagged_at(version):
            size += _min_size(f, version, flexible)
    return size


def _default_expr(f: Field, version: int, code: _Code) -> str:
    """A Python expression building a fresh default value of ``f`` at ``version``."""
    dv = f.default
    if f.is_array:
        return "None" if dv is None else "[]"
    if f.is_struct:
        if dv is None:
            return "None"
        items = ", ".join(
            f"{g.name!r}: {_default_expr(g, version, code)}" for g in _present(f.fields, version)
        )
        return "{" + items + "}"
    if dv is None or isinstance(dv, bool | int | float | str | bytes):
        return repr(dv)
    return code.const(dv)


def _decode_err(msg: str) -> DecodeError:
    return DecodeError(msg)


def _records_view(buf: BytesLike, start: int, end: int) -> bytes | memoryview:
    """A response's records (a fetch: megabytes) as a view of the frame, not a copy,
    when the frame cannot change under it (``bytes``, or a view of ``bytes``); else a
    copy. The view keeps the frame alive while it is held."""
    if type(buf) is bytes:
        return memoryview(buf)[start:end]
    if type(buf) is memoryview and type(buf.obj) is bytes:
        return buf[start:end]
    return bytes(buf[start:end])


_BASE_DEC_NS: Final[dict[str, Any]] = {
    "_uh": _struct_unpack("h"),
    "_ui": _struct_unpack("i"),
    "_ub": _struct_unpack("b"),
    "_duv": decode_uvarint,
    "_err": _decode_err,
    "_records_view": _records_view,
    "_UUID": uuid.UUID,
    "_unpack": struct.unpack_from,
    "_struct_error": struct.error,
    "DecodeError": DecodeError,
}


def _gen_decoder(spec: MessageSpec, version: int) -> tuple[str, dict[str, Any]]:
    code = _Code()
    flexible = spec.is_flexible(version)

    def read_uvarint(target: str) -> None:
        # inline the 1- and 2-byte cases (lengths < 16384); longer ones call out
        code(f"{target} = buf[pos]")
        with code.block(f"if {target} < 128:"):
            code("pos += 1")
        with code.block("elif buf[pos + 1] < 128:"):
            code(f"{target} = ({target} & 127) | (buf[pos + 1] << 7)")
            code("pos += 2")
        with code.block("else:"):
            code(f"{target}, pos = _duv(buf, pos)")

    def read_len(target: str, long: bool) -> None:
        """Length prefix: compact (uvarint N+1) in flexible versions, else int16/int32."""
        if flexible:
            read_uvarint(target)
            code(f"{target} -= 1")
        elif long:
            code(f"{target}, = _ui(buf, pos)")
            code("pos += 4")
        else:
            code(f"{target}, = _uh(buf, pos)")
            code("pos += 2")

    def null_or_fail(n: str, v: str, nullable: bool, path: str) -> None:
        # called inside "if n < 0:"; compact lengths can only be -1 here
        if nullable:
            if flexible:
                code(f"{v} = None")
            else:
                code(f"if {n} != -1: raise _err('invalid length %d for {path}' % {n})")
                code(f"{v} = None")
        else:
            code(f"raise _err('null value for non-nullable field {path}')")

    def read_value(f: Field, v: str, path: str) -> None:
        nullable = version in f.nullable
        if f.is_array:
            n = code.var("n")
            read_len(n, True)
            with code.block(f"if {n} < 0:"):
                null_or_fail(n, v, nullable, path)
            with code.block("else:"):
                el = f.element
                if f.is_struct:
                    msz = max(1, _struct_min_size(f.fields, version, flexible))
                elif el in _FIXED:
                    msz = _FIXED[el][1]
                elif el == "uuid":
                    msz = 16
                else:
                    msz = 1 if flexible else (2 if el == "string" else 4)
                mul = f" * {msz}" if msz != 1 else ""
                code(
                    f"if {n}{mul} > end - pos: raise _err('{path}: array of %d elements "
                    f"does not fit in the %d bytes left' % ({n}, end - pos))"
                )
                if el in _FIXED and not f.is_struct:
                    code(f'{v} = list(_unpack(">%d{_FIXED[el][0]}" % {n}, buf, pos))')
                    code(f"pos += {n}{mul}")
                    return
                code(f"{v} = []")
                ap = code.var("ap")
                code(f"{ap} = {v}.append")
                with code.block(f"for _ in range({n}):"):
                    item = code.var("x")
                    if f.is_struct:
                        read_struct(f.fields, item, path + "[]")
                    else:
                        read_scalar(el, False, item, path + "[]")
                    code(f"{ap}({item})")
        elif f.is_struct:
            if nullable:
                p = code.var("p")
                code(f"{p}, = _ub(buf, pos)")
                code("pos += 1")
                with code.block(f"if {p} < 0:"):
                    code(f"{v} = None")
                with code.block("else:"):
                    read_struct(f.fields, v, path)
            else:
                read_struct(f.fields, v, path)
        else:
            read_scalar(f.type, nullable, v, path)

    def read_scalar(t: str, nullable: bool, v: str, path: str) -> None:
        if t in _FIXED:
            code(f"{v}, = {code.const(_struct_unpack(_FIXED[t][0]), '_U')}(buf, pos)")
            code(f"pos += {_FIXED[t][1]}")
            return
        if t == "uuid":
            code("if pos + 16 > end: raise _err('truncated uuid')")
            code(f"{v} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
            code("pos += 16")
            return
        n = code.var("n")
        read_len(n, t != "string")
        with code.block(f"if {n} < 0:"):
            null_or_fail(n, v, nullable, path)
        with code.block("else:"):
            e = code.var("e")
            code(f"{e} = pos + {n}")
            code(
                f"if {e} > end: raise _err('{path}: length %d exceeds the %d bytes left' "
                f"% ({n}, end - pos))"
            )
            if t == "string":
                code(f'{v} = str(buf[pos:{e}], "utf-8")')
            elif t == "records" and spec.kind == "response":
                code(f"{v} = _records_view(buf, pos, {e})")
            else:
                code(f"{v} = bytes(buf[pos:{e}])")
            code(f"pos = {e}")

    def read_struct(fields: Sequence[Field], target: str, path: str) -> None:
        present = _present(fields, version)
        regular = [f for f in present if not f.is_tagged_at(version)]
        tagged = [f for f in present if f.is_tagged_at(version)]
        names: dict[str, str] = {}
        i = 0
        while i < len(regular):
            f = regular[i]
            fpath = f"{path}.{f.name}" if path else f.name
            if f.type in _FIXED and not f.is_array:
                run = [f]
                while (
                    i + len(run) < len(regular)
                    and regular[i + len(run)].type in _FIXED
                    and not regular[i + len(run)].is_array
                ):
                    run.append(regular[i + len(run)])
                vs = [code.var("v") for _ in run]
                fmt = "".join(_FIXED[g.type][0] for g in run)
                size = struct.calcsize(">" + fmt)
                unpack = code.const(_struct_unpack(fmt), "_U")
                code(f"{', '.join(vs)}, = {unpack}(buf, pos)")
                code(f"pos += {size}")
                for g, vv in zip(run, vs, strict=True):
                    names[g.name] = vv
                i += len(run)
                continue
            v = code.var("v")
            read_value(f, v, fpath)
            names[f.name] = v
            i += 1
        unk: str | None = None
        if flexible:
            for f in tagged:
                v = code.var("v")
                code(f"{v} = {_default_expr(f, version, code)}")
                names[f.name] = v
            nt = code.var("nt")
            read_uvarint(nt)
            unk = code.var("unk")
            code(f"{unk} = None")
            with code.block(f"if {nt}:"):
                code(f"if {nt} * 2 > end - pos: raise _err('too many tagged fields: %d' % {nt})")
                with code.block(f"for _ in range({nt}):"):
                    tag, sz, te = code.var("tag"), code.var("sz"), code.var("te")
                    read_uvarint(tag)
                    read_uvarint(sz)
                    code(f"{te} = pos + {sz}")
                    code(f"if {te} > end: raise _err('tagged field %d overruns the frame' % {tag})")
                    first = True
                    for f in sorted(tagged, key=lambda g: g.tag or 0):
                        fpath = f"{path}.{f.name}" if path else f.name
                        with code.block(f"{'if' if first else 'elif'} {tag} == {f.tag}:"):
                            read_value(f, names[f.name], fpath)
                            code(
                                f"if pos > {te}: raise _err('tagged field {fpath} overruns its "
                                "declared size')"
                            )
                            code(f"pos = {te}")
                        first = False
                    with code.block("else:" if not first else "if True:"):
                        code(f"if {unk} is None: {unk} = {{}}")
                        code(f"{unk}[{tag}] = bytes(buf[pos:{te}])")
                        code(f"pos = {te}")
        items = ", ".join(f"{f.name!r}: {names[f.name]}" for f in present)
        code(f"{target} = {{{items}}}")
        if unk is not None:
            code(f"if {unk} is not None: {target}[{UNKNOWN_TAGGED_FIELDS!r}] = {unk}")

    code.depth = 2
    read_struct(spec.fields, "result", "")
    where = f"{spec.name} v{version}"
    src = "\n".join(
        [
            "def decode(r):",
            "    buf = r.buf",
            "    pos = r.pos",
            "    end = r.end",
            "    try:",
            *code.lines,
            "    except (_struct_error, IndexError, ValueError, OverflowError, MemoryError) as e:",
            f"        raise DecodeError(f'cannot decode {where}: {{e}}') from None",
            "    except DecodeError as e:",
            f"        raise DecodeError(f'cannot decode {where}: {{e}}') from None",
            "    r.pos = pos",
            "    return result",
            "",
        ]
    )
    return src, code.consts


def _compile_decoder(spec: MessageSpec, version: int) -> Decoder:
    src, consts = _gen_decoder(spec, version)
    ns: dict[str, Any] = dict(_BASE_DEC_NS)
    ns.update(consts)
    exec(compile(src, f"<decoder {spec.name} v{version}>", "exec"), ns)
    dec: Decoder = ns["decode"]
    return dec
