"""A scripted SASL front: authenticates Kafka connections itself, then splices them.

The embedded brokers have no working SCRAM, so the security tests put this small asyncio
TCP server between the client and a plaintext broker. Per connection it:

1. opens a connection to the broker and forwards ApiVersions requests (and answers)
   unchanged, so the client negotiates with the real broker (Tansu lists SaslHandshake
   0-1 and SaslAuthenticate 0-2, which is what this front speaks);
2. answers SaslHandshake (v0-v1) and SaslAuthenticate (v0-v2) itself with PLAIN,
   SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, as a Kafka broker does: a failed
   exchange gets error 58 (SASL_AUTHENTICATION_FAILED) and the connection is closed;
3. closes the connection on any other request before authentication completes (a
   Kafka broker fails such a connection with an illegal SASL state);
4. once authenticated, copies bytes both ways until either side closes.

With ``session_lifetime_ms`` set (KIP-368, Kafka's ``connections.max.reauth.ms``), a
successful SaslAuthenticate (v1+) gives that session lifetime and, as Kafka does, the
front then reads the client's requests one by one: a SaslHandshake starts a
re-authentication (answered once every request forwarded before it is answered, as a
broker answers a connection's requests in order; the same mechanism and principal are
required), and any other request arriving after the session expired closes the
connection (``expired_closes``). ``refuse_reauthentication`` refuses every
re-authentication (error 58, then the connection is closed).

The frames are built and parsed with ``struct`` here (not with the client's protocol
layer), and the mechanisms are server-side code written for this file, so the client
and the front cannot share a mistake. confluent-kafka (librdkafka) authenticates against
the front in the tests before our client does, which checks the front itself.

Nothing here logs a password or a token.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import hmac
import logging
import os
import struct
import threading
import time
from collections.abc import Collection, Mapping
from types import TracebackType

log = logging.getLogger(__name__)

__all__ = ["AuthRecord", "SaslFront"]

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_MAX_PRE_AUTH_FRAME = 1 << 20
_SCRAM_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class _AuthFailed(Exception):
    """The exchange failed; the message goes to the client as the error message."""


# --- wire helpers (request header v1/v2, response header v0/v1) --------------------


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated frame")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def nullable_string16(self) -> str | None:
        (n,) = self.unpack(">h")
        return None if n < 0 else self.take(n).decode()


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


@dataclasses.dataclass(frozen=True)
class _Header:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _read_request_header(cur: _Cursor, flexible: bool) -> _Header:
    api_key, api_version, correlation_id = cur.unpack(">hhi")
    client_id = cur.nullable_string16()
    if flexible:
        cur.skip_tagged_fields()
    return _Header(api_key, api_version, correlation_id, client_id)


def _handshake_response(correlation_id: int, error: int, mechanisms: Collection[str]) -> bytes:
    body = struct.pack(">ihi", correlation_id, error, len(mechanisms))
    for name in mechanisms:
        raw = name.encode()
        body += struct.pack(">h", len(raw)) + raw
    return body


def _authenticate_response(
    version: int,
    correlation_id: int,
    error: int,
    message: str | None,
    auth_bytes: bytes,
    lifetime_ms: int = 0,
) -> bytes:
    msg = None if message is None else message.encode()
    if version >= 2:  # flexible: response header v1, compact types, tagged fields
        out = struct.pack(">i", correlation_id) + b"\x00"
        out += struct.pack(">h", error)
        out += b"\x00" if msg is None else _uvarint(len(msg) + 1) + msg
        out += _uvarint(len(auth_bytes) + 1) + auth_bytes
        out += struct.pack(">q", lifetime_ms) + b"\x00"
        return out
    out = struct.pack(">ih", correlation_id, error)
    out += struct.pack(">h", -1) if msg is None else struct.pack(">h", len(msg)) + msg
    out += struct.pack(">i", len(auth_bytes)) + auth_bytes
    if version >= 1:
        out += struct.pack(">q", lifetime_ms)  # session_lifetime_ms (0: none)
    return out


async def _read_frame(reader: asyncio.StreamReader, limit: int) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    if not 0 < size <= limit:
        raise ValueError(f"implausible frame size {size}")
    return await reader.readexactly(size)


def _write_frame(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(struct.pack(">i", len(payload)) + payload)


_MAX_FRAME = 256 << 20
PRODUCE = 0


def _expects_response(frame: bytes) -> bool:
    """Whether a request gets a response: all but Produce with acks=0."""
    api_key, api_version = struct.unpack_from(">hh", frame)
    if api_key != PRODUCE:
        return True
    flexible = api_version >= 9
    cur = _Cursor(frame)
    _read_request_header(cur, flexible=flexible)
    if api_version >= 3:  # transactional_id
        if flexible:
            n = cur.uvarint() - 1
        else:
            (n,) = cur.unpack(">h")
        if n > 0:
            cur.take(n)
    (acks,) = cur.unpack(">h")
    return acks != 0


class _Session:
    """A client connection's SASL session (KIP-368)."""

    def __init__(self, connection: int, lifetime_ms: int) -> None:
        self.connection = connection
        self.lifetime_ms = lifetime_ms
        self.mechanism = ""
        self.principal: str | None = None
        self.expires_at = float("inf")

    def start(self, mechanism: str, principal: str | None, lifetime_ms: int) -> None:
        self.mechanism = mechanism
        self.principal = principal or ""
        self.expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else float("inf")


