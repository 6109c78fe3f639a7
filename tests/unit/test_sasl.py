"""SASL mechanisms (sans-IO) and the security configuration."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import ssl

import pytest

from aiokafka_lite import errors
from aiokafka_lite.sasl import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MIN_ITERATIONS,
    OAuthBearerMechanism,
    PlainMechanism,
    ScramMechanism,
)
from aiokafka_lite.security import SecurityConfig, create_ssl_context, fetch_oauth_token

# --- a small server-side SCRAM (RFC 5802) used to check the client end to end ------


class ScramServer:
    """Server side of one SCRAM exchange, written independently of the client."""

    def __init__(
        self,
        mechanism: str,
        users: dict[str, str],
        *,
        iterations: int = 4096,
        server_nonce: str | None = None,
    ) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.users = users
        self.iterations = iterations
        self.server_nonce = server_nonce or base64.b64encode(os.urandom(18)).decode()
        self.salt = os.urandom(16)
        self.user: str | None = None
        self.auth_prefix = ""
        self.nonce = ""

    def _keys(self, password: str) -> tuple[bytes, bytes]:
        salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        return stored_key, server_key

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,"), text
        bare = text[3:]
        attrs = dict(part.split("=", 1) for part in bare.split(","))
        self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        self.nonce = attrs["r"] + self.server_nonce
        salt = base64.b64encode(self.salt).decode()
        server_first = f"r={self.nonce},s={salt},i={self.iterations}"
        self.auth_prefix = f"{bare},{server_first}"
        return server_first.encode()

    def final(self, client_final: bytes) -> tuple[bool, bytes]:
        """Return (authenticated, server-final message)."""
        text = client_final.decode()
        without_proof, _, proof_b64 = text.rpartition(",p=")
        attrs = dict(part.split("=", 1) for part in without_proof.split(","))
        if attrs["c"] != "biws" or attrs["r"] != self.nonce:
            return False, b"e=channel-bindings-dont-match"
        password = self.users.get(self.user or "")
        if password is None:
            return False, b"e=unknown-user"
        stored_key, server_key = self._keys(password)
        auth_message = f"{self.auth_prefix},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = base64.b64decode(proof_b64)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if hashlib.new(self.hash, client_key).digest() != stored_key:
            return False, b"e=invalid-proof"
        server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return True, b"v=" + base64.b64encode(server_signature)


def run_scram(client: ScramMechanism, server: ScramServer) -> bool:
    server_first = server.first(client.first_message())
    client_final = client.step(server_first)
    assert client_final is not None
    ok, server_final = server.final(client_final)
    if ok:
        assert client.step(server_final) is None
        assert client.complete
    return ok


# --- SCRAM -------------------------------------------------------------------

RFC7677_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
# As published in RFC 7677 section 3 (and recomputed independently with hashlib/hmac).
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_client() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")


def test_scram_sha256_rfc7677_vector() -> None:
    client = rfc7677_client()
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not client.complete
    assert client.step(RFC7677_SERVER_FINAL) is None
    assert client.complete


@pytest.mark.parametrize(
    "server_final",
    [
        b"v=6rriTRBi23WpRCw4epTB+WKgLIozvl1uSh6gGsd6MEs=",  # a wrong signature
        b"v=" + base64.b64encode(b"\0" * 32),
        b"v=" + base64.b64encode(b"short"),
    ],
)
def test_scram_wrong_server_signature_fails(server_final: bytes) -> None:
    client = rfc7677_client()
    client.first_message()
    client.step(RFC7677_SERVER_FIRST)
    with pytest.raises(errors.AuthenticationFailedError, match="server signature"):
        client.step(server_final)
    assert not client.complete


def test_scram_server_error_in_final_message() -> None:
    client = rfc7677_client()
    client.first_message()
    client.step(RFC7677_SERVER_FIRST)
    with pytest.raises(errors.AuthenticationFailedError, match="invalid-proof"):
        client.step(b"e=invalid-proof")


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000", "iteration"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x", "iteration"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not*base64,i=4096", "base64"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "s="),
        (b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "extension"),
        (b"e=other-error", "other-error"),
        (b"garbage", "malformed"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_scram_bad_server_first(server_first: bytes, match: str) -> None:
    client = rfc7677_client()
    client.first_message()
    with pytest.raises(errors.AuthenticationFailedError, match=match):
        client.step(server_first)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_against_server(mechanism: str) -> None:
    server = ScramServer(mechanism, {"alice": "s3cr3t"})
    assert run_scram(ScramMechanism(mechanism, "alice", "s3cr3t"), server)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_is_rejected_by_server(mechanism: str) -> None:
    server = ScramServer(mechanism, {"alice": "s3cr3t"})
    assert not run_scram(ScramMechanism(mechanism, "alice", "wrong"), server)


def test_scram_sha512_lengths_and_username_escaping() -> None:
    server = ScramServer("SCRAM-SHA-512", {"a=b,c": "pw"})
    client = ScramMechanism("SCRAM-SHA-512", "a=b,c", "pw", nonce="abc")
    first = client.first_message()
    assert first == b"n,,n=a=3Db=2Cc,r=abc"
    final = client.step(server.first(first))
    assert final is not None
    proof = base64.b64decode(final.rpartition(b",p=")[2])
    assert len(proof) == 64
    ok, server_final = server.final(final)
    assert ok
    assert client.step(server_final) is None


def test_scram_default_nonce_is_random_and_safe() -> None:
    one = ScramMechanism("SCRAM-SHA-256", "u", "p").first_message()
    two = ScramMechanism("SCRAM-SHA-256", "u", "p").first_message()
    assert one != two
    nonce = one.decode().split(",r=")[1]
    assert "," not in nonce and len(nonce) >= 24


def test_scram_state_errors() -> None:
    client = rfc7677_client()
    with pytest.raises(errors.IllegalStateError):
        client.step(RFC7677_SERVER_FIRST)
    client.first_message()
    with pytest.raises(errors.IllegalStateError):
        client.first_message()
    client.step(RFC7677_SERVER_FIRST)
    client.step(RFC7677_SERVER_FINAL)
    with pytest.raises(errors.AuthenticationFailedError, match="after authentication"):
        client.step(b"v=more")


def test_scram_bad_arguments() -> None:
    with pytest.raises(errors.ConfigurationError, match="SCRAM"):
        ScramMechanism("SCRAM-SHA-1", "u", "p")
    with pytest.raises(errors.ConfigurationError, match="nonce"):
        ScramMechanism("SCRAM-SHA-256", "u", "p", nonce="a,b")


_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="


@pytest.mark.parametrize(
    ("iterations", "shown"),
    [
        ("4095", "4095"),
        ("16385", "16385"),
        ("1000000000", "1000000000"),
        ("9" * 30, "9" * 30),
        ("9" * 5000, "9" * 40 + "..."),  # int() of it would raise ValueError
    ],
)
def test_scram_iteration_count_outside_kafkas_bounds_is_refused(
    iterations: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_hashing(*args: object) -> bytes:
        raise AssertionError("PBKDF2 must not run for a refused iteration count")

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", no_hashing)
    server_first = f"r=rOprNGfwEbeRWgbNEkqOxyz,s={_SALT},i={iterations}".encode()
    for call in ("prepare_step", "step"):
        client = rfc7677_client()
        client.first_message()
        with pytest.raises(errors.AuthenticationFailedError) as info:
            getattr(client, call)(server_first)
        message = str(info.value)
        assert f"asks for {shown} PBKDF2 iterations" in message
        assert "4096 to 16384" in message


def test_scram_iteration_bounds_are_kafkas_and_adjustable() -> None:
    assert (SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS) == (4096, 16384)
    for count in (4096, 16384):
        server = ScramServer("SCRAM-SHA-256", {"alice": "pw"}, iterations=count)
        assert run_scram(ScramMechanism("SCRAM-SHA-256", "alice", "pw"), server)
    server = ScramServer("SCRAM-SHA-256", {"alice": "pw"}, iterations=20000)
    client = ScramMechanism("SCRAM-SHA-256", "alice", "pw", max_iterations=20000)
    assert run_scram(client, server)
    client = ScramMechanism("SCRAM-SHA-256", "alice", "pw", max_iterations=8192)
    client.first_message()
    server_first = f"r={client._client_nonce}x,s={_SALT},i=8193".encode()
    with pytest.raises(errors.AuthenticationFailedError, match="only 4096 to 8192"):
        client.step(server_first)
    with pytest.raises(errors.ConfigurationError, match="min_iterations"):
        ScramMechanism("SCRAM-SHA-256", "u", "p", min_iterations=8192, max_iterations=4096)
    with pytest.raises(errors.ConfigurationError, match="max_iterations"):
        ScramMechanism("SCRAM-SHA-256", "u", "p", max_iterations=0)


def test_scram_non_ascii_digits_are_not_an_iteration_count() -> None:
    client = rfc7677_client()
    client.first_message()
    with pytest.raises(errors.AuthenticationFailedError, match="bad iteration count"):
        client.step(f"r=rOprNGfwEbeRWgbNEkqOxyz,s={_SALT},i=\u0664\u0660\u0669\u0666".encode())


def test_scram_prepare_step_hands_out_the_pbkdf2(monkeypatch: pytest.MonkeyPatch) -> None:
    """prepare_step returns PBKDF2 as work to run elsewhere; step then only uses it."""
    calls: list[int] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
        calls.append(iterations)
        return real(name, password, salt, iterations)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    client = rfc7677_client()
    client.first_message()
    work = client.prepare_step(RFC7677_SERVER_FIRST)
    assert work is not None and calls == []
    work()
    assert calls == [4096]
    # The RFC's answer, with no second PBKDF2.
    assert client.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert calls == [4096]
    # Nothing costly in the final step, nor in PLAIN's or OAUTHBEARER's.
    assert client.prepare_step(RFC7677_SERVER_FINAL) is None
    assert client.step(RFC7677_SERVER_FINAL) is None and client.complete
    plain = PlainMechanism("u", "p")
    plain.first_message()
    assert plain.prepare_step(b"") is None
    # Without prepare_step, step does the work itself.
    client = rfc7677_client()
    client.first_message()
    assert client.step(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert calls == [4096, 4096]


def test_scram_repr_hides_password() -> None:
    client = ScramMechanism("SCRAM-SHA-256", "alice", "hunter2")
    assert "hunter2" not in repr(client)
    assert "alice" in repr(client)


# --- SASLprep ------------------------------------------------------------------


def test_scram_uses_password_bytes_as_given() -> None:
    # Like Kafka's Java client and librdkafka: no SASLprep, the raw UTF-8 is hashed.
    server = ScramServer("SCRAM-SHA-256", {"bob": "I\u00adX"})
    assert run_scram(ScramMechanism("SCRAM-SHA-256", "bob", "I\u00adX"), server)
    assert not run_scram(ScramMechanism("SCRAM-SHA-256", "bob", "IX"), server)


# --- PLAIN ---------------------------------------------------------------------


def test_plain_message_and_completion() -> None:
    plain = PlainMechanism("alice", "s3cr3t")
    assert plain.first_message() == b"\0alice\0s3cr3t"
    assert not plain.complete
    assert plain.step(b"") is None
    assert plain.complete
    assert "s3cr3t" not in repr(plain)


def test_plain_with_authzid_and_nul_rejected() -> None:
    assert PlainMechanism("a", "b", authzid="z").first_message() == b"z\0a\0b"
    with pytest.raises(errors.ConfigurationError, match="NUL"):
        PlainMechanism("a\0", "b")


# --- OAUTHBEARER -----------------------------------------------------------------


def test_oauthbearer_first_message() -> None:
    mech = OAuthBearerMechanism("eyJhbGciOi.eyJzdWIi.sig-_")
    assert mech.first_message() == b"n,,\x01auth=Bearer eyJhbGciOi.eyJzdWIi.sig-_\x01\x01"
    assert mech.step(b"") is None
    assert mech.complete


def test_oauthbearer_extensions() -> None:
    mech = OAuthBearerMechanism("tok", {"traceId": "123", "logicalCluster": "lkc-1"})
    assert mech.first_message() == (
        b"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01traceId=123\x01\x01"
    )


def test_oauthbearer_server_error_flow() -> None:
    mech = OAuthBearerMechanism("tok")
    mech.first_message()
    assert mech.step(b'{"status":"invalid_token"}') == b"\x01"
    assert mech.server_error == '{"status":"invalid_token"}'
    with pytest.raises(errors.AuthenticationFailedError, match="invalid_token"):
        mech.step(b"")


@pytest.mark.parametrize(
    ("token", "extensions"),
    [
        ("", None),
        ("has space", None),
        ("tok", {"auth": "x"}),
        ("tok", {"bad-key": "x"}),
        ("tok", {"key": "\x01"}),
    ],
)
def test_oauthbearer_invalid_input(token: str, extensions: dict[str, str] | None) -> None:
    # The message says which part is bad: the token, or the extension by its name.
    named = "token" if extensions is None else repr(next(iter(extensions)))
    with pytest.raises(errors.ConfigurationError, match=f"OAUTHBEARER .*{re.escape(named)}"):
        OAuthBearerMechanism(token, extensions)


# --- SecurityConfig ------------------------------------------------------------------


def test_security_defaults_plaintext() -> None:
    config = SecurityConfig()
    assert config.security_protocol == "PLAINTEXT"
    assert not config.uses_ssl and not config.uses_sasl
    assert config.ssl_context is None


def test_security_ssl_gets_default_context() -> None:
    config = SecurityConfig(security_protocol="ssl")
    assert config.security_protocol == "SSL"
    assert isinstance(config.ssl_context, ssl.SSLContext)
    assert config.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert config.ssl_context.check_hostname


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"security_protocol": "TLS"}, "security_protocol"),
        ({"security_protocol": "SASL_PLAINTEXT"}, "sasl_mechanism"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"},
            "sasl_mechanism must be one of",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
            "sasl_plain_username",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": "u",
            },
            "sasl_plain_password",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"},
            "token_provider",
        ),
        ({"sasl_mechanism": "PLAIN"}, "SASL_PLAINTEXT"),
        ({"ssl_context": ssl.create_default_context()}, "SSL or SASL_SSL"),
        ({"security_protocol": "SSL", "ssl_context": "yes"}, "SSLContext"),
    ],
)
def test_security_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=match):
        SecurityConfig(**kwargs)  # type: ignore[arg-type]


def test_security_repr_masks_password(caplog: pytest.LogCaptureFixture) -> None:
    config = SecurityConfig(
        security_protocol="SASL_SSL",
        sasl_mechanism="scram-sha-512",
        sasl_plain_username="alice",
        sasl_plain_password="hunter2",
    )
    assert config.sasl_mechanism == "SCRAM-SHA-512"
    for text in (repr(config), str(config), f"{config}", repr([config])):
        assert "hunter2" not in text
        assert "alice" in text and "***" in text
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").debug("config %r", config)
    assert "hunter2" not in caplog.text


def test_security_config_is_frozen() -> None:
    config = SecurityConfig()
    with pytest.raises(AttributeError):
        config.security_protocol = "SSL"  # type: ignore[misc]


def test_create_ssl_context_options(tmp_path: os.PathLike[str]) -> None:
    context = create_ssl_context(check_hostname=False)
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(errors.ConfigurationError, match="SSL context"):
        create_ssl_context(cafile=os.path.join(tmp_path, "missing.pem"))
    with pytest.raises(errors.ConfigurationError, match="certfile"):
        create_ssl_context(keyfile="key.pem")


class _AsyncProvider:
    async def token(self) -> str:
        return "tok-async"

    def extensions(self) -> dict[str, str]:
        return {"traceId": "7"}


async def test_fetch_oauth_token_variants() -> None:
    assert await fetch_oauth_token(lambda: "tok") == ("tok", {})

    async def coro() -> str:
        return "tok-coro"

    assert await fetch_oauth_token(coro) == ("tok-coro", {})
    assert await fetch_oauth_token(_AsyncProvider()) == ("tok-async", {"traceId": "7"})
    with pytest.raises(errors.AuthenticationFailedError, match="no token"):
        await fetch_oauth_token(lambda: "")


def test_oauth_config_accepts_provider_object() -> None:
    config = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_AsyncProvider(),
    )
    assert "provider" in repr(config)
    with pytest.raises(errors.ConfigurationError, match="token"):
        SecurityConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=42,  # type: ignore[arg-type]
        )


@pytest.mark.parametrize("client", ["consumer", "producer", "admin"])
def test_clients_read_aiokafkas_default_sasl_mechanism_alike(client: str) -> None:
    """aiokafka's clients default to sasl_mechanism="PLAIN", so code written for them
    passes it with PLAINTEXT: all three clients drop it (and the credentials) then, and
    use it with SASL_PLAINTEXT."""
    from aiokafka_lite.admin import AdminClient
    from aiokafka_lite.consumer import Consumer
    from aiokafka_lite.producer import Producer

    def security(**options: object) -> SecurityConfig:
        common = {"bootstrap_servers": "localhost:9092", **options}
        if client == "consumer":
            return Consumer("t", **common)._client.security  # type: ignore[arg-type]
        if client == "producer":
            return Producer(**common).client.security  # type: ignore[arg-type]
        return AdminClient(**common)._client.security  # type: ignore[arg-type]

    plain = security(sasl_mechanism="PLAIN", sasl_plain_username="u", sasl_plain_password="p")
    assert (plain.security_protocol, plain.sasl_mechanism, plain.sasl_plain_username) == (
        "PLAINTEXT",
        None,
        None,
    )
    sasl = security(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    assert (sasl.sasl_mechanism, sasl.sasl_plain_username) == ("PLAIN", "u")
