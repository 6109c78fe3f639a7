"""Topic names Kafka would refuse are refused before any I/O, by every entry point."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokafka_lite import Consumer, Producer
from aiokafka_lite.structs import TopicPartition, check_topic_name

BAD = [".", "..", "", "a b", "x" * 250, "topic/1", "é", "a\n"]


@pytest.mark.parametrize("name", BAD)
def test_consumer_refuses_invalid_names_everywhere(name: str) -> None:
    with pytest.raises(ValueError, match="invalid topic name"):
        Consumer(name)
    consumer = Consumer()
    with pytest.raises(ValueError, match="invalid topic name"):
        consumer.subscribe([name])
    with pytest.raises(ValueError, match="invalid topic name"):
        consumer.assign([TopicPartition(name, 0)])


@pytest.mark.parametrize("name", BAD)
async def test_producer_refuses_invalid_names_before_any_io(name: str) -> None:
    producer = Producer(bootstrap_servers="127.0.0.1:1")  # never started: no I/O
    # send() looks a topic up here first; the name is checked before any metadata wait.
    with pytest.raises(ValueError, match="invalid topic name"):
        await asyncio.wait_for(producer._topic_info(name), 1)


def test_non_str_names_are_type_errors() -> None:
    with pytest.raises(TypeError):
        check_topic_name(b"events")


@given(st.text(alphabet="abcXYZ019._-", min_size=1, max_size=249))
def test_names_of_kafka_characters_pass_unless_dots_only(name: str) -> None:
    if name in (".", ".."):
        with pytest.raises(ValueError):
            check_topic_name(name)
    else:
        assert check_topic_name(name) == name
