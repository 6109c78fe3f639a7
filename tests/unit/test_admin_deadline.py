"""How an admin call ends at its deadline (`AdminClient._run`), without a broker."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import AdminClient
from aiokafka_lite.retry import Deadline


def started_admin() -> AdminClient:
    admin = AdminClient(bootstrap_servers="127.0.0.1:1")
    admin._started = True  # no broker needed: the calls below never send
    return admin


async def test_a_timeout_the_call_raises_itself_keeps_what_it_names() -> None:
    async def body(deadline: Deadline) -> None:
        raise deadline.timeout_error(errors.KafkaConnectionError("connection closed by the broker"))

    with pytest.raises(errors.KafkaTimeoutError) as caught:
        await started_admin()._run("delete_records", 300, body)
    assert str(caught.value) == (
        "delete_records did not complete within 300 ms "
        "(last error: connection closed by the broker)"
    )


async def test_a_call_that_overruns_its_deadline_is_cut_off_and_named() -> None:
    async def body(deadline: Deadline) -> None:
        await asyncio.sleep(10)

    with pytest.raises(
        errors.KafkaTimeoutError, match=r"^list_offsets did not complete within 100 ms$"
    ):
        await asyncio.wait_for(started_admin()._run("list_offsets", 100, body), 2)
