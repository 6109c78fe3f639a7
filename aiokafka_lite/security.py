"""Connection security settings: TLS and SASL.

:class:`SecurityConfig` is an immutable value validated when it is built, so a bad
combination fails at configuration time with :class:`~aiokafka_lite.errors.ConfigurationError`
instead of at the first connection. Secrets (passwords, token providers) never appear in
``repr()``/``str()``, so a config can be logged safely.
"""

from __future__ import annotations

import inspect
import os
import ssl
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from aiokafka_lite import errors

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "AbstractTokenProvider",
    "SecurityConfig",
    "TokenProvider",
    "TokenProviderLike",
    "create_ssl_context",
    "fetch_oauth_token",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

_MASK = "'***'"


@runtime_checkable
class TokenProvider(Protocol):
    """Any object with an async ``token()`` serves as an OAUTHBEARER token source.

    It may also define ``extensions() -> Mapping[str, str]`` for KIP-342 SASL extensions.
    """

    async def token(self) -> str: ...


class AbstractTokenProvider(ABC):
    """aiokafka's base class for OAUTHBEARER token providers: implement the async
    ``token()``; ``extensions()`` (KIP-342 SASL extensions) returns ``{}`` unless
    overridden. Subclassing it is optional here: any :class:`TokenProvider` serves."""

    @abstractmethod
    async def token(self) -> str:
        """The access token (a non-empty ``str``)."""

    def extensions(self) -> Mapping[str, str]:
        return {}


#: A token provider: an object with async ``token()``, or a callable returning the token
#: (``str``) or an awaitable of it.
TokenProviderLike: TypeAlias = TokenProvider | Callable[[], str | Awaitable[str]]


def create_ssl_context(
    cafile: str | bytes | os.PathLike[str] | None = None,
    certfile: str | bytes | os.PathLike[str] | None = None,
    keyfile: str | bytes | os.PathLike[str] | None = None,
    password: str | bytes | Callable[[], str | bytes | bytearray] | None = None,
    check_hostname: bool = True,
    *,
    capath: str | bytes | os.PathLike[str] | None = None,
    cadata: str | bytes | None = None,
) -> ssl.SSLContext:
    """Build a client TLS context that verifies the broker's certificate.

    ``cafile``, ``capath`` or ``cadata`` add trusted CAs (the system store is used when
    all are ``None``); ``certfile``/``keyfile``/``password`` (a str, bytes or a callable
    returning one) load a client certificate for mutual TLS. ``check_hostname=False``
    still verifies the certificate chain but not the name in it. aiokafka's
    ``aiokafka.helpers.create_ssl_context`` keywords all work here.
    """
    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath, cadata=cadata
        )
        context.check_hostname = check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if certfile is not None:
            context.load_cert_chain(certfile, keyfile, password)
        elif keyfile is not None:
            raise errors.ConfigurationError("ssl keyfile given without certfile")
    except (OSError, ssl.SSLError) as exc:
        # Never include the password in the message.
        raise errors.ConfigurationError(f"cannot build SSL context: {exc}") from exc
    return context


