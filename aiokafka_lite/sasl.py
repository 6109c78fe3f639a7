"""SASL mechanisms as sans-IO state machines.

No sockets, no asyncio: a mechanism turns server bytes into client bytes. The connection
drives it over Kafka's SaslAuthenticate requests::

    mech = ScramMechanism("SCRAM-SHA-256", user, password)
    out: bytes | None = mech.first_message()
    while out is not None:
        server_bytes = <send out, read the server's answer>
        work = mech.prepare_step(server_bytes)   # None, or CPU-heavy work (PBKDF2)
        if work is not None:
            <run work() off the event loop, e.g. in a thread>
        out = mech.step(server_bytes)
    assert mech.complete

``step`` does the work itself when ``prepare_step``'s was not run, so the two-call form
is only needed to keep the work off an event loop.

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and OAUTHBEARER
(RFC 7628 as used by Kafka, KIP-255/KIP-342).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Final

from aiokafka_lite import errors

__all__ = [
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "OAuthBearerMechanism",
    "PlainMechanism",
    "SaslMechanism",
    "ScramMechanism",
]

#: The SCRAM iteration counts a client accepts from the server: Kafka's own bounds
#: (its ScramMechanism's minimum and maximum; a Kafka broker stores no credential outside
#: them). Fewer iterations would be weak salting; more would let a server make the
#: client's PBKDF2 run for as long as it likes (10**9 iterations take hours).
SCRAM_MIN_ITERATIONS: Final = 4096
SCRAM_MAX_ITERATIONS: Final = 16384


class SaslMechanism:
    """Base class: ``first_message()``, then ``step()`` per server message until ``complete``.

    ``step`` returns the next client message, or ``None`` when the exchange is over on
    the client's side (then ``complete`` is ``True``). Any failure raises
    :class:`~aiokafka_lite.errors.AuthenticationFailedError`.

    ``prepare_step(server_bytes)``, called before ``step`` with the same bytes, returns
    the CPU-heavy part of that step as a callable (or ``None`` when there is none) for
    the caller to run where it does not block anything, such as a worker thread;
    ``step`` then only uses its result. A message the step would refuse is refused
    there already, before any work.
    """

    name: str = ""

    def __init__(self) -> None:
        self.complete = False
        self._started = False

    def first_message(self) -> bytes:
        if self._started:
            raise errors.IllegalStateError(f"SASL {self.name}: first_message() called twice")
        self._started = True
        return self._first()

    def step(self, server_bytes: bytes) -> bytes | None:
        if not self._started:
            raise errors.IllegalStateError(f"SASL {self.name}: step() before first_message()")
        if self.complete:
            raise errors.AuthenticationFailedError(
                f"SASL {self.name}: server sent data after authentication completed"
            )
        return self._step(bytes(server_bytes))

    def prepare_step(self, server_bytes: bytes) -> Callable[[], None] | None:
        return None

    def _first(self) -> bytes:
        raise NotImplementedError

    def _step(self, server_bytes: bytes) -> bytes | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__} {self.name} complete={self.complete}>"


# --- PLAIN -----------------------------------------------------------------


class PlainMechanism(SaslMechanism):
    """SASL PLAIN (RFC 4616): one message ``authzid NUL authcid NUL passwd``."""

    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__()
        for label, value in (("username", username), ("password", password)):
            if "\0" in value:
                raise errors.ConfigurationError(f"SASL PLAIN {label} must not contain NUL")
        self._username = username
        self._password = password
        self._authzid = authzid

    def _first(self) -> bytes:
        return b"\0".join(
            (
                self._authzid.encode(),
                self._username.encode(),
                self._password.encode(),
            )
        )

    def _step(self, server_bytes: bytes) -> bytes | None:
        # Kafka answers a successful PLAIN exchange with empty auth bytes.
        self.complete = True
        return None


# --- SCRAM -----------------------------------------------------------------

_SCRAM_HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_GS2_HEADER = "n,,"  # no channel binding, no authzid
_B64_RE = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def _scram_escape(name: str) -> str:
    # RFC 5802 saslname: '=' -> '=3D', ',' -> '=2C' (order matters).
    return name.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise errors.AuthenticationFailedError(f"SCRAM: malformed server message {message!r}")
        attrs.setdefault(part[0], part[2:])
    return attrs


def _b64decode(value: str, what: str) -> bytes:
    if not _B64_RE.match(value) or len(value) % 4:
        raise errors.AuthenticationFailedError(f"SCRAM: {what} is not valid base64")
    return base64.b64decode(value)


class ScramMechanism(SaslMechanism):
    """SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802, RFC 7677), without channel binding.

    Messages: client-first -> server-first -> client-final -> server-final. The server's
    signature is verified; a mismatch or an ``e=`` error raises
    :class:`~aiokafka_lite.errors.AuthenticationFailedError`. ``nonce`` is for tests only.
    The server's iteration count must be within ``min_iterations`` and ``max_iterations``
    (Kafka's bounds, :data:`SCRAM_MIN_ITERATIONS` and :data:`SCRAM_MAX_ITERATIONS`):
    fewer is weak salting, more is CPU time the server could make the client spend.
    The salted password (PBKDF2, the one costly step) is what ``prepare_step`` returns
    for the server's first message.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        min_iterations: int = SCRAM_MIN_ITERATIONS,
        max_iterations: int = SCRAM_MAX_ITERATIONS,
    ) -> None:
        super().__init__()
        mechanism = mechanism.upper()
        if mechanism not in _SCRAM_HASHES:
            raise errors.ConfigurationError(
                f"unknown SCRAM mechanism {mechanism!r}; use one of {', '.join(_SCRAM_HASHES)}"
            )
        self.mechanism = mechanism
        self.name = mechanism
        self._hash_name = _SCRAM_HASHES[mechanism]
        # Used as given, without SASLprep: Kafka's Java client and broker and librdkafka
        # hash the raw UTF-8 bytes, and a normalised password would not match theirs.
        self._username = username
        self._password = password.encode("utf-8")
        if nonce is None:
            nonce = base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        elif not nonce or "," in nonce or not (nonce.isascii() and nonce.isprintable()):
            raise errors.ConfigurationError("SCRAM nonce must be printable ASCII without ','")
        self._client_nonce = nonce
        bounds = (("min_iterations", min_iterations), ("max_iterations", max_iterations))
        for label, value in bounds:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise errors.ConfigurationError(f"SCRAM {label} must be a positive int")
        if min_iterations > max_iterations:
            raise errors.ConfigurationError("SCRAM min_iterations must not exceed max_iterations")
        self._min_iterations = min_iterations
        self._max_iterations = max_iterations
        # (salt, iterations, salted password), once computed.
        self._salted: tuple[bytes, int, bytes] | None = None
        self._client_first_bare = ""
        self._expected_server_signature = b""
        self._state = "first"

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash_name).digest()

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self._hash_name, data).digest()

    def _first(self) -> bytes:
        self._client_first_bare = f"n={_scram_escape(self._username)},r={self._client_nonce}"
        self._state = "server-first"
        return (_GS2_HEADER + self._client_first_bare).encode("utf-8")

    def _step(self, server_bytes: bytes) -> bytes | None:
        try:
            message = server_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.AuthenticationFailedError("SCRAM: server message is not UTF-8") from None
        if self._state == "server-first":
            return self._on_server_first(message)
        if self._state == "server-final":
            self._on_server_final(message)
            return None
        raise errors.IllegalStateError(f"SCRAM: unexpected step in state {self._state}")

    def prepare_step(self, server_bytes: bytes) -> Callable[[], None] | None:
        if self._state != "server-first":
            return None
        try:
            message = bytes(server_bytes).decode("utf-8")
        except UnicodeDecodeError:
            return None  # step() refuses it
        _, salt, iterations = self._parse_server_first(message)

        def salt_password() -> None:
            self._salted = (salt, iterations, self._pbkdf2(salt, iterations))

        return salt_password

    def _pbkdf2(self, salt: bytes, iterations: int) -> bytes:
        # Releases the GIL: a worker thread running it does not hold up the event loop.
        return hashlib.pbkdf2_hmac(self._hash_name, self._password, salt, iterations)

    def _parse_server_first(self, message: str) -> tuple[str, bytes, int]:
        """The server-first message's nonce, salt and iteration count, all checked."""
        attrs = _parse_attributes(message)
        if "e" in attrs:
            raise errors.AuthenticationFailedError(f"SCRAM: server error: {attrs['e']}")
        if "m" in attrs:
            raise errors.AuthenticationFailedError("SCRAM: unsupported mandatory extension (m=)")
        try:
            nonce, salt_b64, iterations_text = attrs["r"], attrs["s"], attrs["i"]
        except KeyError as exc:
            raise errors.AuthenticationFailedError(
                f"SCRAM: server-first message lacks {exc.args[0]}="
            ) from None
        if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
            raise errors.AuthenticationFailedError(
                "SCRAM: server nonce does not extend the client nonce"
            )
        salt = _b64decode(salt_b64, "salt")
        if not (iterations_text.isascii() and iterations_text.isdigit()):
            raise errors.AuthenticationFailedError(
                f"SCRAM: bad iteration count {iterations_text[:40]!r}"
            )
        low, high = self._min_iterations, self._max_iterations
        # (Longer digit strings are out of range anyway; int() of them would be slow.)
        iterations = int(iterations_text) if len(iterations_text) <= 18 else high + 1
        if not low <= iterations <= high:
            count = iterations_text if len(iterations_text) <= 40 else iterations_text[:40] + "..."
            raise errors.AuthenticationFailedError(
                f"SCRAM: the server asks for {count} PBKDF2 iterations; only {low} to {high} "
                "are accepted (Kafka's bounds): refused before hashing"
            )
        return nonce, salt, iterations

    def _on_server_first(self, message: str) -> bytes:
        nonce, salt, iterations = self._parse_server_first(message)
        done = self._salted
        if done is not None and done[0] == salt and done[1] == iterations:
            salted = done[2]
        else:
            salted = self._pbkdf2(salt, iterations)
        self._salted = None
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._h(client_key)
        channel_binding = base64.b64encode(_GS2_HEADER.encode()).decode("ascii")
        final_without_proof = f"c={channel_binding},r={nonce}"
        auth_message = ",".join((self._client_first_bare, message, final_without_proof)).encode(
            "utf-8"
        )
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._expected_server_signature = self._hmac(server_key, auth_message)
        self._state = "server-final"
        proof_b64 = base64.b64encode(proof).decode("ascii")
        return f"{final_without_proof},p={proof_b64}".encode()

    def _on_server_final(self, message: str) -> None:
        attrs = _parse_attributes(message)
        if "e" in attrs:
            raise errors.AuthenticationFailedError(f"SCRAM: server error: {attrs['e']}")
        if "v" not in attrs:
            raise errors.AuthenticationFailedError("SCRAM: server-final message lacks v=")
        signature = _b64decode(attrs["v"], "server signature")
        if not hmac.compare_digest(signature, self._expected_server_signature):
            raise errors.AuthenticationFailedError(
                "SCRAM: server signature mismatch (the server does not know the password)"
            )
        self._state = "done"
        self.complete = True

    def __repr__(self) -> str:
        return f"<ScramMechanism {self.mechanism} user={self._username!r} state={self._state}>"


