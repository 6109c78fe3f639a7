"""TLS end to end: a CA made by the openssl CLI, socat terminating TLS in front of Tansu.

Tansu advertises the TLS port (``--advertised-listener-url tcp://localhost:<tls port>``),
so every connection a client opens after reading metadata goes through TLS as well. The
server certificate names ``localhost`` only (no IP address), which gives the hostname
verification cases: connecting by ``127.0.0.1`` must fail while the check is on.

confluent-kafka (librdkafka) connects through the same set-up first, as the control: it
shows the set-up works, and that it refuses what we expect ours to refuse.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.connection import connect
from aiokafka_lite.producer import Producer
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.security import SecurityConfig, create_ssl_context
from tests.reliability.clients import (
    confluent_consume,
    confluent_errors,
    confluent_round_trip,
    ours_consume,
    ours_produce,
)
from tests.reliability.stack import SecureStack
from tests.reliability.tls import Pki, make_pki

# A skip with the reason where a tool is missing; a failure in CI (CI=true).
pytestmark = pytest.mark.requires_tool("openssl", "socat", install="apt-get install openssl socat")

N = 50


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), hostnames=("localhost",))


@pytest.fixture(scope="module")
def stack(pki: Pki) -> Iterator[SecureStack]:
    with SecureStack(pki=pki) as running:
        yield running


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def _values(n: int = N) -> list[bytes]:
    return [f"tls-{i:04d}-{uuid.uuid4().hex[:6]}".encode() for i in range(n)]


def _cf_conf(bootstrap: str, ca: Path, *, verify_hostname: bool = True) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https" if verify_hostname else "none",
    }


def _ssl(ca: Path, *, check_hostname: bool = True) -> dict[str, Any]:
    return {
        "security_protocol": "SSL",
        "ssl_context": create_ssl_context(str(ca), check_hostname=check_hostname),
    }


# --- the control: confluent-kafka through the same set-up -----------------------------


def test_control_confluent_round_trip_over_tls(stack: SecureStack, pki: Pki) -> None:
    values = _values()
    got = confluent_round_trip(_cf_conf(stack.bootstrap_servers, pki.ca_cert), _topic(), values)
    assert sorted(got) == sorted(values)


def test_control_confluent_refuses_wrong_ca(stack: SecureStack, pki: Pki) -> None:
    errs = confluent_errors(_cf_conf(stack.bootstrap_servers, pki.other_ca_cert), timeout=15)
    assert errs, "confluent-kafka connected although it trusts only an unrelated CA"
    assert "certificate verify failed" in errs[0].str(), errs


def test_control_confluent_refuses_hostname_mismatch(stack: SecureStack, pki: Pki) -> None:
    errs = confluent_errors(_cf_conf(stack.bootstrap_via("127.0.0.1"), pki.ca_cert), timeout=15)
    assert errs, "confluent-kafka accepted a certificate that does not name 127.0.0.1"
    # librdkafka names this failure _SSL or, now and then, _TRANSPORT (measured: twice in
    # about ten runs, both "SSL routines::certificate verify failed"); what it says counts.
    assert errs[0].name() in ("_SSL", "_TRANSPORT"), errs
    assert "certificate verify failed" in errs[0].str(), errs


# --- ours ---------------------------------------------------------------------------


async def test_round_trip_with_hostname_verification(stack: SecureStack, pki: Pki) -> None:
    topic, values = _topic(), _values()
    placed = await ours_produce(stack.bootstrap_servers, topic, values, **_ssl(pki.ca_cert))
    assert len(placed) == len(values) and all(offset >= 0 for _, offset in placed)
    got = await ours_consume(stack.bootstrap_servers, topic, len(values), **_ssl(pki.ca_cert))
    assert sorted(got) == sorted(values)
    # confluent-kafka reads back over TLS what we wrote over TLS
    conf = _cf_conf(stack.bootstrap_servers, pki.ca_cert)
    theirs = await asyncio.to_thread(confluent_consume, conf, topic, len(values))
    assert sorted(theirs) == sorted(values)


async def test_connection_over_tls_speaks_kafka(stack: SecureStack, pki: Pki) -> None:
    security = SecurityConfig(
        security_protocol="SSL", ssl_context=create_ssl_context(str(pki.ca_cert))
    )
    conn = await connect("localhost", stack.port, security=security, request_timeout_ms=10000)
    try:
        response = await conn.send(int(ApiKey.METADATA), {"topics": None})
        [broker] = response["brokers"]
        # the broker sends clients back to the TLS port, by the certificate's name
        assert (broker["host"], broker["port"]) == ("localhost", stack.port)
    finally:
        conn.close()
        await conn.wait_closed()


async def test_hostname_mismatch_is_refused_with_a_clear_error(
    stack: SecureStack, pki: Pki
) -> None:
    security = SecurityConfig(
        security_protocol="SSL", ssl_context=create_ssl_context(str(pki.ca_cert))
    )
    with pytest.raises(errors.KafkaConnectionError) as info:
        await connect("127.0.0.1", stack.port, security=security, connect_timeout_ms=10000)
    message = str(info.value)
    assert f"127.0.0.1:{stack.port}" in message
    assert "certificate verification failed" in message and "mismatch" in message, message


async def test_ssl_server_hostname_override_verifies_the_given_name(
    stack: SecureStack, pki: Pki
) -> None:
    security = SecurityConfig(
        security_protocol="SSL",
        ssl_context=create_ssl_context(str(pki.ca_cert)),
        ssl_server_hostname="localhost",
    )
    conn = await connect("127.0.0.1", stack.port, security=security, connect_timeout_ms=10000)
    try:
        assert int(ApiKey.METADATA) in conn.api_versions
    finally:
        conn.close()
        await conn.wait_closed()


async def test_hostname_verification_off_accepts_the_ip_address(
    stack: SecureStack, pki: Pki
) -> None:
    bootstrap = stack.bootstrap_via("127.0.0.1")
    topic, values = _topic(), _values(20)
    options = _ssl(pki.ca_cert, check_hostname=False)
    await ours_produce(bootstrap, topic, values, **options)
    got = await ours_consume(
        bootstrap, topic, len(values), **_ssl(pki.ca_cert, check_hostname=False)
    )
    assert sorted(got) == sorted(values)


@pytest.mark.parametrize("check_hostname", [True, False], ids=["hostname-on", "hostname-off"])
async def test_wrong_ca_is_refused_with_a_clear_error(
    stack: SecureStack, pki: Pki, check_hostname: bool
) -> None:
    # Turning the hostname check off must not turn the chain check off.
    context = create_ssl_context(str(pki.other_ca_cert), check_hostname=check_hostname)
    security = SecurityConfig(security_protocol="SSL", ssl_context=context)
    with pytest.raises(errors.KafkaConnectionError) as info:
        await connect("localhost", stack.port, security=security, connect_timeout_ms=10000)
    message = str(info.value)
    assert "certificate verification failed" in message, message
    assert "issuer" in message or "self-signed" in message or "self signed" in message, message


async def test_producer_with_wrong_ca_fails_within_its_timeout(
    stack: SecureStack, pki: Pki
) -> None:
    producer = Producer(
        bootstrap_servers=stack.bootstrap_servers,
        request_timeout_ms=3000,
        **_ssl(pki.other_ca_cert),
    )
    started = time.monotonic()
    with pytest.raises(errors.KafkaConnectionError):
        await asyncio.wait_for(producer.start(), 30)
    elapsed = time.monotonic() - started
    await producer.stop()
    assert elapsed < 3 + 10, f"start() took {elapsed:.1f}s with request_timeout_ms=3000"


async def test_wrong_ca_fails_start_at_once_with_the_certificate_error(
    stack: SecureStack, pki: Pki
) -> None:
    # Default timeouts (request_timeout_ms=30000): a certificate that does not verify
    # will not verify on a second attempt, so start() fails on the first one.
    producer = Producer(bootstrap_servers=stack.bootstrap_servers, **_ssl(pki.other_ca_cert))
    started = time.monotonic()
    with pytest.raises(errors.KafkaConnectionError) as info:
        await asyncio.wait_for(producer.start(), 30)
    elapsed = time.monotonic() - started
    await producer.stop()
    assert elapsed < 2, f"start() took {elapsed:.1f}s"
    assert "certificate verification failed" in str(info.value), info.value
    assert isinstance(info.value.__cause__, ssl.SSLCertVerificationError)


async def test_producer_error_for_a_wrong_ca_names_the_cause(stack: SecureStack, pki: Pki) -> None:
    # A 1 s reconnect backoff and a fast metadata retry: the bootstrap loop sees one real
    # TLS failure per second and many "in backoff" refusals in between.
    producer = Producer(
        bootstrap_servers=stack.bootstrap_servers,
        request_timeout_ms=2500,
        reconnect_backoff_ms=1000,
        reconnect_backoff_max_ms=1000,
        retry_backoff_ms=10,
        **_ssl(pki.other_ca_cert),
    )
    with pytest.raises(errors.KafkaConnectionError) as info:
        await asyncio.wait_for(producer.start(), 30)
    await producer.stop()
    assert "certificate verification failed" in str(info.value), info.value


async def test_plaintext_client_on_the_tls_port_fails_cleanly(stack: SecureStack) -> None:
    started = time.monotonic()
    with pytest.raises(errors.KafkaConnectionError):
        await connect("localhost", stack.port, request_timeout_ms=5000, connect_timeout_ms=5000)
    assert time.monotonic() - started < 5 + 5
