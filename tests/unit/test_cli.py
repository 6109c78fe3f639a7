"""The command-line tool's pieces that need no broker: parsing, options, output."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from aiokafka_lite import cli, errors
from aiokafka_lite.cli.bench import ProgressBar
from aiokafka_lite.cli.consume import RecordFormatter
from aiokafka_lite.cli.produce import _read_lines
from aiokafka_lite.cli.shared import rate_summary


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_every_command_parses_with_connection_options_anywhere() -> None:
    args = parse("-b", "h1:9092", "topics", "create", "t", "-p", "3", "--timeout", "2")
    assert args.bootstrap_servers == "h1:9092" and args.timeout == 2.0 and args.partitions == 3
    args = parse("groups", "lag", "g", "--bootstrap-servers", "h2:9093")
    assert args.bootstrap_servers == "h2:9093"
    for argv in (
        ("produce", "t"),
        ("consume", "t", "u"),
        ("topics", "list"),
        ("topics", "delete", "t"),
        ("topics", "describe"),
        ("topics", "alter-config", "t", "--set", "a=b"),
        ("groups", "list"),
        ("groups", "describe", "g"),
        ("groups", "reset-offsets", "g", "--all-topics", "--to-latest"),
        ("groups", "delete", "g"),
        ("broker", "--port", "0"),
        ("bench", "produce", "t"),
        ("bench", "consume", "t"),
    ):
        assert callable(parse(*argv).func), argv


def test_usage_errors_are_one_line_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse("consume", "t", "--max-records", "0")
    assert exc.value.code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and "--max-records" in err


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n! another\nbootstrap.servers = b1:9092,b2:9092\n"
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.username=alice\nsasl.password: s3cret\n\n"
    )
    assert cli.read_config_file(str(path)) == {
        "bootstrap_servers": "b1:9092,b2:9092",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret",
    }
    conn = cli.resolve_connection(parse("topics", "list", "--config", str(path)), "x")
    assert conn.bootstrap_servers == "b1:9092,b2:9092"
    assert conn.security.sasl_mechanism == "SCRAM-SHA-256"
    assert conn.security.sasl_plain_password == "s3cret"
    assert "s3cret" not in repr(conn.security)
    path.write_text("bootstrap.servers\n")
    with pytest.raises(cli.UsageError, match=":1"):
        cli.read_config_file(str(path))


def test_connection_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "from-env:1")
    assert cli.resolve_connection(parse("topics", "list"), "x").bootstrap_servers == "from-env:1"
    path = tmp_path / "c.properties"
    path.write_text("bootstrap.servers=from-file:2\nrequest.timeout.ms=1234\n")
    conn = cli.resolve_connection(parse("topics", "list", "--config", str(path)), "x")
    assert conn.bootstrap_servers == "from-file:2" and conn.request_timeout_ms == 1234
    args = parse("topics", "list", "--config", str(path), "-b", "from-flag:3", "--timeout", "2")
    conn = cli.resolve_connection(args, "x")
    assert conn.bootstrap_servers == "from-flag:3" and conn.request_timeout_ms == 2000
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    assert cli.resolve_connection(parse("topics", "list"), "x").bootstrap_servers == (
        "localhost:9092"
    )


def test_security_protocol_is_inferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "pw")
    conn = cli.resolve_connection(parse("topics", "list", "--sasl-username", "bob"), "x")
    assert conn.security.security_protocol == "SASL_PLAINTEXT"
    assert conn.security.sasl_mechanism == "PLAIN"
    assert conn.security.sasl_plain_password == "pw"
    with pytest.raises(errors.ConfigurationError, match="SSL"):
        cli.resolve_connection(parse("topics", "list", "--ssl-cafile", "/nonexistent.pem"), "x")


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="client bug (found for issue 17, not fixed here): the message is 'cannot build SSL "
    "context: [Errno 2] No such file or directory', naming neither --ssl-cafile nor the file",
)
def test_missing_ssl_cafile_is_named() -> None:
    with pytest.raises(errors.ConfigurationError) as info:
        cli.resolve_connection(parse("topics", "list", "--ssl-cafile", "/nonexistent.pem"), "x")
    assert "/nonexistent.pem" in str(info.value)


def test_describe_error_and_exit_codes() -> None:
    error = errors.error_for_code(3, "topic 'nope'")
    text = cli.describe_error(error)
    assert text.startswith("topic 'nope': ") and text.endswith("[UNKNOWN_TOPIC_OR_PARTITION]")
    assert cli.exit_code_for(error) == cli.EXIT_FAILED
    assert cli.exit_code_for(errors.NoBrokersAvailableError("x")) == cli.EXIT_UNREACHABLE
    assert cli.exit_code_for(errors.AuthenticationFailedError("x")) == cli.EXIT_AUTH
    assert cli.exit_code_for(errors.error_for_code(29)) == cli.EXIT_AUTH
    assert cli.exit_code_for(errors.ConfigurationError("x")) == cli.EXIT_USAGE
    assert cli.exit_code_for(cli.UsageError("x")) == cli.EXIT_USAGE
    assert cli.exit_code_for(errors.KafkaTimeoutError("x")) == cli.EXIT_FAILED


def test_parse_timestamp() -> None:
    assert cli.parse_timestamp("1700000000000") == 1_700_000_000_000
    assert cli.parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert cli.parse_timestamp("2023-11-14T22:13:20") == 1_700_000_000_000  # UTC
    assert cli.parse_timestamp("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
    for bad in ("yesterday", "-5", "2023-13-01"):
        with pytest.raises(cli.UsageError):
            cli.parse_timestamp(bad)


def record(**fields: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 1000,
        "key": b"k",
        "value": b"v\xc3\xa9",
        "headers": [("h", b"1"), ("n", None)],
    }
    base.update(fields)
    return SimpleNamespace(**base)


def test_record_formats() -> None:
    assert RecordFormatter("plain", "text")(record()) == b"v\xc3\xa9\n"
    assert RecordFormatter("plain", "text")(record(value=None)) == b"\n"
    assert RecordFormatter("plain", "hex")(record(value=b"\x00\xff")) == b"00ff\n"
    line = json.loads(RecordFormatter("json", "text")(record()))
    assert line == {
        "topic": "t",
        "partition": 1,
        "offset": 7,
        "timestamp": 1000,
        "key": "k",
        "value": "vé",
        "headers": [["h", "1"], ["n", None]],
    }
    assert json.loads(RecordFormatter("json", "base64")(record(key=None)))["key"] is None
    template = RecordFormatter(r"{topic}[{partition}]@{offset}\t{key}={value} {headers}", "text")
    assert template(record()) == "t[1]@7\tk=vé h=1,n=\n".encode()
    with pytest.raises(cli.UsageError, match="offsets"):
        RecordFormatter("{offsets}", "text")


def test_progress_bar_and_summary() -> None:
    stream = io.StringIO()
    bar = ProgressBar(200, "produce", stream=stream, interval=0)
    bar.started -= 2.0
    line = bar.line(100, 1_000_000)
    assert line.startswith("produce [" + "#" * 15 + "." * 15 + "]  50% 100/200 records")
    assert "records/s" in line and "MB/s" in line and "ETA" in line
    bar.update(100, 1_000_000)
    bar.finish(200, 2_000_000)
    shown = stream.getvalue()
    assert shown.startswith("\r") and shown.endswith("\n") and shown.count("\r") == 2
    ProgressBar(10, "x", stream=stream, enabled=False).update(5, 5)
    assert stream.getvalue() == shown
    summary = rate_summary("Produced", 1000, 2_000_000, 2.0, "t")
    assert summary == ("Produced 1000 records (1.9 MiB) to t in 2.00 s: 500 records/s, 1.00 MB/s")


def test_config_file_receive_message_max_bytes(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("receive.message.max.bytes=209715200\n")
    conn = cli.resolve_connection(parse("topics", "list", "--config", str(path)), "x")
    assert conn.receive_message_max_bytes == 209715200
    assert conn.client_kwargs()["receive_message_max_bytes"] == 209715200
    plain = cli.resolve_connection(parse("topics", "list"), "x")
    assert "receive_message_max_bytes" not in plain.client_kwargs()
    path.write_text("receive.message.max.bytes=lots\n")
    with pytest.raises(cli.UsageError, match=r"receive\.message\.max\.bytes must be an int"):
        cli.resolve_connection(parse("topics", "list", "--config", str(path)), "x")


class _SmallReads(io.BytesIO):
    """A stream handing out ``size`` bytes per read, as a pipe does."""

    def __init__(self, data: bytes, size: int) -> None:
        super().__init__(data)
        self.size = size

    def read1(self, n: int | None = -1) -> bytes:
        return super().read1(self.size)


def _lines(data: bytes, size: int) -> list[bytes]:
    async def collect() -> list[bytes]:
        stop = SimpleNamespace(stopped=False)
        return [line async for line in _read_lines(_SmallReads(data, size), stop)]  # type: ignore[arg-type]

    return asyncio.run(collect())


@pytest.mark.parametrize("size", [1, 2, 3, 64])
def test_produce_input_lines_across_reads(size: int) -> None:
    data = b"a\r\n\nbc\r\n\xff\x00\nlast\r"
    assert _lines(data, size) == [b"a", b"", b"bc", b"\xff\x00", b"last"]


def test_produce_input_long_line_in_linear_time() -> None:
    """A 1.3 MB line in 64-byte reads: was 8 s (each read re-joined and re-split the
    whole line so far), now well under a second; the bound leaves room for a loaded CI."""
    started = time.perf_counter()
    lines = _lines(b"x" * (64 * 20_000) + b"\nend", 64)
    elapsed = time.perf_counter() - started
    assert [len(line) for line in lines] == [64 * 20_000, 3]
    assert elapsed < 3.0, elapsed
