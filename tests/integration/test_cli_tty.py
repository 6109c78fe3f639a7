"""The tool as a person uses it: in a terminal, watching the progress bar, pressing Ctrl-C.

Two drivers: a pseudo-terminal (always available on Unix) that sees the raw bytes the
tool writes, and tmux (when installed) that renders the screen and is sent real keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite.testing.pytest_plugin import require_tool

from ._helpers import produce_one_by_one, unique

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a Unix terminal")

#: The tool, from this checkout (see test_cli.cli_command).
CLI = (sys.executable, "-m", "aiokafka_lite.cli")


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    clean.update(TERM="xterm", COLUMNS="160", LINES="40")
    return clean


def cli_json(*args: str) -> list[dict[str, object]]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def create_topic(bootstrap: str, topic: str) -> None:
    done = subprocess.run(
        [*CLI, "topics", "create", topic, "-p", "1", "-b", bootstrap],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


# --- a pseudo-terminal ----------------------------------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal: type into it, read what it shows."""

    def __init__(self, *argv: str) -> None:
        import pty

        pid, fd = pty.fork()
        if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
            try:
                os.execve(argv[0], list(argv), env())
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.status: int | None = None

    def read_until(self, pattern: str, timeout: float = 30) -> str:
        regex = re.compile(pattern.encode())
        deadline = time.monotonic() + timeout
        while not regex.search(self.output):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{pattern!r} not shown; screen so far: {self.text!r}")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.2))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    if not regex.search(self.output):
                        raise AssertionError(f"{pattern!r} not shown before exit: {self.text!r}")
                    break
                self.output += chunk
        return self.text

    def running(self) -> bool:
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self.status = os.waitstatus_to_exitcode(status)
        return self.status is None

    def press_ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")  # the terminal turns it into SIGINT

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                self._drain()
                return self.status
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError(f"still running after {timeout}s: {self.text!r}")
            self._drain(0.1)

    def _drain(self, timeout: float = 0.0) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                self.output += os.read(self.fd, 65536)
            except OSError:
                pass

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for term in opened:
        term.close()


def test_bench_progress_bar_in_a_terminal(
    bootstrap_servers: str, terminals: list[Terminal]
) -> None:
    topic = unique("bench-tty")
    term = Terminal(
        *CLI,
        "bench",
        "produce",
        topic,
        "--records",
        "40000",
        "--record-size",
        "200",
        "--create",
        "-b",
        bootstrap_servers,
    )
    terminals.append(term)
    term.read_until(r"Produced 40000 records", timeout=120)
    assert term.wait() == 0
    text = term.text
    # The bar is redrawn in place: carriage returns, no new line per update.
    redraws = re.findall(r"\rproduce \[([#.]{30})\] +(\d+)% ([\d,]+)/40,000 records", text)
    assert redraws, text
    assert redraws[-1][1] == "100" and redraws[-1][0] == "#" * 30
    assert re.search(r"[\d,]+ records/s [\d.]+ MB/s", text)
    assert text.count("\n") <= 3
    assert "Traceback" not in text


def test_ctrl_c_stops_consume_and_commits_what_it_printed(
    bootstrap_servers: str, terminals: list[Terminal]
) -> None:
    topic, group = unique("tty"), unique("g")
    create_topic(bootstrap_servers, topic)
    asyncio.run(produce_one_by_one(bootstrap_servers, topic, 5, prefix="line-"))
    term = Terminal(
        *CLI,
        "consume",
        topic,
        "-g",
        group,
        "-p",
        "0",
        "--offset",
        "earliest",
        "-b",
        bootstrap_servers,
    )
    terminals.append(term)
    term.read_until(r"line-4\r?\n")  # every record is on the screen; it waits for more
    time.sleep(0.3)
    term.press_ctrl_c()
    assert term.wait() == 0
    assert "Consumed 5 records." in term.text
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text
    (row,) = cli_json("groups", "lag", group, "--json", "-b", bootstrap_servers)
    assert row["committed_offset"] == 5


