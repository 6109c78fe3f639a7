"""The package's shape: layers that only look down, no import cycle, modules a newcomer
can hold, and no record encoded or decoded outside the record codec.

The layers are read from the table in docs/design.md (between ``<!-- layers -->``
markers), so the document and the code cannot drift apart. Imports are read from the
source (function-level imports too; ``if TYPE_CHECKING:`` blocks, which only type
checkers run, are left out).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "aiokafka_lite"
DESIGN = ROOT / "docs" / "design.md"
#: Longer than this, a module says why at its top, in a comment starting "# Long: ".
MAX_LINES = 800


def layer_table() -> list[tuple[str, int]]:
    """(path prefix, layer) pairs from docs/design.md, longest prefix first."""
    text = DESIGN.read_text()
    block = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    out = []
    for row in block.splitlines():
        m = re.match(r"\|\s*(\d+)\.", row)
        if m is None:
            continue
        columns = row.split("|")
        for path in re.findall(r"`([^`]+)`", columns[2]):
            out.append((path, int(m.group(1))))
    assert out, "no layer table in docs/design.md"
    return sorted(out, key=lambda item: -len(item[0]))


def module_files() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def layer_of(path: Path, table: list[tuple[str, int]]) -> int:
    rel = path.relative_to(ROOT).as_posix()
    for prefix, layer in table:
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            return layer
    raise AssertionError(f"{rel} is in no layer of docs/design.md's table")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package modules ``name`` imports (resolved to modules that exist)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in modules and m != name}


def graph() -> tuple[dict[str, set[str]], dict[str, Path]]:
    files = dict(module_files())
    modules = set(files)
    return {name: imports_of(name, path, modules) for name, path in files.items()}, files


def test_every_module_is_in_a_layer_and_imports_only_downwards() -> None:
    table = layer_table()
    edges, files = graph()
    upward = []
    for name, targets in edges.items():
        here = layer_of(files[name], table)
        for target in targets:
            there = layer_of(files[target], table)
            if there > here:
                upward.append(f"{name} (layer {here}) imports {target} (layer {there})")
    assert not upward, "\n".join(sorted(upward))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return out


def test_no_import_cycle_inside_the_package() -> None:
    edges, _ = graph()
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_no_module_over_the_size_limit_without_its_reason() -> None:
    long_ones = []
    for _name, path in module_files():
        text = path.read_text()
        lines = text.count("\n")
        if lines <= MAX_LINES:
            continue
        if not text.startswith("# Long: "):
            long_ones.append(f"{path.relative_to(ROOT)}: {lines} lines, no reason at its top")
    assert not long_ones, "\n".join(long_ones)


#: Record-layout code: varint encoding tables, zigzag arithmetic, the v2 record framing.
_RECORD_CODE = re.compile(
    r"zigzag|_varint\(|read_varint|\(n << 1\) \^|>> 1\) \^ -\(|b\"\\x00\", zt|encode_record\("
    r"|decode_v2_records\(|_decode_v2\("
)


def test_records_are_encoded_and_decoded_only_in_the_record_codec() -> None:
    outside = []
    codec = PACKAGE / "protocol" / "records"
    allowed = {
        PACKAGE / "_speedups.c",  # the codec's compiled twin
        PACKAGE / "protocol" / "primitives.py",  # the message fields' varints, not records
    }
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.c")]:
        if path.is_relative_to(codec) or path in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _RECORD_CODE.search(line):
                outside.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not outside, "\n".join(outside)


def test_the_record_check_would_see_a_copy() -> None:
    assert _RECORD_CODE.search("    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF")
    assert _RECORD_CODE.search('body = _join((b"\\x00", zt, zn, b"\\x01", zv, value))')
    assert _RECORD_CODE.search("out = decode_v2_records(buf, 61, len(buf), n, 0, 0)")
