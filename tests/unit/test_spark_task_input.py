"""TaskInput: telling an input Spark stopped sending from one that really ended, by the
state of the worker's connection (socket pairs stand in for the worker's connection to
the executor JVM)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from aiokafka_lite.spark.task_input import TaskInput


@pytest.fixture
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    worker, jvm = socket.socketpair()
    try:
        yield worker, jvm
    finally:
        worker.close()
        jvm.close()


def test_an_open_connection_is_not_cut(connection: tuple[socket.socket, socket.socket]) -> None:
    worker, jvm = connection
    watch = TaskInput([worker.fileno()])
    assert watch.watched == 1
    assert not watch.cut_short()
    jvm.sendall(b"more")  # unread data is no end either
    assert not watch.cut_short()
    assert worker.recv(4) == b"more"  # and the check read nothing


@pytest.mark.parametrize("how", ["close", "shutdown"])
def test_a_closed_or_half_closed_connection_is_cut(
    connection: tuple[socket.socket, socket.socket], how: str
) -> None:
    """The executor gone (closed) or the task failed upstream (the JVM shuts its
    sending side and waits for the worker)."""
    worker, jvm = connection
    watch = TaskInput([worker.fileno()])
    if how == "close":
        jvm.close()
    else:
        jvm.shutdown(socket.SHUT_WR)
    assert watch.cut_short()
    assert watch.cut_short()  # (and stays so)


def test_the_check_leaves_the_connection_blocking(
    connection: tuple[socket.socket, socket.socket],
) -> None:
    worker, _ = connection
    TaskInput([worker.fileno()]).cut_short()
    assert worker.getblocking()
    assert os.get_blocking(worker.fileno())


def test_listening_and_non_socket_descriptors_are_not_watched() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    read_end, write_end = os.pipe()
    try:
        assert TaskInput([listener.fileno(), read_end, 10_000]).watched == 0
    finally:
        listener.close()
        os.close(read_end)
        os.close(write_end)


def test_a_descriptor_closed_and_reused_is_not_mistaken_for_the_connection(
    connection: tuple[socket.socket, socket.socket],
) -> None:
    worker, _ = connection
    watch = TaskInput([worker.fileno()])
    fd = worker.fileno()
    worker.close()
    other_worker, other_jvm = socket.socketpair()
    try:
        if other_worker.fileno() != fd:  # (reuse the number when the kernel did not)
            os.dup2(other_worker.fileno(), fd)
        other_jvm.close()  # the newcomer is at its end; the watched connection is gone
        assert not watch.cut_short()
    finally:
        if other_worker.fileno() != fd:
            os.close(fd)
        other_worker.close()


def test_of_this_process_watches_the_connections_open_now(
    connection: tuple[socket.socket, socket.socket],
) -> None:
    _, jvm = connection
    watch = TaskInput.of_this_process()
    assert watch.watched >= 2  # both ends of the pair, at least
    later, later_peer = socket.socketpair()  # opened after: the task's own, not watched
    try:
        later_peer.close()
        assert not watch.cut_short()
        jvm.close()
        assert watch.cut_short()
    finally:
        later.close()
