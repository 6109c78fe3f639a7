"""The benchmark workloads: named record shapes, generated deterministically.

Every process that asks for ``records(name, n)`` gets the very same records (same keys,
values, headers, in the same order), generated from a seed derived from the name, so
each client is handed identical data and a run can be repeated.

* ``uniform``: 100 identical bytes (one shared ``bytes`` object), no key, no headers,
  one partition, sent to partition 0 explicitly (the earlier benchmarks' shape).
  ``uniform/<size>`` is the same with ``size`` bytes: a control with as many bytes a
  record as another workload, without its keys, headers, varied values and partitions.
* ``service``: what a service emits. Key ``user-<n>`` (n drawn uniformly from 100,000
  users, so keys repeat a few times in a run of 300,000, as active users do); a JSON
  value of 60-700 bytes (sizes uniform in that range, drawn from a pool of 4,096
  distinct documents, so no two neighbouring records share a value by design); two
  headers, ``trace-id`` (16 random bytes, fresh per record) and ``content-type``
  (``application/json``); a fresh headers list per record; 8 partitions, chosen by the
  client's partitioner from the key.
* ``large``: the service shape with values of 10-100 KiB (uniform; a pool of 64
  distinct, partly compressible texts), ``content-type: application/octet-stream``.
* ``many-partitions``: the service records over 1, 8, 64, 512 or 2,048 partitions
  (``partitions=`` on :func:`records` is not needed: the topic decides; the name
  carries the count, e.g. ``many-partitions/512``).

A record is a tuple ``(key, value, headers)``: ``key`` bytes or None, ``value`` bytes,
``headers`` a list of ``(str, bytes)`` or None.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

Record = tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]

USERS = 100_000
SERVICE_POOL = 4096
LARGE_POOL = 64
PARTITION_COUNTS = (1, 8, 64, 512, 2048)
_EVENTS = ("page_view", "click", "add_to_cart", "checkout", "search", "login", "logout")
_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
    "order item price quantity session region device browser mobile desktop account"
).split()


@dataclass(frozen=True)
class Workload:
    name: str
    partitions: int
    keyed: bool
    #: Every record carries headers of its own (send_many takes one list for all).
    headers: bool
    #: Records sent to partition 0 explicitly (``partition=0``) instead of by key.
    fixed_partition: bool
    description: str


def workload(name: str) -> Workload:
    """The workload called ``name`` (``many-partitions/<count>`` for that family)."""
    if name == "uniform":
        return Workload(name, 1, False, False, True, "100 identical bytes, no key/headers")
    family, _, count = name.partition("/")
    if family == "uniform" and count.isdigit():
        return Workload(name, 1, False, False, True, f"{count} identical bytes, no key/headers")
    if name == "service":
        return Workload(
            name, 8, True, True, False, "key user-<n>, JSON 60-700 B, 2 headers, 8 partitions"
        )
    if name == "large":
        return Workload(
            name, 8, True, True, False, "key user-<n>, 10-100 KiB values, 2 headers, 8 partitions"
        )
    if family == "many-partitions" and count.isdigit():
        return Workload(
            name, int(count), True, True, False, f"service records over {count} partitions"
        )
    raise ValueError(f"unknown workload {name!r}")


def _rng(name: str, part: str) -> random.Random:
    return random.Random(zlib.crc32(f"{name}:{part}".encode()))


def _json_value(rng: random.Random, size: int) -> bytes:
    """A JSON document of exactly ``size`` bytes (size >= 60): user, event, time and
    a text field of words that makes up the size."""
    doc = {
        "u": rng.randrange(USERS),
        "e": rng.choice(_EVENTS),
        "ts": 1_700_000_000_000 + rng.randrange(10**9),
        "p": "",
    }
    base = len(json.dumps(doc, separators=(",", ":")))
    words: list[str] = []
    length = 0
    while length < size - base:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    room = max(size - base, 0)
    doc["p"] = (" ".join(words) + "." * room)[:room]
    data = json.dumps(doc, separators=(",", ":")).encode()
    assert len(data) == size, (len(data), size)
    return data


def _service_pool() -> list[bytes]:
    rng = _rng("service", "values")
    return [_json_value(rng, rng.randint(60, 700)) for _ in range(SERVICE_POOL)]


def _large_pool() -> list[bytes]:
    rng = _rng("large", "values")
    pool = []
    for _ in range(LARGE_POOL):
        size = rng.randint(10 * 1024, 100 * 1024)
        # Text of random words with a random run of bytes every 1 KiB: compresses
        # somewhat, as documents do, not to nothing.
        chunks: list[bytes] = []
        total = 0
        while total < size:
            text = " ".join(rng.choice(_WORDS) for _ in range(120)).encode()[:1024]
            chunk = text + rng.randbytes(64)
            chunks.append(chunk)
            total += len(chunk)
        pool.append(b"".join(chunks)[:size])
    return pool


_POOLS: dict[str, list[bytes]] = {}


def _pool(kind: str) -> list[bytes]:
    if kind not in _POOLS:
        _POOLS[kind] = _large_pool() if kind == "large" else _service_pool()
    return _POOLS[kind]


def iter_records(name: str, n: int) -> Iterator[Record]:
    """The first ``n`` records of workload ``name``, generated as they are iterated."""
    wl = workload(name)
    if wl.name.startswith("uniform"):
        _, _, size = wl.name.partition("/")
        value = b"x" * int(size or 100)
        for _ in range(n):
            yield (None, value, None)
        return
    kind = "large" if wl.name == "large" else "service"
    pool = _pool(kind)
    content_type = (
        "content-type",
        b"application/octet-stream" if kind == "large" else b"application/json",
    )
    # The same key and value sequence for every partition count: many-partitions/N
    # differ only in where the records go.
    rng = _rng(kind, "records")
    randrange = rng.randrange
    randbytes = rng.randbytes
    size = len(pool)
    for _ in range(n):
        key = b"user-%d" % randrange(USERS)
        value = pool[randrange(size)]
        yield (key, value, [("trace-id", randbytes(16)), content_type])


def records(name: str, n: int) -> list[Record]:
    """The first ``n`` records of workload ``name``, as a list (made before timing)."""
    return list(iter_records(name, n))


def describe(name: str, n: int) -> dict[str, object]:
    """What a run of ``n`` records of ``name`` holds: for the results file."""
    wl = workload(name)
    sample = records(name, min(n, 20_000))
    values = [len(v) for _, v, _ in sample]
    return {
        "name": name,
        "description": wl.description,
        "partitions": wl.partitions,
        "keyed": wl.keyed,
        "headers": wl.headers,
        "records": n,
        "value_bytes_mean": round(sum(values) / len(values), 1),
        "value_bytes_min": min(values),
        "value_bytes_max": max(values),
    }
