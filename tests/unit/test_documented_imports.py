"""Every import the documentation shows works, and every ``aiokafka_lite.x.Name`` it
names exists: moving a module must keep its public path (a re-export) or fix the docs."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_IMPORT_LINE = re.compile(
    r"^\s*(from aiokafka_lite[\w.]* import [\w, ]+|import aiokafka_lite[\w.]*)"
)
_DOTTED = re.compile(r"`(aiokafka_lite(?:\.\w+)+)`")


def documented_imports() -> set[tuple[str, str | None]]:
    """(module, name or None) for every import of aiokafka_lite in the docs' code."""
    found: set[tuple[str, str | None]] = set()
    for doc in DOCS:
        for block in _CODE_BLOCK.findall(doc.read_text()):
            try:
                tree = ast.parse(block)
            except SyntaxError:  # an interface sketch, not a program: read line by line
                tree = ast.parse(
                    "\n".join(m.group(1) for m in map(_IMPORT_LINE.match, block.splitlines()) if m)
                )
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "aiokafka_lite"
                ):
                    found.update((node.module or "", a.name) for a in node.names)
                elif isinstance(node, ast.Import):
                    found.update(
                        (a.name, None) for a in node.names if a.name.startswith("aiokafka_lite")
                    )
    return found


def documented_names() -> set[str]:
    """Every backticked ``aiokafka_lite.x.y`` the docs mention in prose."""
    return {m for doc in DOCS for m in _DOTTED.findall(doc.read_text())}


IMPORTS = sorted(documented_imports(), key=str)
NAMES = sorted(documented_names())


def test_the_docs_show_imports() -> None:
    assert len(IMPORTS) > 20 and len(NAMES) > 10


@pytest.mark.parametrize(("module", "name"), IMPORTS, ids=lambda v: str(v))
def test_documented_import_works(module: str, name: str | None) -> None:
    if module == "aiokafka_lite.spark" or module.startswith("aiokafka_lite.spark."):
        pytest.importorskip("pyspark", reason="the Spark extra is not installed")
    imported = importlib.import_module(module)
    if name is not None:
        assert hasattr(imported, name) or importlib.import_module(f"{module}.{name}")


@pytest.mark.parametrize("dotted", NAMES)
def test_documented_name_exists(dotted: str) -> None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"{dotted}: {'.'.join(parts[:cut])} has no {attr}"
            obj = getattr(obj, attr)
        return
    raise AssertionError(f"{dotted}: no such module")