# --- server-side mechanisms --------------------------------------------------------


class _Mechanism:
    principal: str | None = None
    extensions: Mapping[str, str] = {}

    def step(self, data: bytes) -> tuple[bytes, bool]:
        """Answer a client message: ``(server bytes, done)``; raise _AuthFailed to fail."""
        raise NotImplementedError


class _PlainServer(_Mechanism):
    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users

    def step(self, data: bytes) -> tuple[bytes, bool]:
        parts = data.split(b"\x00")
        if len(parts) != 3:
            raise _AuthFailed("Authentication failed: invalid SASL/PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise _AuthFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise _AuthFailed("Authentication failed: authorization id differs from username")
        self.principal = user
        return b"", True


@dataclasses.dataclass(frozen=True)
class _ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(hash_name: str, password: str, iterations: int) -> _ScramCredential:
    """What a SCRAM server stores for a user (RFC 5802 section 3): never the password."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    return stored_credential(hash_name, salt, iterations, salted)


def stored_credential(
    hash_name: str, salt: bytes, iterations: int, salted: bytes
) -> _ScramCredential:
    """The stored keys of a credential given as its salted password (what an admin
    client's AlterUserScramCredentials sends)."""
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return _ScramCredential(
        salt,
        iterations,
        hashlib.new(hash_name, client_key).digest(),
        hmac.new(salted, b"Server Key", hash_name).digest(),
    )


def _scram_attributes(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise _AuthFailed("Authentication failed: malformed SCRAM message")
        attrs[key] = value
    return attrs


class _ScramServer(_Mechanism):
    def __init__(
        self,
        mechanism: str,
        credentials: Mapping[str, _ScramCredential],
        advertised_iterations: int | None = None,
    ) -> None:
        self.hash_name = _SCRAM_HASH[mechanism]
        self.credentials = credentials
        self.advertised_iterations = advertised_iterations
        self.state = "client-first"
        self.nonce = ""
        self.client_first_bare = ""
        self.server_first = ""
        self.credential: _ScramCredential | None = None
        self.user = ""

    def step(self, data: bytes) -> tuple[bytes, bool]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _AuthFailed("Authentication failed: SCRAM message is not UTF-8") from None
        if self.state == "client-first":
            return self._client_first(text), False
        if self.state == "client-final":
            return self._client_final(text), True
        raise _AuthFailed("Authentication failed: unexpected SCRAM message")

    def _client_first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",,")
        # gs2 header: "n" or "y" (no channel binding); "p=" asks for binding we lack.
        if not sep or (gs2 not in ("n", "y") and not gs2.startswith(("n,a=", "y,a="))):
            raise _AuthFailed("Authentication failed: unsupported SCRAM gs2 header")
        attrs = _scram_attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise _AuthFailed("Authentication failed: SCRAM client-first lacks n= or r=")
        user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        credential = self.credentials.get(user)
        if credential is None:
            raise _AuthFailed("Authentication failed: Invalid user credentials")
        self.user, self.credential = user, credential
        self.client_first_bare = bare
        self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        salt = base64.b64encode(credential.salt).decode()
        iterations = self.advertised_iterations or credential.iterations
        self.server_first = f"r={self.nonce},s={salt},i={iterations}"
        self.state = "client-final"
        return self.server_first.encode()

    def _client_final(self, text: str) -> bytes:
        assert self.credential is not None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise _AuthFailed("Authentication failed: SCRAM client-final lacks a proof")
        attrs = _scram_attributes(without_proof)
        if attrs.get("r") != self.nonce:
            raise _AuthFailed("Authentication failed: SCRAM nonce mismatch")
        if attrs.get("c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise _AuthFailed("Authentication failed: SCRAM channel binding mismatch")
        auth_message = ",".join((self.client_first_bare, self.server_first, without_proof))
        signature = hmac.new(
            self.credential.stored_key, auth_message.encode(), self.hash_name
        ).digest()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise _AuthFailed("Authentication failed: SCRAM proof is not base64") from None
        if len(proof) != len(signature):
            raise _AuthFailed("Authentication failed: SCRAM proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self.hash_name, client_key).digest(), self.credential.stored_key
        ):
            raise _AuthFailed(
                "Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism SCRAM"
            )
        self.principal = self.user
        self.state = "done"
        server_signature = hmac.new(
            self.credential.server_key, auth_message.encode(), self.hash_name
        ).digest()
        return b"v=" + base64.b64encode(server_signature)


class _OAuthBearerServer(_Mechanism):
    """RFC 7628 as Kafka does it: a bad token gets an error JSON, then a failure."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self.tokens = tokens  # token -> principal
        self.error_sent = False

    def step(self, data: bytes) -> tuple[bytes, bool]:
        if self.error_sent:
            # The client must answer the error with a single %x01 (RFC 7628 3.2.3).
            raise _AuthFailed("Authentication failed: invalid token")
        text = data.decode("utf-8", "replace")
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
            raise _AuthFailed("Authentication failed: malformed OAUTHBEARER message")
        pairs: dict[str, str] = {}
        for item in rest[:-2].split("\x01"):
            key, eq, value = item.partition("=")
            if not eq:
                raise _AuthFailed("Authentication failed: malformed OAUTHBEARER key/value")
            pairs[key] = value
        auth = pairs.pop("auth", "")
        scheme, _, token = auth.partition(" ")
        principal = self.tokens.get(token) if scheme.lower() == "bearer" else None
        if principal is None:
            self.error_sent = True
            return b'{"status":"invalid_token"}', False
        self.principal = principal
        self.extensions = pairs
        return b"", True


# --- the front -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AuthRecord:
    """One finished SASL exchange."""

    mechanism: str
    ok: bool
    principal: str | None
    client_id: str | None
    extensions: Mapping[str, str]
    error: str | None
    #: The front's number for the client connection it happened on (from 1).
    connection: int = 0
    #: A re-authentication of an authenticated connection (KIP-368).
    reauthentication: bool = False


class SaslFront:
    """The front on ``host:port`` (0 picks a port), forwarding to ``upstream``.

    ``users`` are PLAIN and SCRAM users (``name -> password``; SCRAM keeps only salted
    keys); ``tokens`` are OAUTHBEARER tokens (``token -> principal``). Runs on its own
    event loop in a daemon thread (:meth:`start_in_thread`, or ``with``).

    ``scram_advertised_iterations`` plays a hostile server: the SCRAM iteration count it
    announces instead of the one its keys were salted with (no exchange can then
    succeed; it is for checking that a client refuses the count).
    """

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        users: Mapping[str, str],
        tokens: Mapping[str, str] | None = None,
        mechanisms: Collection[str] = MECHANISMS,
        host: str = "127.0.0.1",
        port: int = 0,
        scram_iterations: int = 4096,
        scram_advertised_iterations: int | None = None,
    ) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        self.mechanisms = tuple(mechanisms)
        self._plain_users = dict(users)
        self._scram = {
            mech: {
                user: scram_credential(hash_name, password, scram_iterations)
                for user, password in users.items()
            }
            for mech, hash_name in _SCRAM_HASH.items()
        }
        self._scram_advertised_iterations = scram_advertised_iterations
        self._tokens = dict(tokens or {})
        self._lock = threading.Lock()
        self._records: list[AuthRecord] = []
        #: Connections closed for sending a non-SASL request before authenticating.
        self.rejected_unauthenticated = 0
        #: Client connections accepted.
        self.connections_accepted = 0
        #: KIP-368: the session lifetime given to SaslAuthenticate v1+ (0: none), read
        #: when a connection authenticates; connections closed for a request after their
        #: session expired; whether re-authentications are refused.
        self.session_lifetime_ms = 0
        self.expired_closes = 0
        self.refuse_reauthentication = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def set_scram_credential(
        self, mechanism: str, user: str, salt: bytes, iterations: int, salted_password: bytes
    ) -> None:
        """Take a SCRAM credential as AlterUserScramCredentials carries it (the front
        then authenticates ``user`` with it, and only with it)."""
        hash_name = _SCRAM_HASH[mechanism]
        credential = stored_credential(hash_name, salt, iterations, salted_password)
        with self._lock:
            self._scram[mechanism] = {**self._scram[mechanism], user: credential}

    @property
    def records(self) -> list[AuthRecord]:
        with self._lock:
            return list(self._records)

    def wait_records(self, count: int = 1, timeout: float = 5.0) -> list[AuthRecord]:
        """The records, once there are ``count`` (or ``timeout`` passed): the front
        records an exchange when it is over, which can be just after the client has
        its answer."""
        deadline = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.records

    def clear_records(self) -> None:
        with self._lock:
            self._records.clear()

    def _record(self, record: AuthRecord) -> None:
        with self._lock:
            self._records.append(record)

    async def _refuse(
        self, writer: asyncio.StreamWriter, response: bytes, record: AuthRecord
    ) -> bool:
        """Answer a SASL request with a refusal and note it; False: the connection ends."""
        _write_frame(writer, response)
        await writer.drain()
        self._record(record)
        return False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle --

    def start_in_thread(self) -> SaslFront:
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._main, args=(started,), name="SaslFront", daemon=True
        )
        self._thread.start()
        started.result(timeout=30)
        return self

    def _main(self, started: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._on_client, self.host, self.port)
                )
            except BaseException as exc:
                started.set_exception(exc)
                return
            self.port = self._server.sockets[0].getsockname()[1]
            started.set_result(None)
            loop.run_forever()
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
        finally:
            loop.close()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
        self._loop = self._thread = None

    def __enter__(self) -> SaslFront:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- connections --

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _make_mechanism(self, name: str) -> _Mechanism:
        if name == "PLAIN":
            return _PlainServer(self._plain_users)
        if name in _SCRAM_HASH:
            return _ScramServer(name, self._scram[name], self._scram_advertised_iterations)
        return _OAuthBearerServer(self._tokens)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        with self._lock:
            self.connections_accepted += 1
            connection = self.connections_accepted
        lifetime_ms = self.session_lifetime_ms
        try:
            up_reader, upstream = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
            session = _Session(connection, lifetime_ms)
            if not await self._authenticate(reader, writer, up_reader, upstream, session):
                return
            if lifetime_ms > 0:
                await self._serve_sessions(reader, writer, up_reader, upstream, session)
            else:
                await self._splice(reader, writer, up_reader, upstream)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            log.debug("sasl front: connection ended: %r", exc)
        finally:
            for w in (writer, upstream):
                if w is not None:
                    w.close()

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        session: _Session,
        first: bytes | None = None,
    ) -> bool:
        """One SASL exchange (``first``: its first frame, already read); on success the
        session is (re)started. A re-authentication if the session has a principal."""
        mechanism: _Mechanism | None = None
        mechanism_name = ""
        reauth = session.principal is not None
        while True:
            frame = first if first is not None else await _read_frame(reader, _MAX_PRE_AUTH_FRAME)
            first = None
            cur = _Cursor(frame)
            api_key, api_version = struct.unpack_from(">hh", frame)
            if api_key == API_VERSIONS:
                # The broker answers; the client learns the real broker's versions.
                _write_frame(upstream, frame)
                await upstream.drain()
                _write_frame(writer, await _read_frame(up_reader, _MAX_PRE_AUTH_FRAME))
                await writer.drain()
                continue
            if api_key == SASL_HANDSHAKE and mechanism is None and api_version in (0, 1):
                header = _read_request_header(cur, flexible=False)
                (length,) = cur.unpack(">h")
                mechanism_name = cur.take(length).decode()
                if reauth and mechanism_name != session.mechanism:
                    # KIP-368: a re-authentication keeps the mechanism.
                    return await self._refuse(
                        writer,
                        _handshake_response(
                            header.correlation_id, ILLEGAL_SASL_STATE, self.mechanisms
                        ),
                        AuthRecord(
                            mechanism_name,
                            False,
                            None,
                            header.client_id,
                            {},
                            "mechanism changed",
                            session.connection,
                            True,
                        ),
                    )
                if mechanism_name not in self.mechanisms:
                    return await self._refuse(
                        writer,
                        _handshake_response(
                            header.correlation_id, UNSUPPORTED_SASL_MECHANISM, self.mechanisms
                        ),
                        AuthRecord(
                            mechanism_name, False, None, header.client_id, {}, "unsupported"
                        ),
                    )
                mechanism = self._make_mechanism(mechanism_name)
                _write_frame(writer, _handshake_response(header.correlation_id, 0, self.mechanisms))
                await writer.drain()
                continue
            if api_key == SASL_AUTHENTICATE and mechanism is not None and 0 <= api_version <= 2:
                flexible = api_version >= 2
                header = _read_request_header(cur, flexible=flexible)
                if flexible:
                    auth_bytes = cur.take(cur.uvarint() - 1)
                else:
                    (length,) = cur.unpack(">i")
                    auth_bytes = cur.take(length)
                try:
                    out, done = mechanism.step(auth_bytes)
                    if done and reauth and self.refuse_reauthentication:
                        raise _AuthFailed("Authentication failed: re-authentication refused")
                    if done and reauth and mechanism.principal != session.principal:
                        # KIP-368: a re-authentication keeps the principal.
                        raise _AuthFailed("Authentication failed: principal changed")
                except _AuthFailed as exc:
                    return await self._refuse(
                        writer,
                        _authenticate_response(
                            api_version,
                            header.correlation_id,
                            SASL_AUTHENTICATION_FAILED,
                            str(exc),
                            b"",
                        ),
                        AuthRecord(
                            mechanism_name,
                            False,
                            None,
                            header.client_id,
                            {},
                            str(exc),
                            session.connection,
                            reauth,
                        ),
                    )
                lifetime_ms = session.lifetime_ms if done and api_version >= 1 else 0
                _write_frame(
                    writer,
                    _authenticate_response(
                        api_version, header.correlation_id, 0, None, out, lifetime_ms
                    ),
                )
                await writer.drain()
                if done:
                    session.start(mechanism_name, mechanism.principal, lifetime_ms)
                    self._record(
                        AuthRecord(
                            mechanism_name,
                            True,
                            mechanism.principal,
                            header.client_id,
                            dict(mechanism.extensions),
                            None,
                            session.connection,
                            reauth,
                        )
                    )
                    log.debug("sasl front: %s authenticated", mechanism_name)
                    return True
                continue
            # Anything else before authentication: an illegal SASL state; close.
            with self._lock:
                self.rejected_unauthenticated += 1
            log.debug("sasl front: API key %d before authentication; closing", api_key)
            return False

    async def _serve_sessions(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        session: _Session,
    ) -> None:
        # Request by request, as Kafka with connections.max.reauth.ms: responses are
        # relayed as they come, counted, so that a re-authentication is answered after
        # every request before it (a broker answers a connection's requests in order).
        outstanding = 0
        idle = asyncio.Event()
        idle.set()

        async def responses() -> None:
            nonlocal outstanding
            while True:
                _write_frame(writer, await _read_frame(up_reader, _MAX_FRAME))
                await writer.drain()
                outstanding -= 1
                if outstanding == 0:
                    idle.set()

        async def requests() -> None:
            nonlocal outstanding
            while True:
                frame = await _read_frame(reader, _MAX_FRAME)
                (api_key,) = struct.unpack_from(">h", frame)
                if api_key == SASL_HANDSHAKE:
                    await idle.wait()
                    if not await self._authenticate(
                        reader, writer, up_reader, upstream, session, first=frame
                    ):
                        return
                    continue
                if time.monotonic() >= session.expires_at:
                    with self._lock:
                        self.expired_closes += 1
                    log.debug("sasl front: API key %d after the session expired; closing", api_key)
                    return
                if _expects_response(frame):
                    outstanding += 1
                    idle.clear()
                _write_frame(upstream, frame)
                await upstream.drain()

        tasks = [asyncio.create_task(requests()), asyncio.create_task(responses())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _splice(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
    ) -> None:
        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            finally:
                dst.close()

        tasks = [
            asyncio.create_task(copy(reader, upstream)),
            asyncio.create_task(copy(up_reader, writer)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
