"""The ``aiokafka-lite`` tool, run in a subprocess against the real broker."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.testing import find_free_port
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import CLOSE, api_versions_body, produce_one_by_one, serve_requests, unique


def cli_command() -> list[str]:
    """The tool as the console script runs it (``aiokafka_lite.cli:main``), from this checkout.

    ``python -m`` imports the package under test; an installed ``aiokafka-lite`` script
    may belong to another checkout. tests/unit/test_cli_layout.py checks that the
    console script names the same ``main``.
    """
    return [sys.executable, "-m", "aiokafka_lite.cli"]


@pytest.fixture(scope="module")
def cli() -> list[str]:
    return cli_command()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    env.update(extra)
    return env


def run(
    cli: Sequence[str],
    *args: str,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run(
        [*cli, *args],
        input=data,
        capture_output=True,
        env=env if env is not None else clean_env(),
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def assert_one_error_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("aiokafka-lite") and "error:" in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    for word in words:
        assert word.lower() in lines[0].lower(), (word, lines[0])


NOIDA_NO_TOPIC_IDS = (
    "noida-db 0.2.3 answers Metadata v10-v12 and CreateTopics v7 with the all-zero topic id"
)


# --- produce | consume --------------------------------------------------------------------


def test_round_trip_with_keys_and_headers_as_json(cli: list[str], bootstrap_servers: str) -> None:
    topic = unique("rt")
    b = ("-b", bootstrap_servers)
    created = run(cli, "topics", "create", topic, "--partitions", "2", *b)
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == f"Created topic {topic}."
    lines = ["user1:hello", "user2:wörld", "user1:again", "user3:with:colons", "user2:"]
    produced = run(
        cli,
        "produce",
        topic,
        "-k",
        ":",
        "-H",
        "trace=abc",
        "-H",
        "src=cli",
        *b,
        input="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert re.search(
        r"Produced 5 records \(.*\) to .* in [\d.]+ s: [\d,]+ records/s, [\d.]+ MB/s",
        produced.stderr,
    ), produced.stderr
    consumed = run(cli, "consume", topic, "--from-beginning", "-n", "5", "-f", "json", *b)
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(records) == 5
    assert sorted((r["key"], r["value"]) for r in records) == sorted(
        tuple(line.split(":", 1)) for line in lines
    )
    for r in records:
        assert r["topic"] == topic
        assert r["headers"] == [["trace", "abc"], ["src", "cli"]]
        assert r["partition"] in (0, 1)
        assert isinstance(r["offset"], int) and isinstance(r["timestamp"], int)
    # The same key always lands in the same partition.
    by_key: dict[str, set[int]] = {}
    for r in records:
        by_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(parts) == 1 for parts in by_key.values())
    assert "Consumed 5 records." in consumed.stderr


def test_plain_and_template_output(cli: list[str], bootstrap_servers: str) -> None:
    topic = unique("fmt")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    assert run(cli, "produce", topic, "-k", "=", *b, input="a=1\nb=2\n").returncode == 0
    plain = run(cli, "consume", topic, "--from-beginning", "-n", "2", *b)
    assert plain.stdout.splitlines() == ["1", "2"]
    template = run(
        cli,
        "consume",
        topic,
        "--offset",
        "earliest",
        "-n",
        "2",
        "-q",
        "-f",
        r"{partition}/{offset}\t{key}->{value}",
        *b,
    )
    assert template.stdout.splitlines() == ["0/0\ta->1", "0/1\tb->2"]
    assert template.stderr == ""


def test_read_committed_offset_from_the_end_counts_from_the_last_stable_offset(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`consume T -p 0 --offset=-1 --isolation-level read_committed` while a transaction
    is open on T-0: the last record it may read is the committed one before the open
    transaction. Counted from the high watermark, -1 started inside the transaction and
    printed nothing at all."""
    from aiokafka_lite.producer import Producer

    topic = unique("lso")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    assert run(cli, "produce", topic, "-q", *b, input="committed\n").returncode == 0

    async def with_open_transaction() -> subprocess.CompletedProcess[str]:
        producer = Producer(bootstrap_servers=bootstrap_servers, transactional_id=unique("tx"))
        await producer.start()
        try:
            await producer.begin_transaction()
            await (await producer.send(topic, b"open", partition=0))
            options = ("-p", "0", "--offset=-1", "-n", "1", "--idle-timeout", "5")
            isolation = ("--isolation-level", "read_committed")
            return await asyncio.to_thread(run, cli, "consume", topic, *options, *isolation, *b)
        finally:
            await producer.abort_transaction()
            await producer.stop()

    consumed = asyncio.run(with_open_transaction())
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["committed"]


