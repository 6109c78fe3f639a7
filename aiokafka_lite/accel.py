"""The compiled hot path (``aiokafka_lite._speedups``), when it was built.

``pip install`` compiles it where a C compiler is found; without one the install still
succeeds and the pure-Python modules, the reference implementation, do the work.
``AIOKAFKA_LITE_PURE=1`` in the environment turns the compiled path off (the tests run
both). :data:`speedups` is the module, or None; :data:`COMPILED` says which is in use.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["COMPILED", "PURE_ENV", "speedups"]

#: Set (to anything but "" or "0") to use the pure-Python code even when compiled.
PURE_ENV = "AIOKAFKA_LITE_PURE"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("aiokafka_lite._speedups")
    except ImportError:
        return None


speedups = _load()
COMPILED = speedups is not None
