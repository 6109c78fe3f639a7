"""A small mutation fuzzer, used when atheris is not installed (and by the unit tests).

``python -m tests.fuzz.engine NAME --seconds S [--seed N] [--artifacts DIR]`` mutates the
target's seeds (bit flips, interesting integers over length fields, inserted, deleted
and duplicated ranges, splices, truncations) for ``S`` seconds and prints one JSON line:
``{"target", "engine", "inputs", "seconds", "crashes", "hangs", "peak_rss_mb", ...}``.

Each input runs under a wall-clock limit (``--timeout``, a hang is a crash) and the
whole process under an address-space limit (``--memory-mb``; a ``MemoryError`` from a
hostile length field is a crash too). Crashing inputs are written to ``--artifacts``.
No coverage feedback: that is what the atheris engine adds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from tests.fuzz.targets import ALLOWED, TARGETS, seeds

__all__ = ["Crash", "FuzzStats", "Mutator", "fuzz"]

_INTERESTING_32 = (0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000)
_INTERESTING_VARINTS = (
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\x80\x01",
    b"\xff\xff\xff\xff\x07",
    b"\xff\xff\xff\xff\x0f",
    b"\xfe\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
)


class Hang(BaseException):
    """An input ran past the per-input time limit."""


@dataclass(frozen=True)
class Crash:
    kind: str  # "exception", "hang" or "memory"
    summary: str
    input_path: str | None


@dataclass
class FuzzStats:
    target: str
    engine: str = "builtin"
    inputs: int = 0
    seconds: float = 0.0
    crashes: list[Crash] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "engine": self.engine,
            "inputs": self.inputs,
            "seconds": round(self.seconds, 1),
            "crashes": len(self.crashes),
            "crash_details": [c.__dict__ for c in self.crashes],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }


class Mutator:
    """Random structure-unaware mutations, biased towards length and count fields."""

    def __init__(self, corpus: Sequence[bytes], rng: random.Random, max_len: int = 8192) -> None:
        self.corpus = list(corpus) or [b""]
        self.rng = rng
        self.max_len = max_len

    def mutate(self, data: bytes) -> bytes:
        rng = self.rng
        buf = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 3, 4, 8))):
            op = rng.randrange(9)
            n = len(buf)
            if op == 0 and n:  # flip a bit
                i = rng.randrange(n)
                buf[i] ^= 1 << rng.randrange(8)
            elif op == 1 and n:  # a random byte
                buf[rng.randrange(n)] = rng.randrange(256)
            elif op == 2 and n >= 4:  # an interesting int32 (or int16) over a field
                i = rng.randrange(n - 3)
                value = rng.choice(_INTERESTING_32)
                if rng.random() < 0.5:
                    buf[i : i + 4] = struct.pack(">i", value if value < 2**31 else value - 2**32)
                else:
                    buf[i : i + 2] = struct.pack(">H", value & 0xFFFF)
            elif op == 3:  # an interesting varint
                i = rng.randrange(n + 1)
                cut = rng.randrange(0, 3)
                buf[i : i + cut] = rng.choice(_INTERESTING_VARINTS)
            elif op == 4 and n:  # delete a range
                i = rng.randrange(n)
                del buf[i : i + rng.randrange(1, 17)]
            elif op == 5:  # insert random bytes
                i = rng.randrange(n + 1)
                buf[i:i] = rng.randbytes(rng.randrange(1, 17))
            elif op == 6 and n:  # duplicate a range
                i = rng.randrange(n)
                j = min(n, i + rng.randrange(1, 65))
                k = rng.randrange(n + 1)
                buf[k:k] = buf[i:j]
            elif op == 7:  # splice with another corpus entry
                other = rng.choice(self.corpus)
                if other:
                    i, j = rng.randrange(n + 1), rng.randrange(len(other))
                    buf = buf[:i] + other[j:]
            elif op == 8 and n:  # truncate
                del buf[rng.randrange(n) :]
        return bytes(buf[: self.max_len])


def _summary(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__}: {str(exc)[:200]} at {where}"


def fuzz(
    name: str,
    seconds: float,
    *,
    seed: int = 0,
    timeout: float = 5.0,
    artifacts: Path | None = None,
    max_inputs: int | None = None,
    target: Callable[[bytes], None] | None = None,
) -> FuzzStats:
    """Fuzz one target for ``seconds`` (or ``max_inputs``); return the figures."""
    run = target or TARGETS[name]
    rng = random.Random(seed)
    corpus = seeds(name)
    mutator = Mutator(corpus, rng)
    stats = FuzzStats(name)
    seen: set[str] = set()

    def on_alarm(_signum: int, _frame: FrameType | None) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    deadline = started + seconds
    try:
        while time.monotonic() < deadline and (max_inputs is None or stats.inputs < max_inputs):
            for _ in range(100):
                data = mutator.mutate(rng.choice(corpus))
                stats.inputs += 1
                signal.setitimer(signal.ITIMER_REAL, timeout)
                kind = ""
                try:
                    run(data)
                except Hang:
                    kind, summary = "hang", f"input ran longer than {timeout}s"
                except MemoryError as exc:
                    kind, summary = "memory", _summary(exc)
                except ALLOWED:  # the targets catch these; a leak here is still fine
                    pass
                except Exception as exc:
                    kind, summary = "exception", _summary(exc)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if kind and summary not in seen:
                    seen.add(summary)
                    path = None
                    if artifacts is not None:
                        artifacts.mkdir(parents=True, exist_ok=True)
                        digest = hashlib.sha1(data).hexdigest()[:16]
                        out = artifacts / f"{kind}-{name}-{digest}"
                        out.write_bytes(data)
                        path = str(out)
                    stats.crashes.append(Crash(kind, summary, path))
                if max_inputs is not None and stats.inputs >= max_inputs:
                    break
    finally:
        signal.signal(signal.SIGALRM, previous)
        stats.seconds = time.monotonic() - started
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.engine")
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=5.0, help="per-input limit (s)")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit")
    parser.add_argument("--artifacts", type=Path, default=None)
    args = parser.parse_args(argv)
    limit = args.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stats = fuzz(
        args.target, args.seconds, seed=args.seed, timeout=args.timeout, artifacts=args.artifacts
    )
    sys.stdout.write(json.dumps(stats.as_json()) + "\n")
    return 1 if stats.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
