"""TLS for the security tests: certificates from the ``openssl`` CLI, ``socat`` in front.

:func:`make_pki` writes a fresh test CA, a server certificate it signs (with the given
DNS names, and IP addresses if any, as subjectAltName and nothing else: by default
connecting by IP address fails the hostname check), and an unrelated second CA for the
"wrong CA" cases. The certificates carry the extensions that strict X.509 checking asks
for (key usage, key identifiers), which Python 3.13's default TLS context turns on.

:class:`TlsTerminator` runs Debian's ``socat`` as a TLS server that forwards each
connection, decrypted, to a plaintext upstream (the broker, or the SASL front).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from aiokafka_lite.testing import find_free_port

log = logging.getLogger(__name__)

__all__ = ["Pki", "TlsTerminator", "make_pki"]

_DAYS = "2"


@dataclass(frozen=True)
class Pki:
    """Files of a test PKI (all PEM)."""

    directory: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    #: A CA that signed nothing here: trusting only it must make verification fail.
    other_ca_cert: Path
    #: The DNS names in the server certificate's subjectAltName.
    hostnames: tuple[str, ...]
    #: The IP addresses in it.
    ips: tuple[str, ...] = ()


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"openssl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr.strip()}"
        )


def _make_ca(directory: Path, name: str, common_name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(cert),
        "-days",
        _DAYS,
        "-subj",
        f"/CN={common_name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-addext",
        "subjectKeyIdentifier=hash",
        cwd=directory,
    )
    return key, cert


def make_pki(
    directory: Path, hostnames: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ()
) -> Pki:
    """Create a CA, a server certificate for ``hostnames`` (and ``ips``) and a second,
    unrelated CA."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _make_ca(directory, "ca", "aiokafka-lite test CA")
    _, other_ca_cert = _make_ca(directory, "other-ca", "aiokafka-lite unrelated CA")
    server_key, csr, server_cert = (
        directory / "server.key",
        directory / "server.csr",
        directory / "server.crt",
    )
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        str(server_key),
        "-out",
        str(csr),
        "-subj",
        f"/CN={hostnames[0]}",
        cwd=directory,
    )
    extensions = directory / "server.ext"
    extensions.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "subjectAltName="
        + ",".join([*(f"DNS:{h}" for h in hostnames), *(f"IP:{ip}" for ip in ips)])
        + "\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_cert),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(server_cert),
        "-days",
        _DAYS,
        "-sha256",
        "-extfile",
        str(extensions),
        cwd=directory,
    )
    return Pki(
        directory, ca_cert, server_cert, server_key, other_ca_cert, tuple(hostnames), tuple(ips)
    )


class TlsTerminator:
    """``socat`` accepting TLS on ``host:port`` and forwarding plaintext to the upstream.

    One ``socat`` process forks a child per connection; all of them live in their own
    process group, which :meth:`stop` signals (by that group's id).
    """

    def __init__(
        self,
        pki: Pki,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        self.pki = pki
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = host
        self.port = find_free_port(host) if port is None else port
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    def command(self) -> list[str]:
        listen = (
            f"OPENSSL-LISTEN:{self.port},bind={self.host},reuseaddr,fork,"
            f"cert={self.pki.server_cert},key={self.pki.server_key},verify=0"
        )
        return ["socat", "-d", listen, f"TCP:{self.upstream_host}:{self.upstream_port}"]

    def read_log(self) -> str:
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def start(self, timeout: float = 15.0) -> TlsTerminator:
        fd, name = tempfile.mkstemp(prefix="aiokafka-lite-socat-", suffix=".log")
        self._log_path = Path(name)
        with os.fdopen(fd, "wb") as out:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        log.info("socat TLS %s:%d -> %s:%d", self.host, self.port, *self._upstream())
        return self

    def _upstream(self) -> tuple[str, int]:
        return self.upstream_host, self.upstream_port

    def _wait_ready(self, timeout: float) -> None:
        # Ready when a TLS handshake with the test CA completes.
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"socat exited ({self._proc.returncode}):\n{self.read_log()}")
            try:
                with (
                    socket.create_connection((self.host, self.port), timeout=2) as raw,
                    context.wrap_socket(raw, server_hostname=self.pki.hostnames[0]),
                ):
                    return
            except (OSError, ssl.SSLError) as exc:
                last = exc
                time.sleep(0.05)
        raise RuntimeError(f"socat TLS on port {self.port} not ready: {last!r}\n{self.read_log()}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                self._log_path.unlink()
            self._log_path = None

    def __enter__(self) -> TlsTerminator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
