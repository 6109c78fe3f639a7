"""Helpers shared by the integration tests (no tests of their own)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from aiokafka_lite import errors
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey, RequestHeader

__all__ = [
    "CLOSE",
    "RequestLog",
    "SaslBroker",
    "Script",
    "ScriptedBroker",
    "api_versions_body",
    "lacks_api",
    "produce_one_by_one",
    "serve_requests",
    "unique",
]


def unique(prefix: str) -> str:
    """A fresh topic or group name."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def produce_one_by_one(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    base_ts: int | None = None,
    *,
    prefix: str = "v",
) -> None:
    """Records ``<prefix>0``, ``<prefix>1``, ... each in a batch of its own (the send is
    awaited before the next); timestamps ``base_ts`` + 1 s apart when given."""
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for i in range(count):
            ts = None if base_ts is None else base_ts + i * 1000
            await producer.send_and_wait(
                topic, f"{prefix}{i}".encode(), partition=partition, timestamp_ms=ts
            )


# --- what goes over the wire -----------------------------------------------------------------


class RequestLog:
    """A ``FaultProxy`` hook that decodes every request clients send through the proxy.

    ``proxy.set_hook(log)``; then ``log.bodies(ApiKey.PRODUCE)`` are the Produce requests
    as the broker received them, decoded with the protocol's schemas. Chunks are
    forwarded unchanged; requests are cut out of them with their size prefixes, per
    connection. The hook runs on the proxy's thread.
    """

    def __init__(self) -> None:
        self._buffers: dict[int, bytearray] = {}
        self.requests: list[tuple[RequestHeader, dict[str, Any]]] = []
        self.errors: list[str] = []

    def __call__(self, link: int, direction: str, data: bytes) -> bytes:
        if direction == "upstream":
            buf = self._buffers.setdefault(link, bytearray())
            buf += data
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4 : 4 + size])
                del buf[: 4 + size]
                try:
                    self.requests.append(api.decode_request(frame))
                except Exception as exc:  # recorded, for the test to see
                    self.errors.append(f"connection {link}: {exc!r}")
        return data

    def bodies(self, api_key: int) -> list[dict[str, Any]]:
        assert self.errors == [], self.errors
        return [body for header, body in list(self.requests) if header.api_key == api_key]


# --- fake brokers: one request frame in, one response frame out ---------------------------

#: What an ``answer`` callback returns to close the connection instead of answering.
CLOSE: Any = object()


def api_versions_body(
    missing: Collection[int] = (), max_versions: dict[int, int] | None = None
) -> dict[str, Any]:
    """An ApiVersions answer listing every API we support but ``missing``, each up to
    its version in ``max_versions`` when it has one there."""
    caps = max_versions or {}
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": min(hi, caps.get(k, hi))}
            for k, (lo, hi) in sorted(api.SUPPORTED_VERSIONS.items())
            if k not in missing
        ],
    }