def test_typing_records_then_ctrl_c(bootstrap_servers: str, terminals: list[Terminal]) -> None:
    topic = unique("typed")
    create_topic(bootstrap_servers, topic)
    term = Terminal(*CLI, "produce", topic, "-k", ":", "-b", bootstrap_servers)
    terminals.append(term)
    os.write(term.fd, b"k1:first\rk2:second\r")  # Enter sends a carriage return
    # Typed lines wait in the terminal until the tool reads them. Ctrl-C before that would
    # drop them (the terminal flushes its input) or interrupt Python's start-up, so wait
    # until the tool has sent both: it is then reading its input and handling Ctrl-C.
    rows = cli_json(
        "consume",
        topic,
        "--offset",
        "earliest",
        "-n",
        "2",
        "-f",
        "json",
        "-q",
        "-b",
        bootstrap_servers,
    )
    assert [(r["key"], r["value"]) for r in rows] == [("k1", "first"), ("k2", "second")]
    time.sleep(0.3)
    assert term.running(), term.text  # waiting for more lines
    term.press_ctrl_c()  # nothing more is typed: the tool must not wait for a line
    assert term.wait(timeout=15) == 130, term.text
    assert "Produced 2 records" in term.text and "Traceback" not in term.text


def test_ctrl_c_stops_the_embedded_broker(terminals: list[Terminal]) -> None:
    term = Terminal(*CLI, "broker", "--port", "0")
    terminals.append(term)
    term.read_until(r"press Ctrl-C to stop")
    term.press_ctrl_c()
    assert term.wait() == 0
    assert "Broker stopped." in term.text and "Traceback" not in term.text


# --- tmux -----------------------------------------------------------------------------------


class Tmux:
    """A detached tmux session running one command in a shell."""

    def __init__(self, command: str) -> None:
        self.name = unique("aiokafka-lite-test")
        self._tmux(
            "new-session", "-d", "-s", self.name, "-c", os.getcwd(), "-x", "160", "-y", "40", "sh"
        )
        self.type(f"{command}; echo EXIT=$?")
        self.keys("Enter")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", *args], capture_output=True, text=True, env=env(), timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def wait_for(self, pattern: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not on screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, timeout=30)


@pytest.fixture
def tmux() -> Iterator[type[Tmux]]:
    require_tool("tmux", "apt-get install tmux")  # in CI (CI=true) a failure, not a skip
    sessions: list[Tmux] = []

    class Session(Tmux):
        def __init__(self, command: str) -> None:
            super().__init__(command)
            sessions.append(self)

    yield Session
    for session in sessions:
        session.kill()


def test_tmux_session(bootstrap_servers: str, tmux: type[Tmux]) -> None:
    topic = unique("tmux")
    b = f"-b {shlex.quote(bootstrap_servers)}"
    create_topic(bootstrap_servers, topic)  # one partition: the offsets below are known
    session = tmux(f"{shlex.join(CLI)} bench produce {topic} --records 30000 {b}")
    screen = session.wait_for(r"EXIT=\d+")
    assert "EXIT=0" in screen, screen
    # The bar was redrawn on one line: the screen shows its final state once.
    (bar,) = re.findall(r"^produce \[#{30}\] 100% 30,000/30,000 records .*$", screen, re.M)
    assert "records/s" in bar and "MB/s" in bar
    assert re.search(rf"^Produced 30000 records \(.*\) to {topic} in .* MB/s$", screen, re.M)

    watching = tmux(f"{shlex.join(CLI)} consume {topic} -p 0 --offset 29997 -f '{{offset}}' {b}")
    watching.wait_for(r"29999")
    time.sleep(0.3)
    assert not re.search(r"EXIT=\d", watching.screen())  # still waiting for more records
    watching.keys("C-c")
    screen = watching.wait_for(r"EXIT=\d+")
    assert "EXIT=0" in screen and "Consumed 3 records." in screen, screen
    assert "Traceback" not in screen
