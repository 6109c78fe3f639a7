"""``python -m aiokafka_lite.compat``: run a program with ``aiokafka`` mapped to aiokafka_lite.

::

    python -m aiokafka_lite.compat run app.py [args...]        # a script
    python -m aiokafka_lite.compat run -m package.module [args...]
    python -m aiokafka_lite.compat check                       # list aiokafka names missing

``AIOKAFKA_LITE_AS_AIOKAFKA=0`` runs the program without the alias (with the real
aiokafka), which makes A/B comparisons one environment variable apart.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from aiokafka_lite import compat

_USAGE = (
    "usage: python -m aiokafka_lite.compat run (SCRIPT | -m MODULE) [ARGS...]\n"
    "       python -m aiokafka_lite.compat check"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "check":
        gaps = compat.missing_names()
        if compat.real_aiokafka_dir() is None:
            print("aiokafka is not installed: nothing to compare with")
            return 0
        for module, names in gaps.items():
            print(f"{module}: {', '.join(names)}")
        print(f"{sum(len(n) for n in gaps.values())} aiokafka names missing")
        return 1 if gaps else 0
    if command != "run" or not rest:
        print(_USAGE, file=sys.stderr)
        return 2
    if compat.enabled_by_environment():
        compat.install()
    if rest[0] == "-m":
        if len(rest) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = rest[1:]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path.insert(0, str(Path(rest[0]).resolve().parent))
        runpy.run_path(rest[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