async def serve_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: Callable[[RequestHeader, dict[str, Any]], dict[str, Any] | None],
) -> None:
    """Answer each request with ``answer(header, body)`` until the peer goes away.

    ``None`` sends nothing (the client's timeout must end its wait); :data:`CLOSE`
    closes the connection.
    """
    try:
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            header, body = api.decode_request(await reader.readexactly(size))
            response = answer(header, body)
            if response is CLOSE:
                break
            if response is None:
                continue
            payload = api.encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
            writer.write(struct.pack(">i", len(payload)) + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


Script = Callable[[RequestHeader, dict[str, Any], int], "dict[str, Any] | None"]


class ScriptedBroker:
    """One node (id 1), the controller and every coordinator; scripts answer the rest."""

    NODE = 1

    def __init__(
        self, missing_apis: set[int] | None = None, max_versions: dict[int, int] | None = None
    ) -> None:
        self.missing = missing_apis or set()
        self.max_versions = max_versions or {}
        self.scripts: dict[int, Script] = {}
        self.calls: dict[int, int] = {}
        self.topics: dict[str, int] = {}  # name -> partitions
        self.server: asyncio.Server | None = None
        self.port = 0
        self.writers: list[asyncio.StreamWriter] = []
        # Requests a script left unanswered, with the connection each came in on.
        self.unanswered: list[tuple[RequestHeader, asyncio.StreamWriter]] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        """Listen on ``port`` (0: any free one)."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        key = header.api_key
        if key == ApiKey.API_VERSIONS:
            return api_versions_body(self.missing, self.max_versions)
        if key == ApiKey.METADATA:
            wanted = (
                list(self.topics) if body["topics"] is None else [t["name"] for t in body["topics"]]
            )
            return {
                "brokers": [{"node_id": self.NODE, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "scripted",
                "controller_id": self.NODE,
                "topics": [
                    {
                        "error_code": 0 if name in self.topics else 3,
                        "name": name,
                        "partitions": [
                            {
                                "partition_index": p,
                                "leader_id": self.NODE,
                                "leader_epoch": 0,
                                "replica_nodes": [self.NODE],
                                "isr_nodes": [self.NODE],
                            }
                            for p in range(self.topics.get(name, 0))
                        ],
                    }
                    for name in wanted
                ],
            }
        if key == ApiKey.FIND_COORDINATOR:
            entry = {"error_code": 0, "node_id": self.NODE, "host": "127.0.0.1", "port": self.port}
            return {**entry, "coordinators": [{**entry, "key": body.get("key", "")}]}
        return None

    def answer_late(self, response: dict[str, Any]) -> None:
        """Answer every request left unanswered so far with ``response``, now."""
        late, self.unanswered = self.unanswered, []
        for header, writer in late:
            payload = api.encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
            writer.write(struct.pack(">i", len(payload)) + payload)

    def _answer(
        self, header: RequestHeader, body: dict[str, Any], writer: asyncio.StreamWriter
    ) -> dict[str, Any] | None:
        answer = self._builtin(header, body)
        if answer is None:
            count = self.calls[header.api_key] = self.calls.get(header.api_key, 0) + 1
            script = self.scripts.get(header.api_key)
            answer = None if script is None else script(header, body, count)
        if answer is None:
            self.unanswered.append((header, writer))
        return answer  # None: no answer, the client's timeout must end the wait

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        await serve_requests(
            reader, writer, lambda header, body: self._answer(header, body, writer)
        )


class AdvertisingBroker(ScriptedBroker):
    """Metadata names the brokers in ``advertised`` ((node id, port) pairs)."""

    advertised: list[tuple[int, int]] = []

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if header.api_key == ApiKey.METADATA and answer is not None:
            answer["brokers"] = [
                {"node_id": node, "host": "127.0.0.1", "port": port}
                for node, port in self.advertised
            ]
        return answer


class SaslBroker(AdvertisingBroker):
    """SASL PLAIN, accepting every client or (``refuse``) none; metadata names the
    brokers of ``advertised`` ((node id, port) pairs), node 2 leading every partition
    (a cluster whose brokers do not all accept the same credentials)."""

    def __init__(self, *, refuse: bool) -> None:
        super().__init__()
        self.scripts[ApiKey.SASL_HANDSHAKE] = lambda h, b, n: {
            "error_code": 0,
            "mechanisms": ["PLAIN"],
        }
        self.scripts[ApiKey.SASL_AUTHENTICATE] = lambda h, b, n: {
            "error_code": 58 if refuse else 0,
            "error_message": "Invalid username or password" if refuse else None,
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if header.api_key == ApiKey.METADATA and answer is not None:
            for topic in answer["topics"]:
                for partition in topic["partitions"]:
                    partition["leader_id"] = 2
                    partition["replica_nodes"] = partition["isr_nodes"] = [2]
        return answer


#: The client options that log in to a `SaslBroker`.
SASL_PLAIN_CLIENT: dict[str, Any] = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "u",
    "sasl_plain_password": "p",
}


@contextlib.asynccontextmanager
async def leader_refusing_credentials(topic: str) -> AsyncIterator[SaslBroker]:
    """A cluster whose brokers do not all accept the same credentials: node 1 (yielded,
    the bootstrap broker) accepts every client, node 2 leads ``topic`` (one partition)
    and refuses them."""
    front, leader = SaslBroker(refuse=False), SaslBroker(refuse=True)
    await front.start()
    await leader.start()
    try:
        front.advertised = leader.advertised = [(1, front.port), (2, leader.port)]
        front.topics = leader.topics = {topic: 1}
        yield front
    finally:
        await front.stop()
        await leader.stop()


#: The broker versions the deviations were measured on.
BROKER_VERSIONS = {"tansu": "Tansu 0.6.0", "noida": "noida-db 0.2.3"}


def lacks_api(expect_deviation: Any, kind: str, api_name: str) -> Any:
    """The deviation block of a broker without an API (not in its ApiVersions): the
    call raises UnsupportedVersionError naming the API."""
    return expect_deviation(
        kind,
        f"{BROKER_VERSIONS[kind]} has no {api_name} API",
        raises=errors.UnsupportedVersionError,
        match=f"the {api_name} API",
    )
