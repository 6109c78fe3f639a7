"""The tool's TLS and SASL options against a broker behind TLS and SASL.

The set-up is the project's SecureStack (tests/reliability): Tansu behind a SASL front
(PLAIN and SCRAM users) and socat terminating TLS with a test CA.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_cli import assert_one_error_line, clean_env, cli_command, run
from tests.reliability.stack import SecureStack
from tests.reliability.tls import Pki, make_pki

# A skip with the reason where a tool is missing; a failure in CI (CI=true).
pytestmark = pytest.mark.requires_tool("openssl", "socat", install="apt-get install openssl socat")

USER, PASSWORD = "ops", "s3cret-ü"


@pytest.fixture(scope="module")
def cli() -> list[str]:
    return cli_command()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), hostnames=("localhost",))


@pytest.fixture(scope="module")
def stack(pki: Pki) -> Iterator[SecureStack]:
    with SecureStack(pki=pki, sasl_users={USER: PASSWORD}) as running:
        yield running


def secure_args(stack: SecureStack, pki: Pki, mechanism: str = "SCRAM-SHA-256") -> list[str]:
    return [
        "-b",
        stack.bootstrap_servers,
        "--ssl-cafile",
        str(pki.ca_cert),
        "--sasl-mechanism",
        mechanism,
        "--sasl-username",
        USER,
        "--timeout",
        "10",
    ]


def test_round_trip_over_sasl_ssl(cli: list[str], stack: SecureStack, pki: Pki) -> None:
    topic = f"secure-{uuid.uuid4().hex[:10]}"
    env = clean_env(KAFKA_SASL_PASSWORD=PASSWORD)
    args = secure_args(stack, pki)
    created = run(cli, "topics", "create", topic, "-p", "1", *args, env=env)
    assert created.returncode == 0, created.stderr
    produced = run(cli, "produce", topic, "-k", "=", *args, input="a=1\nb=2\n", env=env)
    assert produced.returncode == 0, produced.stderr
    consumed = run(
        cli,
        "consume",
        topic,
        "--from-beginning",
        "-n",
        "2",
        "-f",
        "{key}={value}",
        *secure_args(stack, pki, "PLAIN"),
        env=env,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["a=1", "b=2"]


def test_security_from_a_config_file(
    cli: list[str], stack: SecureStack, pki: Pki, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        f"bootstrap.servers={stack.bootstrap_servers}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={USER}\n"
        f"sasl.password={PASSWORD}\n"
        f"ssl.ca.location={pki.ca_cert}\n",
        encoding="utf-8",
    )
    listed = run(cli, "topics", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr


def test_wrong_password_is_an_authentication_failure(
    cli: list[str], stack: SecureStack, pki: Pki
) -> None:
    result = run(
        cli,
        "topics",
        "list",
        *secure_args(stack, pki),
        env=clean_env(KAFKA_SASL_PASSWORD="not-the-password"),
    )
    assert_one_error_line(result, 4, "authentication")
    assert "not-the-password" not in result.stderr


def test_untrusted_certificate_is_refused(cli: list[str], stack: SecureStack, pki: Pki) -> None:
    args = secure_args(stack, pki)
    args[args.index("--ssl-cafile") + 1] = str(pki.other_ca_cert)
    result = run(cli, "topics", "list", *args, env=clean_env(KAFKA_SASL_PASSWORD=PASSWORD))
    # The cluster cannot be reached (safely): status 3, the address in the message.
    assert_one_error_line(result, 3, stack.bootstrap_servers)


def test_no_tls_options_against_a_tls_port(cli: list[str], stack: SecureStack) -> None:
    result: subprocess.CompletedProcess[str] = run(
        cli, "topics", "list", "-b", stack.bootstrap_servers, "--timeout", "3"
    )
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
