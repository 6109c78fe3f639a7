"""A Tansu broker behind TLS and/or the SASL front, advertising the outermost address.

``SecureStack(pki=..., sasl_users=...)`` builds, from the inside out::

    Tansu (plaintext, 127.0.0.1:B)
      <- SaslFront (127.0.0.1:S)            when sasl_users is given
      <- socat TLS (127.0.0.1:T)            when pki is given

and starts Tansu with ``--advertised-listener-url tcp://<advertised_host>:<outermost
port>``, so the metadata clients read sends them back through the same layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from aiokafka_lite.testing import EmbeddedBroker, find_free_port
from tests.reliability.sasl_front import SaslFront
from tests.reliability.tls import Pki, TlsTerminator

__all__ = ["SecureStack"]


class SecureStack:
    def __init__(
        self,
        *,
        pki: Pki | None = None,
        sasl_users: Mapping[str, str] | None = None,
        sasl_tokens: Mapping[str, str] | None = None,
        advertised_host: str | None = None,
    ) -> None:
        self.pki = pki
        if advertised_host is None:
            advertised_host = pki.hostnames[0] if pki is not None else "127.0.0.1"
        self.advertised_host = advertised_host
        self.tls: TlsTerminator | None = None
        self.sasl: SaslFront | None = None
        self._sasl_users = sasl_users
        self._sasl_tokens = sasl_tokens
        self.sasl_port = find_free_port() if sasl_users is not None else None
        self.tls_port = find_free_port() if pki is not None else None
        outer = self.tls_port or self.sasl_port
        self.broker = EmbeddedBroker(
            "tansu", advertised_port=outer, advertised_host=advertised_host
        )

    @property
    def port(self) -> int:
        """The outermost port (what clients bootstrap from)."""
        return self.tls_port or self.sasl_port or self.broker.port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.advertised_host}:{self.port}"

    def bootstrap_via(self, host: str) -> str:
        return f"{host}:{self.port}"

    def start(self) -> SecureStack:
        self.broker.start()
        try:
            inner_port = self.broker.port
            if self._sasl_users is not None:
                assert self.sasl_port is not None
                self.sasl = SaslFront(
                    "127.0.0.1",
                    self.broker.port,
                    users=self._sasl_users,
                    tokens=self._sasl_tokens,
                    port=self.sasl_port,
                ).start_in_thread()
                inner_port = self.sasl_port
            if self.pki is not None:
                assert self.tls_port is not None
                self.tls = TlsTerminator(
                    self.pki, "127.0.0.1", inner_port, port=self.tls_port
                ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            if self.tls is not None:
                self.tls.stop()
            if self.sasl is not None:
                self.sasl.close()
        finally:
            self.broker.stop()

    def __enter__(self) -> SecureStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