@dataclass(frozen=True, repr=False)
class SecurityConfig:
    """How to secure a broker connection.

    ``security_protocol`` is one of ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` and
    ``SASL_SSL``. For the SSL variants a default verifying context is created when
    ``ssl_context`` is ``None``. ``ssl_server_hostname`` overrides the name sent for SNI
    and checked against the certificate (default: the host connected to).
    For the SASL variants ``sasl_mechanism`` is required, with ``sasl_plain_username`` and
    ``sasl_plain_password`` for PLAIN and SCRAM-*, or ``sasl_oauth_token_provider`` for
    OAUTHBEARER.
    """

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_server_hostname: str | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None
    sasl_oauth_token_provider: TokenProviderLike | None = None

    def __post_init__(self) -> None:
        protocol = self.security_protocol
        if not isinstance(protocol, str) or protocol.upper() not in SECURITY_PROTOCOLS:
            raise errors.ConfigurationError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"got {protocol!r}"
            )
        protocol = protocol.upper()
        object.__setattr__(self, "security_protocol", protocol)

        if self.ssl_context is not None and not isinstance(self.ssl_context, ssl.SSLContext):
            raise errors.ConfigurationError(
                f"ssl_context must be an ssl.SSLContext, got {type(self.ssl_context).__name__}"
            )
        if self.uses_ssl:
            if self.ssl_context is None:
                object.__setattr__(self, "ssl_context", create_ssl_context())
        elif self.ssl_context is not None:
            raise errors.ConfigurationError(
                f"ssl_context is set but security_protocol is {protocol}; "
                "use SSL or SASL_SSL to enable TLS"
            )

        if not self.uses_sasl:
            if self.sasl_mechanism is not None:
                raise errors.ConfigurationError(
                    f"sasl_mechanism is set but security_protocol is {protocol}; "
                    "use SASL_PLAINTEXT or SASL_SSL to enable SASL"
                )
            return
        self._validate_sasl()

    def _validate_sasl(self) -> None:
        mechanism = self.sasl_mechanism
        if mechanism is None:
            raise errors.ConfigurationError(
                f"security_protocol {self.security_protocol} needs sasl_mechanism "
                f"(one of {', '.join(SASL_MECHANISMS)})"
            )
        if not isinstance(mechanism, str) or mechanism.upper() not in SASL_MECHANISMS:
            raise errors.ConfigurationError(
                f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}"
            )
        mechanism = mechanism.upper()
        object.__setattr__(self, "sasl_mechanism", mechanism)
        if mechanism == "OAUTHBEARER":
            provider = self.sasl_oauth_token_provider
            if provider is None:
                raise errors.ConfigurationError(
                    "sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider"
                )
            if not (isinstance(provider, TokenProvider) or callable(provider)):
                raise errors.ConfigurationError(
                    "sasl_oauth_token_provider must be callable or have an async token() method"
                )
            return
        if not self.sasl_plain_username:
            raise errors.ConfigurationError(f"sasl_mechanism {mechanism} needs sasl_plain_username")
        if self.sasl_plain_password is None:
            raise errors.ConfigurationError(f"sasl_mechanism {mechanism} needs sasl_plain_password")
        if not isinstance(self.sasl_plain_username, str) or not isinstance(
            self.sasl_plain_password, str
        ):
            raise errors.ConfigurationError("sasl_plain_username and password must be str")

    @classmethod
    def from_options(
        cls,
        *,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        ssl_server_hostname: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: TokenProviderLike | None = None,
    ) -> SecurityConfig:
        """The config the clients' individual keyword arguments describe, read as aiokafka
        reads them: its default ``sasl_mechanism="PLAIN"`` (and any SASL option) means
        nothing unless ``security_protocol`` uses SASL, so it is dropped then; GSSAPI
        (Kerberos) is refused."""
        if isinstance(sasl_mechanism, str) and sasl_mechanism.upper() == "GSSAPI":
            raise errors.ConfigurationError("sasl_mechanism GSSAPI (Kerberos) is not supported")
        uses_sasl = isinstance(security_protocol, str) and security_protocol.upper() in (
            "SASL_PLAINTEXT",
            "SASL_SSL",
        )
        return cls(
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            ssl_server_hostname=ssl_server_hostname,
            sasl_mechanism=sasl_mechanism if uses_sasl else None,
            sasl_plain_username=sasl_plain_username if uses_sasl else None,
            sasl_plain_password=sasl_plain_password if uses_sasl else None,
            sasl_oauth_token_provider=sasl_oauth_token_provider if uses_sasl else None,
        )

    @property
    def uses_ssl(self) -> bool:
        """Whether the connection is wrapped in TLS."""
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether the connection authenticates with SASL after connecting."""
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __repr__(self) -> str:
        parts = [f"security_protocol={self.security_protocol!r}"]
        if self.ssl_context is not None:
            parts.append("ssl_context=<SSLContext>")
        if self.ssl_server_hostname is not None:
            parts.append(f"ssl_server_hostname={self.ssl_server_hostname!r}")
        if self.sasl_mechanism is not None:
            parts.append(f"sasl_mechanism={self.sasl_mechanism!r}")
        if self.sasl_plain_username is not None:
            parts.append(f"sasl_plain_username={self.sasl_plain_username!r}")
        if self.sasl_plain_password is not None:
            parts.append(f"sasl_plain_password={_MASK}")
        if self.sasl_oauth_token_provider is not None:
            parts.append("sasl_oauth_token_provider=<provider>")
        return f"SecurityConfig({', '.join(parts)})"

    __str__ = __repr__


async def fetch_oauth_token(provider: TokenProviderLike) -> tuple[str, dict[str, str]]:
    """Get a token (and SASL extensions, if the provider has ``extensions()``) from a provider."""
    result: object
    if isinstance(provider, TokenProvider):
        result = provider.token()
    else:
        result = provider()
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, str) or not result:
        raise errors.AuthenticationFailedError(
            "OAUTHBEARER token provider returned no token (expected a non-empty str)"
        )
    extensions: dict[str, str] = {}
    get_extensions = getattr(provider, "extensions", None)
    if callable(get_extensions):
        raw = get_extensions()
        if inspect.isawaitable(raw):
            raw = await raw
        if raw:
            if not isinstance(raw, Mapping):
                raise errors.ConfigurationError("token provider extensions() must return a mapping")
            extensions = {str(k): str(v) for k, v in raw.items()}
    return result, extensions
