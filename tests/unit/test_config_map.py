"""One option map: the same Kafka option, written for the CLI, for Spark and in Python,
reaches the same setting of the client built from it (one test per family of options).

The CLI reads it from a ``--config`` file, Spark as a ``kafka.`` option, Python code in
a dict given to ``*_from_config``; each builds its client, and the client's validated
configuration is compared.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import cli, config_map, errors
from aiokafka_lite.admin import AdminClient
from aiokafka_lite.cli.consume import consumer_kwargs
from aiokafka_lite.cli.produce import PRODUCE_DEFAULTS, producer_kwargs
from aiokafka_lite.config_map import (
    admin_from_config,
    consumer_from_config,
    parse_config,
    producer_from_config,
)
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.security import SecurityConfig
from aiokafka_lite.spark.options import parse_read_options, parse_write_options

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


# --- the three front ends ----------------------------------------------------------------


def via_cli(kind: str, options: Mapping[str, str], tmp_path: Path, *flags: str) -> Any:
    """The validated config of the client the CLI builds with ``options`` in --config."""
    path = tmp_path / f"{kind}.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in options.items()))
    command = {
        "producer": ["produce", "t"],
        "consumer": ["consume", "t"],
        "admin": ["topics", "list"],
    }
    args = cli.build_parser().parse_args([*command[kind], "--config", str(path), *flags])
    conn = cli.resolve_connection(args, "cli-default")
    if kind == "producer":
        return Producer(**producer_kwargs(conn, args, PRODUCE_DEFAULTS)).config
    if kind == "consumer":
        return Consumer(**consumer_kwargs(conn, args)).config
    return AdminClient(**conn.client_kwargs()).client


def via_spark(kind: str, options: Mapping[str, str]) -> Any:
    """The validated config of the client a Spark task builds from ``kafka.`` options."""
    spark = {f"kafka.{key}": value for key, value in options.items()}
    if kind == "producer":
        write = parse_write_options({**spark, "topic": "t"}, streaming=False)
        return Producer(**write.client.producer_kwargs()).config
    read = parse_read_options({**spark, "subscribe": "t"}, streaming=False)
    return Consumer(**read.client.consumer_kwargs()).config


def via_python(kind: str, options: Mapping[str, object]) -> Any:
    if kind == "producer":
        return producer_from_config(options).config
    if kind == "consumer":
        return consumer_from_config(options).config
    return admin_from_config(options).client


def security_of(config: Any) -> tuple[object, ...]:
    """What a SecurityConfig decides, its TLS context included (which CAs, which check)."""
    security: SecurityConfig = config.security
    context = security.ssl_context
    return (
        security.security_protocol,
        security.sasl_mechanism,
        security.sasl_plain_username,
        security.sasl_plain_password,
        None if context is None else context.check_hostname,
        None if context is None else context.verify_mode,
        None
        if context is None
        else tuple(sorted(str(c["subject"]) for c in context.get_ca_certs())),
    )


def same_everywhere(
    kind: str,
    options: Mapping[str, str],
    tmp_path: Path,
    expected: Mapping[str, object],
    spark: bool = True,
    read: Callable[[Any, str], object] = getattr,
) -> list[Any]:
    """Build the client three ways (two without Spark) and check ``expected`` in each."""
    built = [via_cli(kind, options, tmp_path), via_python(kind, options)]
    if spark:
        built.append(via_spark(kind, options))
    for config in built:
        assert {key: read(config, key) for key in expected} == expected, type(config)
    return built


BOOTSTRAP = {"bootstrap.servers": "b1:9092,b2:9093"}


# --- one test per family -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["producer", "consumer"])
def test_bootstrap_and_client_id(kind: str, tmp_path: Path) -> None:
    options = {"bootstrap.servers": " b1:9092,b2:9093 ", "client.id": "billing-7"}
    same_everywhere(
        kind,
        options,
        tmp_path,
        {"bootstrap_servers": "b1:9092,b2:9093", "client_id": "billing-7"},
    )
    # The admin client too (no Spark: the data source builds none).
    for admin in (via_cli("admin", options, tmp_path), via_python("admin", options)):
        assert admin.client_id == "billing-7"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is missing (apt-get install openssl)")
        pytest.skip("needs openssl to make test certificates (apt-get install openssl)")
    from tests.reliability.tls import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.mark.parametrize("kind", ["producer", "consumer"])
@pytest.mark.parametrize(
    ("hostname_option", "checked"),
    [
        ({}, True),
        ({"ssl.endpoint.identification.algorithm": ""}, False),
        ({"ssl.endpoint.identification.algorithm": "https"}, True),
        ({"ssl.check.hostname": "false"}, False),
    ],
)
def test_tls(
    kind: str, hostname_option: dict[str, str], checked: bool, pki: Any, tmp_path: Path
) -> None:
    options = {
        **BOOTSTRAP,
        "security.protocol": "ssl",
        "ssl.ca.location": str(pki.ca_cert),
        "ssl.certificate.location": str(pki.server_cert),
        "ssl.key.location": str(pki.server_key),
        **hostname_option,
    }
    built = same_everywhere(kind, options, tmp_path, {})
    seen = {security_of(config) for config in (*built, via_python("admin", options))}
    assert len(seen) == 1
    (protocol, _, _, _, check_hostname, _, cas) = seen.pop()
    assert (protocol, check_hostname) == ("SSL", checked)
    assert any("aiokafka-lite test CA" in subject for subject in cas)


@pytest.mark.parametrize("kind", ["producer", "consumer"])
@pytest.mark.parametrize(
    "credentials",
    [
        {"sasl.username": "alice", "sasl.password": "s3 cr=et"},
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="s3 cr=et";'
        },
    ],
    ids=["username", "jaas"],
)
def test_sasl(kind: str, credentials: dict[str, str], tmp_path: Path) -> None:
    options = {
        **BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "scram-sha-512",
        **credentials,
    }
    built = same_everywhere(kind, options, tmp_path, {})
    seen = {security_of(config) for config in (*built, via_python("admin", options))}
    assert seen == {("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "s3 cr=et", None, None, None)}


def test_producer_tuning(tmp_path: Path) -> None:
    options = {
        **BOOTSTRAP,
        "acks": "1",
        "compression.type": "gzip",
        "linger.ms": "25",
        "batch.size": "32768",
        "max.request.size": "2097152",
        "buffer.memory": "16777216",
        "max.block.ms": "5000",
        "delivery.timeout.ms": "90000",
        "enable.idempotence": "false",
        "max.in.flight.requests.per.connection": "3",
        "retry.backoff.max.ms": "2000",
        "partitioner.ignore.keys": "true",
    }
    same_everywhere(
        "producer",
        options,
        tmp_path,
        {
            "acks": 1,
            "compression_type": "gzip",
            "linger_ms": 25.0,
            "max_batch_size": 32768,
            "max_request_size": 2097152,
            "buffer_memory": 16777216,
            "max_block_ms": 5000,
            "delivery_timeout_ms": 90000,
            "enable_idempotence": False,
            "max_in_flight_requests_per_connection": 3,
            "retry_backoff_max_ms": 2000,
            "partitioner_ignore_keys": True,
        },
    )
    # A flag wins over the config file.
    flagged = via_cli("producer", options, tmp_path, "--linger-ms", "7", "--acks", "0")
    assert (flagged.linger_ms, flagged.acks, flagged.max_batch_size) == (7.0, 0, 32768)


def test_consumer_tuning(tmp_path: Path) -> None:
    options = {
        **BOOTSTRAP,
        "fetch.min.bytes": "10",
        "fetch.max.bytes": "10485760",
        "fetch.max.wait.ms": "100",
        "max.partition.fetch.bytes": "2097152",
        "isolation.level": "read_committed",
        "check.crcs": "false",
        "client.rack": "rack-2",
    }
    same_everywhere(
        "consumer",
        options,
        tmp_path,
        {
            "fetch_min_bytes": 10,
            "fetch_max_bytes": 10485760,
            "fetch_max_wait_ms": 100,
            "max_partition_fetch_bytes": 2097152,
            "isolation_level": "read_committed",
            "check_crcs": False,
            "client_rack": "rack-2",
        },
    )


def test_consumer_group(tmp_path: Path) -> None:
    options = {
        **BOOTSTRAP,
        "group.id": "billing",
        "group.instance.id": "billing-1",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": "20000",
        "heartbeat.interval.ms": "2000",
        "max.poll.records": "50",
        "max.poll.interval.ms": "60000",
        "partition.assignment.strategy": (
            "org.apache.kafka.clients.consumer.RoundRobinAssignor, range"
        ),
    }
    # Spark's source reads assigned partitions outside any group: it refuses these.
    built = same_everywhere(
        "consumer",
        options,
        tmp_path,
        {
            "group_id": "billing",
            "group_instance_id": "billing-1",
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 20000,
            "heartbeat_interval_ms": 2000,
            "max_poll_records": 50,
            "max_poll_interval_ms": 60000,
        },
        spark=False,
    )
    for config in built:
        assert [a.name for a in config.assignors] == ["roundrobin", "range"]
    with pytest.raises(errors.ConfigurationError, match="without a consumer group"):
        via_spark("consumer", options)
    # consume's own flags win over the file; it commits what it prints itself.
    flagged = via_cli("consumer", options, tmp_path, "--group", "other", "--from-beginning")
    assert (flagged.group_id, flagged.auto_offset_reset, flagged.enable_auto_commit) == (
        "other",
        "earliest",
        False,
    )
    with pytest.raises(cli.UsageError, match=r"enable\.auto\.commit"):
        via_cli("consumer", {**options, "enable.auto.commit": "true"}, tmp_path)


@pytest.mark.parametrize("kind", ["producer", "consumer"])
def test_timeouts_and_limits(kind: str, tmp_path: Path) -> None:
    options = {
        **BOOTSTRAP,
        "request.timeout.ms": "12000",
        "socket.connection.setup.timeout.ms": "4000",
        "metadata.max.age.ms": "60000",
        "retry.backoff.ms": "250",
        "reconnect.backoff.ms": "75",
        "reconnect.backoff.max.ms": "3000",
        "receive.message.max.bytes": "209715200",
    }
    expected = {
        "request_timeout_ms": 12000,
        "connect_timeout_ms": 4000,
        "metadata_max_age_ms": 60000,
        "retry_backoff_ms": 250,
        "reconnect_backoff_ms": 75,
        "reconnect_backoff_max_ms": 3000,
        "receive_message_max_bytes": 209715200,
    }
    same_everywhere(kind, options, tmp_path, expected)
    admin_options = {k: v for k, v in options.items() if not k.startswith("reconnect.")}
    for admin in (via_cli("admin", admin_options, tmp_path), via_python("admin", admin_options)):
        assert admin.request_timeout_ms == 12000


# --- names, values, errors ----------------------------------------------------------------


def test_values_convert_alike_from_strings_and_python_values() -> None:
    as_text = parse_config(
        {"linger.ms": "20", "enable.idempotence": "TRUE", "batch.size": " 100 ", "acks": "all"}
    )
    as_python = parse_config(
        {"linger.ms": 20, "enable.idempotence": True, "batch.size": 100, "acks": "all"}
    )
    assert (
        as_text
        == as_python
        == {
            "linger_ms": 20.0,
            "enable_idempotence": True,
            "max_batch_size": 100,
            "acks": "all",
        }
    )
    assert parse_config({"partition.assignment.strategy": "range, sticky"}) == parse_config(
        {"partition.assignment.strategy": ["range", "sticky"]}
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"linger.msx": "5"}, r"unknown option linger\.msx; did you mean linger\.ms\?"),
        ({"fetch.max.bites": "1"}, r"did you mean fetch\.max\.bytes\?"),
        ({"no.such.thing": "1"}, r"^unknown option no\.such\.thing$"),
        ({"batch.size": "big"}, r"batch\.size must be an integer, got 'big'"),
        ({"check.crcs": "maybe"}, r"check\.crcs must be true or false"),
        ({"ssl.truststore.location": "x.jks"}, "JKS"),
        (
            {"ssl.check.hostname": "true", "ssl.endpoint.identification.algorithm": "https"},
            "set the same thing",
        ),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "https, or empty or none"),
    ],
)
def test_bad_options_are_named(options: dict[str, str], match: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=match):
        parse_config(options)


def test_the_cli_names_the_line_and_the_close_match(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("bootstrap.servers=h:1\nlinger.msx=5\n")
    with pytest.raises(cli.UsageError, match=r"c\.properties:2: unknown option linger\.msx; did"):
        cli.read_config_file(str(path))


def test_from_config_refuses_what_does_not_fit() -> None:
    with pytest.raises(
        errors.ConfigurationError, match=r"linger\.ms does not apply to the consumer"
    ):
        consumer_from_config({**BOOTSTRAP, "linger.ms": "5"})
    with pytest.raises(errors.ConfigurationError, match=r"group\.id does not apply to the admin"):
        admin_from_config({**BOOTSTRAP, "group.id": "g"})
    with pytest.raises(errors.ConfigurationError, match="linger_ms is given twice"):
        producer_from_config({**BOOTSTRAP, "linger.ms": "5"}, linger_ms=6)
    with pytest.raises(errors.ConfigurationError, match=r"sasl\.\* options need"):
        producer_from_config({**BOOTSTRAP, "sasl.username": "u", "sasl.password": "p"})
    producer = producer_from_config(BOOTSTRAP, value_serializer=str.encode)
    assert producer.config.value_serializer is str.encode


def test_the_docs_example_builds_its_clients() -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    names: dict[str, Any] = {}
    exec(compile(example, str(DOCS), "exec"), names)  # builds clients; connects to nothing
    assert names["producer"].config.linger_ms == 20.0
    assert names["producer"].config.security.sasl_plain_username == "billing"
    assert names["consumer"].config.group_id == "billing"


def test_every_option_is_in_the_docs_table() -> None:
    """docs/configuration.md has a row ``| `name` | `keyword` | ...`` per option, no more."""
    rows = set(re.findall(r"^\| `([a-z.]+)` \| `([a-z_]+)` \|", DOCS.read_text(), re.M))
    table = {(option.name, option.keyword) for option in config_map.all_options()}
    assert rows == table
