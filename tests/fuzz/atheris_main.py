"""libFuzzer (atheris) entry point for one target: ``python -m tests.fuzz.atheris_main NAME ...``.

Everything after ``NAME`` goes to libFuzzer (corpus directories, ``-max_total_time=``,
``-timeout=``, ``-rss_limit_mb=``...). The ``aiokafka_lite`` package is instrumented for
coverage feedback. Use :mod:`tests.fuzz.run` rather than this module directly.
"""

from __future__ import annotations

import sys

import atheris  # type: ignore[import-untyped]

with atheris.instrument_imports(include=["aiokafka_lite"]):
    from tests.fuzz.targets import TARGETS


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(
            f"usage: python -m tests.fuzz.atheris_main {{{','.join(TARGETS)}}} [libFuzzer args]"
        )
    target = TARGETS[sys.argv[1]]

    def one_input(data: bytes) -> None:
        target(data)

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
