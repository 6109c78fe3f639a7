#!/usr/bin/env python3
"""Generate aiokafka_lite/protocol/messages/*.py from Kafka's message JSON files.

Dev tool only: the generated modules are committed and are the project's schema
definitions; nothing imports this script at run time. It then runs
tools/gen_bodies.py, which writes the typed bodies (protocol/bodies.py) from them.

    python tools/gen_schemas.py [--kafka-dir ../shared/kafka-protocol/message]

Version policy: each API is generated from the first version that is not listed
in the JSON's ``deprecatedVersions`` (KIP-896 deprecated exactly the versions
that no broker >= 2.1 needs) up to the newest version in the JSON. Fields that
exist only in the dropped versions are left out. Everything else the JSON says
that matters on the wire is kept: field order, type, versions, nullableVersions,
tag/taggedVersions, flexibleVersions, defaults, nested and common structs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "aiokafka_lite" / "protocol" / "messages"
DEFAULT_KAFKA_DIR = ROOT.parent / "shared" / "kafka-protocol" / "message"

# (CamelCase API name as in the JSON file names, Python module name)
APIS: list[str] = [
    "ApiVersions",
    "Metadata",
    "Produce",
    "Fetch",
    "ListOffsets",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "SaslHandshake",
    "SaslAuthenticate",
    "CreateTopics",
    "DeleteTopics",
    "CreatePartitions",
    "DescribeConfigs",
    "IncrementalAlterConfigs",
    "ListGroups",
    "DescribeGroups",
    "DeleteGroups",
    "OffsetDelete",
    "DeleteRecords",
    "OffsetForLeaderEpoch",
    "DescribeCluster",
    "DescribeAcls",
    "CreateAcls",
    "DeleteAcls",
    "DescribeProducers",
    "DescribeTransactions",
    "ListTransactions",
    "DescribeUserScramCredentials",
    "AlterUserScramCredentials",
    "DescribeLogDirs",
]

PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "bytes",
    "records",
    "uuid",
}


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return s.lower()


def upper_snake(name: str) -> str:
    return snake(name).upper()


def load_json(path: Path) -> dict[str, Any]:
    # Kafka's files are JSON plus whole-line // comments.
    text = "\n".join(
        "" if line.lstrip().startswith("//") else line for line in path.read_text().splitlines()
    )
    data: dict[str, Any] = json.loads(text)
    return data


def parse_range(text: str) -> tuple[int, int | None] | None:
    text = text.strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), None
    if "-" in text:
        a, b = text.split("-")
        return int(a), int(b)
    return int(text), int(text)


def overlaps(versions: str, lo: int, hi: int) -> bool:
    r = parse_range(versions)
    if r is None:
        return False
    a, b = r
    return a <= hi and (b is None or b >= lo)


def chosen_range(msg: dict[str, Any]) -> tuple[int, int]:
    valid = parse_range(msg["validVersions"])
    assert valid is not None and valid[1] is not None
    lo, hi = valid
    dep = msg.get("deprecatedVersions")
    if dep:
        d = parse_range(dep)
        assert d is not None and d[1] is not None and d[0] == lo
        lo = d[1] + 1
    assert hi is not None
    return lo, hi


def convert_default(field: dict[str, Any]) -> Any:
    """Python value for a JSON default, or ... when the JSON gives none."""
    if "default" not in field:
        return ...
    raw = field["default"]
    t = field["type"]
    if isinstance(raw, bool | int):
        return raw
    if raw == "null":
        return None
    if t == "bool":
        return {"true": True, "false": False}[raw.lower()]
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(raw, 0)
    if t == "float64":
        return float(raw)
    if t == "string":
        return raw
    raise ValueError(f"unsupported default {raw!r} for {field['name']} ({t})")


class Emitter:
    def __init__(self, lo: int, hi: int, common: dict[str, str]) -> None:
        self.lo = lo
        self.hi = hi
        self.common = common  # struct name -> python constant name

    def fields(self, fields: list[dict[str, Any]], indent: int) -> list[str]:
        out: list[str] = []
        for f in fields:
            if not overlaps(f["versions"], self.lo, self.hi):
                continue
            out.extend(self.field(f, indent))
        return out

    def field(self, f: dict[str, Any], indent: int) -> list[str]:
        pad = "    " * indent
        args = [repr(snake(f["name"])), repr(f["type"]), repr(f["versions"])]
        nv = f.get("nullableVersions")
        if nv and nv != "none":
            args.append(f"nullable={nv!r}")
        if "tag" in f:
            args.append(f"tag={f['tag']}")
            args.append(f"tagged={f['taggedVersions']!r}")
        default = convert_default(f)
        if default is not ...:
            args.append(f"default={default!r}")
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if elem in PRIMITIVES:
            return [f"{pad}Field({', '.join(args)}),"]
        if "fields" in f:
            lines = [f"{pad}Field(", f"{pad}    {', '.join(args)},", f"{pad}    fields=["]
            lines.extend(self.fields(f["fields"], indent + 2))
            lines.extend([f"{pad}    ],", f"{pad}),"])
            return lines
        # a reference to one of the file's commonStructs
        args.append(f"fields={self.common[elem]}")
        return [f"{pad}Field({', '.join(args)}),"]


def _dependency_order(structs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Common structs ordered so that each comes after the ones it refers to."""
    by_name = {cs["name"]: cs for cs in structs}
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()

    def refs(fields: list[dict[str, Any]]) -> list[str]:
        out: list[str] = []
        for f in fields:
            elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
            if elem in by_name and "fields" not in f:
                out.append(elem)
            out.extend(refs(f.get("fields", [])))
        return out

    def visit(cs: dict[str, Any]) -> None:
        if cs["name"] in seen:
            return
        seen.add(cs["name"])
        for name in refs(cs["fields"]):
            visit(by_name[name])
        ordered.append(cs)

    for cs in structs:
        visit(cs)
    return ordered