def test_consume_stops_when_the_reader_of_its_pipe_goes_away(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`consume ... | head -2` on a topic with no new records: once head exits, consume
    must exit too (the shell waits for both); no further write would tell it."""
    topic = unique("pipe")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    assert run(cli, "produce", topic, *b, input="a\nb\n").returncode == 0
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [*cli, "consume", topic, "--from-beginning", *b],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            # As `head -2` does: both records read, then the reader goes away.
            assert [reader.readline(), reader.readline()] == [b"a\n", b"b\n"]
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert b"Traceback" not in stderr, stderr


def test_produce_files_to_a_partition_with_a_codec(
    cli: list[str], bootstrap_servers: str, tmp_path: Path
) -> None:
    topic = unique("files")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "3", *b).returncode == 0
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("one\ntwo\n")
    second.write_text("three\r\nfour")  # CRLF and no final newline
    produced = run(
        cli,
        "produce",
        topic,
        str(first),
        str(second),
        "-p",
        "1",
        "--codec",
        "gzip",
        "--acks",
        "1",
        *b,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = run(cli, "consume", topic, "-p", "1", "--offset", "earliest", "-n", "4", *b)
    assert consumed.stdout.splitlines() == ["one", "two", "three", "four"]
    later = run(cli, "consume", topic, "-p", "1", "--offset", "2", "-n", "2", *b)
    assert later.stdout.splitlines() == ["three", "four"]
    empty = run(cli, "consume", topic, "-p", "0", "--offset", "earliest", "--idle-timeout", "1", *b)
    assert empty.returncode == 0 and empty.stdout == ""


def test_consume_from_the_end_and_from_a_time(
    cli: list[str], bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    topic = unique("when")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    # Recent timestamps: a broker may delete records older than retention.ms (7 days by
    # default) at any time, and noida-db does so within a second.
    base = (int(time.time()) - 3600) * 1000
    asyncio.run(produce_one_by_one(bootstrap_servers, topic, 6, base_ts=base, prefix="r"))
    last_two = run(cli, "consume", topic, "--offset=-2", "-n", "2", "--idle-timeout", "20", *b)
    assert last_two.stdout.splitlines() == ["r4", "r5"], last_two.stderr
    iso = (
        datetime.datetime.fromtimestamp((base + 2500) / 1000, datetime.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )
    since = run(cli, "consume", topic, "--timestamp", iso, "-n", "3", "--idle-timeout", "20", *b)
    with expect_deviation(
        "tansu", "Tansu 0.6.0 ignores the timestamp of ListOffsets (answers the earliest)"
    ):
        assert since.stdout.splitlines() == ["r3", "r4", "r5"], since.stderr


def test_produce_from_dev_null(cli: list[str], bootstrap_servers: str) -> None:
    """`produce T < /dev/null` (a script with no input, cron) and `produce T /dev/null`:
    no records, status 0. A character device cannot be watched by epoll: both failed
    with 'error: [Errno 1] Operation not permitted', status 1."""
    topic = unique("null")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    for args, stdin in (((), subprocess.DEVNULL), ((os.devnull,), None)):
        done = subprocess.run(
            [*cli, "produce", topic, *args, *b],
            stdin=stdin,
            capture_output=True,
            env=clean_env(),
            timeout=60,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("Produced 0 records"), done.stderr


def test_produce_line_without_key_separator_fails(cli: list[str], bootstrap_servers: str) -> None:
    topic = unique("nosep")
    assert run(cli, "topics", "create", topic, "-b", bootstrap_servers).returncode == 0
    result = run(cli, "produce", topic, "-k", ":", "-b", bootstrap_servers, input="a:1\nplain\n")
    assert_one_error_line(result, 1, "<stdin>:2", "separator", "1 record before it delivered")


def test_produce_record_too_large_says_where_and_what_was_delivered(
    cli: list[str], bootstrap_servers: str
) -> None:
    """A line the producer refuses stops the input; the error names the line and how
    many records before it were delivered (they are: a rerun would duplicate them)."""
    topic = unique("large")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    huge = "z" * 1_100_000  # past the default max_request_size (1 MiB)
    result = run(cli, "produce", topic, *b, input=f"a\nb\n{huge}\nc\n")
    assert_one_error_line(
        result, 1, "<stdin>:3", "max_request_size", "2 records before it delivered"
    )
    back = run(cli, "consume", topic, "--from-beginning", "-n", "3", "--idle-timeout", "3", *b)
    assert back.stdout.splitlines() == ["a", "b"], back.stderr


# --- topics -------------------------------------------------------------------------------


def test_topics_commands(
    cli: list[str], bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    topic = unique("topics")
    b = ("-b", bootstrap_servers)
    created = run(cli, "topics", "create", topic, "-p", "3", "-c", "retention.ms=3600000", *b)
    assert created.returncode == 0, created.stderr
    assert topic in run(cli, "topics", "list", *b).stdout.splitlines()
    described = run(cli, "topics", "describe", topic, *b)
    assert described.returncode == 0
    assert f"Topic: {topic}" in described.stdout and "PartitionCount: 3" in described.stdout
    assert described.stdout.count("\tPartition: ") == 3
    as_json = json.loads(run(cli, "topics", "describe", topic, "--json", *b).stdout)
    assert [p["partition"] for p in as_json["partitions"]] == [0, 1, 2]
    altered = run(cli, "topics", "alter-config", topic, "--set", "retention.ms=7200000", *b)
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.strip() == f"Updated config of topic {topic}."
    configs = json.loads(
        run(cli, "topics", "describe", topic, "--configs", "--all-configs", "--json", *b).stdout
    )["configs"]
    assert configs["retention.ms"] == "7200000"
    deleted = run(cli, "topics", "delete", topic, *b)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"Deleted topic {topic}."
    again = run(cli, "topics", "delete", topic, *b)
    assert_one_error_line(again, 1, topic)
    assert run(cli, "topics", "delete", topic, "--if-exists", *b).returncode == 0
    with expect_deviation("noida", NOIDA_NO_TOPIC_IDS):
        assert as_json["topic_id"]


def test_create_existing_topic_next_to_a_new_one(cli: list[str], bootstrap_servers: str) -> None:
    old, new = unique("old"), unique("new")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", old, *b).returncode == 0
    both = run(cli, "topics", "create", old, new, *b)
    assert both.stdout.strip() == f"Created topic {new}."
    assert_one_error_line(both, 1, old, "already exists")
    assert run(cli, "topics", "create", old, "--if-not-exists", *b).returncode == 0
    described = run(cli, "topics", "describe", new, unique("missing"), *b)
    assert f"Topic: {new}" in described.stdout
    assert_one_error_line(described, 1, "missing")


def test_if_not_exists_and_if_exists_do_not_claim_what_they_did_not_do(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`topics create T --if-not-exists` on an existing T created nothing, and `topics
    delete T --if-exists` on a missing T deleted nothing: neither may say it did."""
    old, new, missing = unique("old"), unique("new"), unique("missing")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", old, *b).returncode == 0
    created = run(cli, "topics", "create", old, new, "--if-not-exists", *b)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [
        f"Topic {old} already exists.",
        f"Created topic {new}.",
    ]
    deleted = run(cli, "topics", "delete", missing, new, "--if-exists", *b)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == [
        f"Topic {missing} does not exist.",
        f"Deleted topic {new}.",
    ]


# --- groups -------------------------------------------------------------------------------


def lag_rows(cli: list[str], bootstrap: str, group: str) -> list[dict[str, Any]]:
    result = run(cli, "groups", "lag", group, "--json", "-b", bootstrap)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def consume_in_group(
    cli: list[str], bootstrap: str, topic: str, group: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """``consume`` as a member of ``group`` (a short session, for quick rejoins)."""
    return run(
        cli,
        "consume",
        topic,
        "-g",
        group,
        "--session-timeout-ms",
        "6000",
        *options,
        "-b",
        bootstrap,
    )


def test_group_run_into_a_closed_pipe_commits_nothing_it_did_not_print(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`consume -g G ... | true`: the reader is gone before the first record is written.
    None was printed, so none may be committed (the run committed the consumer's
    position, past the whole fetched batch, and the next run of the group skipped it)."""
    topic, group = unique("gone"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    assert run(cli, "produce", topic, "-q", *b, input="a\nb\nc\n").returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*cli, "consume", topic, "-g", group, "-p", "0", "--offset", "earliest", *b],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=clean_env(),
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr, done.stderr
    assert [row["committed_offset"] for row in lag_rows(cli, bootstrap_servers, group)] in (
        [],
        [0],
        [None],
    )
    again = consume_in_group(cli, bootstrap_servers, topic, group, "-p", "0", "-n", "3")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["a", "b", "c"]


def test_group_run_stopped_by_n_keeps_its_start_on_unprinted_partitions(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`consume -g G --from-beginning -n 2` prints from one partition only; the next
    `consume -g G` must still see the other partition's records: the first run commits
    where it started there, instead of nothing (then the reset to the end skipped them)."""
    topic, group = unique("start"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "2", *b).returncode == 0
    for partition, prefix in (("0", "a"), ("1", "b")):
        lines = "".join(f"{prefix}{i}\n" for i in range(3))
        sent = run(cli, "produce", topic, "-p", partition, "-q", *b, input=lines)
        assert sent.returncode == 0, sent.stderr
    first = consume_in_group(cli, bootstrap_servers, topic, group, "--from-beginning", "-n", "2")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 2
    rest = consume_in_group(cli, bootstrap_servers, topic, group, "-n", "4", "--idle-timeout", "20")
    assert rest.returncode == 0, rest.stderr
    assert sorted(first.stdout.splitlines() + rest.stdout.splitlines()) == [
        "a0",
        "a1",
        "a2",
        "b0",
        "b1",
        "b2",
    ]


def test_group_lag_after_partial_consumption(cli: list[str], bootstrap_servers: str) -> None:
    topic, group = unique("lag"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    asyncio.run(produce_one_by_one(bootstrap_servers, topic, 10, prefix="r"))
    consumed = consume_in_group(cli, bootstrap_servers, topic, group, "--from-beginning", "-n", "4")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["r0", "r1", "r2", "r3"]
    (row,) = lag_rows(cli, bootstrap_servers, group)
    assert (row["topic"], row["partition"]) == (topic, 0)
    assert (row["committed_offset"], row["end_offset"], row["lag"]) == (4, 10, 6)
    table = run(cli, "groups", "lag", group, *b)
    assert table.stdout.splitlines()[0].split()[:5] == [
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "END-OFFSET",
        "LAG",
    ]
    assert f"Total lag of group {group}: 6" in table.stdout
    # The next run of the group goes on where the first stopped.
    rest = consume_in_group(cli, bootstrap_servers, topic, group, "-n", "6")
    assert rest.stdout.splitlines() == [f"r{i}" for i in range(4, 10)]
    assert lag_rows(cli, bootstrap_servers, group)[0]["lag"] == 0


def test_group_lag_with_batched_records(
    cli: list[str], bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    topic, group = unique("lagb"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    lines = "".join(f"r{i}\n" for i in range(10))
    assert run(cli, "produce", topic, "--linger-ms", "100", *b, input=lines).returncode == 0
    options = ("-p", "0", "--offset", "earliest", "-n", "4")
    assert consume_in_group(cli, bootstrap_servers, topic, group, *options).returncode == 0
    (row,) = lag_rows(cli, bootstrap_servers, group)
    assert row["committed_offset"] == 4
    with expect_deviation(
        "tansu",
        "Tansu 0.6.0 answers ListOffsets(latest) with the last batch's base offset + 1 "
        "when that batch holds several records",
    ):
        assert (row["end_offset"], row["lag"]) == (10, 6)


def test_groups_list_describe_reset_and_delete(cli: list[str], bootstrap_servers: str) -> None:
    topic, group = unique("grp"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "1", *b).returncode == 0
    asyncio.run(produce_one_by_one(bootstrap_servers, topic, 5, prefix="r"))
    # An explicit partition with a group: offsets are committed, no rebalance involved.
    options = ("-p", "0", "--offset", "earliest", "-n", "3")
    read = consume_in_group(cli, bootstrap_servers, topic, group, *options)
    assert read.returncode == 0, read.stderr
    assert group in run(cli, "groups", "list", *b).stdout.splitlines()
    described = run(cli, "groups", "describe", group, *b)
    assert described.returncode == 0 and f"Group: {group}" in described.stdout
    assert json.loads(run(cli, "groups", "describe", group, "--json", *b).stdout)["group"] == group

    dry = run(cli, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", *b)
    assert dry.returncode == 0 and "Dry run" in dry.stderr
    assert dry.stdout.splitlines()[1].split() == [topic, "0", "3", "0"]
    assert lag_rows(cli, bootstrap_servers, group)[0]["committed_offset"] == 3
    done = run(
        cli,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:0",
        "--to-offset",
        "1",
        "--execute",
        *b,
    )
    assert done.returncode == 0, done.stderr
    assert lag_rows(cli, bootstrap_servers, group)[0]["committed_offset"] == 1
    shifted = run(
        cli, "groups", "reset-offsets", group, "--all-topics", "--shift-by", "2", "--execute", *b
    )
    assert shifted.returncode == 0, shifted.stderr
    assert lag_rows(cli, bootstrap_servers, group)[0]["committed_offset"] == 3
    again = consume_in_group(cli, bootstrap_servers, topic, group, "-p", "0", "-n", "2")
    assert again.stdout.splitlines() == ["r3", "r4"]

    deleted = run(cli, "groups", "delete", group, *b)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"Deleted group {group}."
    assert group not in run(cli, "groups", "list", *b).stdout.splitlines()


def test_reset_offsets_of_an_active_group_says_why_it_cannot(
    cli: list[str], bootstrap_servers: str
) -> None:
    """`groups reset-offsets G --execute` while a consumer of G runs: the broker refuses
    each partition as UNKNOWN_MEMBER_ID ("The coordinator does not know this member
    id", one line per partition), which says nothing of the cause. One line must say
    the group has active members, and nothing may change."""
    topic, group = unique("act"), unique("g")
    b = ("-b", bootstrap_servers)
    assert run(cli, "topics", "create", topic, "-p", "2", *b).returncode == 0
    assert run(cli, "produce", topic, "-q", *b, input="a\nb\n").returncode == 0
    member = subprocess.Popen(
        [
            *cli,
            "consume",
            topic,
            "-g",
            group,
            "--from-beginning",
            "--session-timeout-ms",
            "6000",
            *b,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        assert member.stdout is not None
        assert sorted([member.stdout.readline(), member.stdout.readline()]) == [b"a\n", b"b\n"]
        reset = run(
            cli,
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
            *b,
        )
        assert_one_error_line(reset, 1, group, "active member")
    finally:
        member.send_signal(signal.SIGTERM)
        member.communicate(timeout=60)
    committed = {
        row["partition"]: row["committed_offset"] for row in lag_rows(cli, bootstrap_servers, group)
    }
    assert sum(offset or 0 for offset in committed.values()) == 2, committed


def test_describe_missing_group_fails(
    cli: list[str], bootstrap_servers: str, expect_deviation: ExpectDeviation
) -> None:
    missing = unique("nobody")
    result = run(cli, "groups", "describe", missing, "-b", bootstrap_servers)
    with expect_deviation(
        "tansu", "Tansu 0.6.0 describes an unknown group as Empty instead of Dead"
    ):
        assert result.returncode == 1, result.stdout
    assert_one_error_line(result, 1, missing, "does not exist")


# --- connection options and errors ---------------------------------------------------------


def test_unreachable_broker(cli: list[str]) -> None:
    address = f"127.0.0.1:{find_free_port()}"
    for command in (("topics", "list"), ("consume", "t", "-n", "1"), ("groups", "list")):
        started = time.monotonic()
        result = run(cli, *command, "-b", address, "--timeout", "1.5")
        assert_one_error_line(result, 3, address)
        assert time.monotonic() - started < 15


def test_unknown_topic(cli: list[str], bootstrap_servers: str) -> None:
    missing = unique("missing")
    b = ("-b", bootstrap_servers)
    assert_one_error_line(run(cli, "consume", missing, *b), 1, missing, "does not exist")
    assert_one_error_line(run(cli, "produce", missing, *b, input="x\n"), 1, missing)
    assert_one_error_line(run(cli, "topics", "describe", missing, *b), 1, missing)
    assert_one_error_line(run(cli, "bench", "consume", missing, *b), 1, missing)


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "create"),
        ("consume", "t", "--offset", "banana"),
        ("produce", "t", "--acks", "7"),
        ("produce", "t", "-p", "-1"),  # was a TypeError traceback from Producer.send
        ("no-such-command",),
        ("topics", "create", "t", "--partitions", "0"),
        ("topics", "create", "t", "--partitions", "2147483648"),  # was a ValueError traceback
        ("topics", "create", "t", "--replication-factor", "32768"),  # likewise (INT16)
        ("topics", "add-partitions", "t", "--partitions", "2147483648"),
        ("groups", "reset-offsets", "g", "--topic", "t"),
        ("consume", "t", "--timeout", "-1"),
        ("topics", "list", "--timeout", "inf"),  # was an OverflowError traceback
        ("topics", "list", "--config", "/nonexistent/client.properties"),
        ("topics", "alter-config", "t"),
        ("consume", "t", "-f", "{nonsense}"),
        ("consume", "t", "-f", "{value.x}"),  # was an AttributeError traceback
        ("consume", "t", "-f", "{offset[0]}"),  # was a TypeError traceback
        ("consume", "t", "--offset", "1", "--timestamp", "5"),
        ("groups", "reset-offsets", "g", "--to-datetime", "yesterday", "--all-topics"),
        # Numbers past what the protocol carries: were tracebacks (OverflowError from
        # bind(), ValueError from the request's encoder).
        ("broker", "--port", "65536"),
        ("consume", "t", "--timestamp", "9223372036854775808"),
        ("consume", "t", "--timestamp", "1969-12-31T23:59:59Z"),  # negative: a special value
        ("groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "99999999999999999999"),
        ("groups", "reset-offsets", "g", "--topic", "t:2147483648", "--to-latest"),
        ("log-dirs", "--topic", "t:2147483648"),
        ("transactions", "producers", "--topic", "t:2147483648"),
        ("transactions", "list", "--producer-id", "9223372036854775808"),
        ("transactions", "list", "--min-duration-ms", "9223372036854775808"),
        # Past INT64: the fetch could not be encoded, logged only with -v; the run printed
        # nothing until --idle-timeout, then exited 0.
        ("consume", "t", "--offset", "9223372036854775808"),
        ("consume", "t", "--offset=-9223372036854775808"),
        # Were taken: nan never stopped, a negative time stopped at once.
        ("consume", "t", "--idle-timeout", "nan"),
        ("consume", "t", "--idle-timeout", "-1"),
        ("bench", "consume", "t", "--idle-timeout", "nan"),
        ("bench", "consume", "t", "--idle-timeout", "-1"),
    ],
)
def test_bad_arguments(cli: list[str], args: tuple[str, ...]) -> None:
    address = f"127.0.0.1:{find_free_port()}"
    result = run(cli, *args, "-b", address, "--timeout", "1")
    assert_one_error_line(result, 2)


@pytest.mark.parametrize(
    ("args", "closed"),
    [
        (("topics", "list"), 1),
        (("consume", "t"), 1),
        (("produce", "t"), 0),
        (("users", "set", "alice"), 0),
    ],
)
def test_closed_standard_streams(cli: list[str], args: tuple[str, ...], closed: int) -> None:
    """Run with stdout (`>&-`) or stdin (`<&-`) closed, as from a daemon: Python's
    sys.stdout / sys.stdin is None, and the command failed with an AttributeError
    traceback ('NoneType' object has no attribute 'buffer')."""
    address = f"127.0.0.1:{find_free_port()}"
    shell = " ".join([*cli, *args, "-b", address, "--timeout", "1", f"{closed}>&-"])
    done = subprocess.run(
        ["sh", "-c", shell], capture_output=True, env=clean_env(), timeout=60, text=True
    )
    assert_one_error_line(done, 2, "closed")


def test_timeout_too_large_for_milliseconds(cli: list[str]) -> None:
    # Finite in seconds, infinite in ms: was an OverflowError traceback.
    address = f"127.0.0.1:{find_free_port()}"
    result = run(cli, "topics", "list", "-b", address, "--timeout", "1e308")
    assert_one_error_line(result, 2, "--timeout")


def test_bad_config_file_key(cli: list[str], tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=localhost:1\nnot.a.setting=1\n")
    result = run(cli, "topics", "list", "--config", str(config))
    assert_one_error_line(result, 2, "not.a.setting", ":2")


def test_users_set_password_not_utf8(cli: list[str]) -> None:
    address = f"127.0.0.1:{find_free_port()}"
    result = run(cli, "users", "set", "alice", "-b", address, "--timeout", "1", input=b"\xffab\n")
    assert_one_error_line(result, 2, "password", "UTF-8")


def test_config_file_not_utf8(cli: list[str], tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_bytes(b"bootstrap.servers=localhost:1\nclient.id=caf\xe9\n")  # Latin-1
    result = run(cli, "topics", "list", "--config", str(config))
    assert_one_error_line(result, 2, "config file", "UTF-8")


def test_config_file_and_environment(
    cli: list[str], bootstrap_servers: str, tmp_path: Path
) -> None:
    topic = unique("cfg")
    assert run(cli, "topics", "create", topic, "-b", bootstrap_servers).returncode == 0
    config = tmp_path / "client.properties"
    config.write_text(f"# our cluster\nbootstrap.servers={bootstrap_servers}\nclient.id=cfg-test\n")
    assert topic in run(cli, "topics", "list", "--config", str(config)).stdout.splitlines()
    env = clean_env(KAFKA_BOOTSTRAP_SERVERS=bootstrap_servers)
    assert topic in run(cli, "topics", "list", env=env).stdout.splitlines()
    # The flag wins over the environment.
    env = clean_env(KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{find_free_port()}")
    listed = run(cli, "topics", "list", "-b", bootstrap_servers, env=env)
    assert topic in listed.stdout.splitlines()
    # Options may come before the command too.
    assert topic in run(cli, "-b", bootstrap_servers, "topics", "list").stdout.splitlines()


def test_python_dash_m(bootstrap_servers: str) -> None:
    version = run([sys.executable, "-m", "aiokafka_lite"], "--version")
    assert version.returncode == 0 and version.stdout.startswith("aiokafka-lite ")
    listed = run([sys.executable, "-m", "aiokafka_lite"], "topics", "list", "-b", bootstrap_servers)
    assert listed.returncode == 0, listed.stderr


class SaslRefusingBroker:
    """Answers ApiVersions and SaslHandshake, then refuses every SASL authentication."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SaslRefusingBroker:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    @staticmethod
    def _answer(header: RequestHeader, _body: dict[str, Any]) -> dict[str, Any]:
        if header.api_key == ApiKey.API_VERSIONS:
            return api_versions_body()
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            return {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
        if header.api_key == ApiKey.SASL_AUTHENTICATE:
            return {
                "error_code": 58,
                "error_message": "Authentication failed: Invalid username or password",
                "auth_bytes": b"",
            }
        return CLOSE

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_requests(reader, writer, self._answer)


def test_authentication_failure(cli: list[str]) -> None:
    with SaslRefusingBroker() as broker:
        result = run(
            cli,
            "topics",
            "list",
            "-b",
            f"127.0.0.1:{broker.port}",
            "--timeout",
            "5",
            "--sasl-mechanism",
            "PLAIN",
            "--sasl-username",
            "alice",
            env=clean_env(KAFKA_SASL_PASSWORD="wrong"),
        )
    assert_one_error_line(result, 4, "authentication")
    assert "wrong" not in result.stderr


# --- bench and broker ---------------------------------------------------------------------


def test_bench_produce_and_consume(cli: list[str], bootstrap_servers: str) -> None:
    topic = unique("bench")
    b = ("-b", bootstrap_servers)
    produced = run(
        cli, "bench", "produce", topic, "--records", "3000", "--record-size", "64", "--create", *b
    )
    assert produced.returncode == 0, produced.stderr
    assert re.fullmatch(
        rf"Produced 3000 records \(187\.5 KiB\) to {topic} in [\d.]+ s: [\d,]+ records/s, "
        r"[\d.]+ MB/s\n",
        produced.stdout,
    ), produced.stdout
    assert "\r" not in produced.stderr  # no progress bar when stderr is not a terminal
    consumed = run(cli, "bench", "consume", topic, "--records", "3000", *b)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.startswith("Consumed 3000 records (187.5 KiB)")


def test_bench_produce_of_records_too_large_to_send_is_a_usage_error(
    cli: list[str], bootstrap_servers: str
) -> None:
    # Refused before the payload is made: 99,999,999,999 bytes was a MemoryError traceback.
    result = run(
        cli,
        "bench",
        "produce",
        unique("bench"),
        "--record-size",
        "99999999999",
        "-b",
        bootstrap_servers,
    )
    assert_one_error_line(result, 2, "--record-size 99999999999", "max_request_size")


@pytest.fixture
def broker_process(cli: list[str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [*cli, "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.fullmatch(r"bootstrap servers: (\S+:\d+)\n", line)
        assert match, line
        yield proc, match.group(1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_broker_command(cli: list[str], broker_process: tuple[subprocess.Popen[str], str]) -> None:
    proc, bootstrap = broker_process
    topic = unique("embedded")
    assert run(cli, "topics", "create", topic, "-b", bootstrap).returncode == 0
    assert topic in run(cli, "topics", "list", "-b", bootstrap).stdout.splitlines()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Broker stopped." in err and "Traceback" not in err
    gone = run(cli, "topics", "list", "-b", bootstrap, "--timeout", "1")
    assert gone.returncode == 3