# --- OAUTHBEARER -----------------------------------------------------------

_EXTENSION_KEY_RE = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE_RE = re.compile(r"^[\x21-\x7E \t\r\n]+$")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")  # RFC 6750 b64token


class OAuthBearerMechanism(SaslMechanism):
    """OAUTHBEARER client (RFC 7628, Kafka KIP-255 with KIP-342 extensions).

    Sends ``n,,\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``. An empty server
    answer is success. A non-empty one is an error description (JSON): the client answers
    with ``\\x01`` as RFC 7628 requires, and the broker then fails the exchange; the
    description is kept in ``server_error``.
    """

    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        super().__init__()
        if not token or not _TOKEN_RE.match(token):
            raise errors.ConfigurationError("OAUTHBEARER token is empty or not a valid b64token")
        self._token = token
        self._extensions = dict(extensions or {})
        for key, value in self._extensions.items():
            if key == "auth" or not _EXTENSION_KEY_RE.match(key):
                raise errors.ConfigurationError(f"invalid OAUTHBEARER extension name {key!r}")
            if not _EXTENSION_VALUE_RE.match(value):
                raise errors.ConfigurationError(f"invalid OAUTHBEARER extension value for {key!r}")
        self.server_error: str | None = None

    def _first(self) -> bytes:
        parts = [f"auth=Bearer {self._token}"]
        parts.extend(f"{k}={v}" for k, v in sorted(self._extensions.items()))
        return ("n,," + "\x01" + "\x01".join(parts) + "\x01\x01").encode("utf-8")

    def _step(self, server_bytes: bytes) -> bytes | None:
        if self.server_error is not None:
            raise errors.AuthenticationFailedError(
                f"OAUTHBEARER: authentication failed: {self.server_error}"
            )
        if not server_bytes:
            self.complete = True
            return None
        self.server_error = server_bytes.decode("utf-8", "replace")
        return b"\x01"

    def __repr__(self) -> str:
        return f"<OAuthBearerMechanism complete={self.complete}>"