def spec_block(msg: dict[str, Any], lo: int, hi: int, var: str, kind: str) -> list[str]:
    common: dict[str, str] = {}
    lines: list[str] = []
    for cs in msg.get("commonStructs", []):
        common[cs["name"]] = f"_{kind.upper()}_{upper_snake(cs['name'])}"
    em = Emitter(lo, hi, common)
    for cs in _dependency_order(msg.get("commonStructs", [])):
        lines.append(f"{common[cs['name']]} = (")
        lines.extend(em.fields(cs["fields"], 1))
        lines.append(")")
        lines.append("")
    lines.append(f"{var} = MessageSpec(")
    lines.append(f"    {msg['name']!r},")
    lines.append(f"    {msg['apiKey']},")
    lines.append(f"    {kind!r},")
    lines.append(f"    valid={(f'{lo}-{hi}' if lo != hi else str(lo))!r},")
    lines.append(f"    flexible={msg['flexibleVersions']!r},")
    if msg.get("latestVersionUnstable"):
        lines.append("    latest_unstable=True,")
    lines.append("    fields=[")
    lines.extend(em.fields(msg["fields"], 2))
    lines.append("    ],")
    lines.append(")")
    return lines


def generate(api: str, kafka_dir: Path) -> tuple[str, str, int, tuple[int, int]]:
    req = load_json(kafka_dir / f"{api}Request.json")
    resp = load_json(kafka_dir / f"{api}Response.json")
    assert req["apiKey"] == resp["apiKey"]
    lo, hi = chosen_range(req)
    rvalid = parse_range(resp["validVersions"])
    assert rvalid is not None and rvalid[1] == hi, f"{api}: request/response ranges differ"
    module = snake(api)
    note = f"Kafka's JSON: validVersions {req['validVersions']}"
    if req.get("deprecatedVersions"):
        note += f", deprecatedVersions {req['deprecatedVersions']} (left out)"
    lines = [
        f'"""{api} (API key {req["apiKey"]}): request and response schemas.',
        "",
        f"Generated by tools/gen_schemas.py from Kafka's {api}Request.json and",
        f"{api}Response.json; versions {lo}-{hi}.",
        f"{note}.",
        '"""',
        "",
        "from aiokafka_lite.protocol.schema import Field, MessageSpec",
        "",
        f"API_KEY = {req['apiKey']}",
        f"NAME = {api!r}",
        "",
    ]
    lines += spec_block(req, lo, hi, "REQUEST", "request")
    lines.append("")
    lines += spec_block(resp, lo, hi, "RESPONSE", "response")
    return module, "\n".join(lines) + "\n", req["apiKey"], (lo, hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--kafka-dir", type=Path, default=DEFAULT_KAFKA_DIR)
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    modules: list[tuple[str, str, int]] = []
    written: list[Path] = []
    for api in APIS:
        module, text, key, (lo, hi) = generate(api, args.kafka_dir)
        path = out / f"{module}.py"
        path.write_text(text)
        written.append(path)
        modules.append((api, module, key))
        print(f"{api:26} key {key:3}  versions {lo}-{hi}  -> {path.relative_to(ROOT)}")
    init = [
        '"""The project\'s Kafka message schemas, one module per API.',
        "",
        "Generated by tools/gen_schemas.py.",
        '"""',
        "",
        "from types import ModuleType",
        "",
        "from aiokafka_lite.protocol.messages import (",
        *[f"    {m}," for _, m, _ in sorted(modules, key=lambda x: x[1])],
        ")",
        "",
        "#: Every API module, in API-key order.",
        "MODULES: tuple[ModuleType, ...] = (",
        *[f"    {m}," for _, m, _ in sorted(modules, key=lambda x: x[2])],
        ")",
        "",
        '__all__ = ["MODULES"]',
    ]
    init_path = out / "__init__.py"
    init_path.write_text("\n".join(init) + "\n")
    written.append(init_path)
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.exists():
        subprocess.run([str(ruff), "format", "-q", *map(str, written)], check=False)
    if out.resolve() == OUT_DIR:
        # The typed bodies (protocol/bodies.py) are made from these schemas: again too.
        subprocess.run([sys.executable, str(ROOT / "tools" / "gen_bodies.py")], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
