"""Option parsing of the Spark data source: names, values, conflicts, kafka.* mapping."""

from __future__ import annotations

import pickle

import pytest

from aiokafka_lite import errors
from aiokafka_lite.spark.options import (
    ClientOptions,
    ReadBound,
    TopicSelection,
    parse_read_options,
    parse_write_options,
)
from aiokafka_lite.structs import TopicPartition

BS = {"kafka.bootstrap.servers": "localhost:9092"}


def read(streaming: bool = False, **options: str):  # type: ignore[no-untyped-def]
    return parse_read_options({**BS, **options}, streaming=streaming)


def fails(match: str, **options: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=match):
        read(**options)


# --- defaults and topic selection -------------------------------------------------------


def test_batch_defaults_read_everything() -> None:
    opts = read(subscribe="a, b,a")
    assert opts.selection == TopicSelection("subscribe", topics=("a", "b"))
    assert opts.starting == ReadBound("earliest")
    assert opts.ending == ReadBound("latest")
    assert opts.fail_on_data_loss is True
    assert opts.include_headers is False
    assert opts.client.bootstrap_servers == "localhost:9092"


def test_streaming_starts_at_latest_by_default() -> None:
    assert read(streaming=True, subscribe="a").starting == ReadBound("latest")


def test_option_names_are_case_insensitive() -> None:
    opts = parse_read_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "t", "INCLUDEHEADERS": "TRUE"},
        streaming=False,
    )
    assert opts.include_headers is True
    assert opts.client.bootstrap_servers == "h:1"


def test_pattern_and_assign() -> None:
    pattern = read(subscribePattern=r"events\..*").selection
    assert pattern.matches("events.eu") and not pattern.matches("xevents.eu")
    assign = read(assign='{"t": [0, 2], "u": [1]}').selection
    assert assign.partitions == (
        TopicPartition("t", 0),
        TopicPartition("t", 2),
        TopicPartition("u", 1),
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one of the options subscribe, subscribePattern and assign"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, r"given: subscribe, assign"),
        ({"subscribe": " , "}, "at least one topic"),
        ({"subscribe": "bad topic!"}, "not a valid topic name"),
        ({"subscribePattern": "(unclosed"}, "not a valid regex"),
        ({"assign": "[0,1]"}, "JSON object"),
        ({"assign": '{"t": []}'}, "list of partition numbers"),
        ({"assign": '{"t": [-1]}'}, "list of partition numbers"),
    ],
)
def test_bad_topic_selection(options: dict[str, str], match: str) -> None:
    fails(match, **options)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(errors.ConfigurationError, match=r"kafka\.bootstrap\.servers is required"):
        parse_read_options({"subscribe": "t"}, streaming=False)


# --- offsets ------------------------------------------------------------------------------


def test_per_partition_offsets() -> None:
    opts = read(
        assign='{"t":[0,1]}',
        startingOffsets='{"t":{"0":5,"1":-2}}',
        endingOffsets='{"t":{"0":9,"1":-1}}',
    )
    assert opts.starting.offset_map == {TopicPartition("t", 0): 5, TopicPartition("t", 1): -2}
    assert opts.ending.offset_map == {TopicPartition("t", 0): 9, TopicPartition("t", 1): -1}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"startingOffsets": "latest"}, "cannot be latest"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, "cannot be latest"),
        ({"endingOffsets": "earliest"}, "cannot be earliest"),
        ({"startingOffsets": "yesterday"}, "must be earliest, latest or JSON"),
        ({"startingOffsets": '{"t":{"0":-3}}'}, "must be an integer >= 0, -2"),
        ({"startingOffsets": '{"t":{"x":1}}'}, "not a partition number"),
        ({"startingOffsets": '{"other":{"0":1}}'}, "other-0, which is not read"),
        ({"startingOffsets": '{"t":{"0":9}}', "endingOffsets": '{"t":{"0":3}}'}, "before"),
        ({"startingOffsets": "earliest", "startingTimestamp": "1"}, "not both"),
        ({"startingTimestamp": "soon"}, "must be an integer"),
        # (Once accepted, and read as nothing: the ends were moved up to the starts.)
        ({"startingTimestamp": "2000", "endingTimestamp": "1000"}, r"endingTimestamp \(1000\) "),
        ({"maxOffsetsPerTrigger": "10"}, "applies to streaming reads only"),
        ({"failOnDataLoss": "maybe"}, "must be true or false"),
        ({"maxRecordsPerPartition": "0"}, "must be >= 1"),
        ({"minRecordsPerPartition": "-1"}, "must be >= 0"),
        ({"startingOffsetsByTimestampStrategy": "closest"}, "must be error or latest"),
    ],
)
def test_bad_batch_offsets(options: dict[str, str], match: str) -> None:
    fails(match, subscribe="t", **options)


def test_assign_offsets_must_name_exactly_the_assigned_partitions() -> None:
    fails(
        r"exactly the assigned partitions \(missing: t-1",
        assign='{"t":[0,1]}',
        startingOffsets='{"t":{"0":1}}',
    )


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(errors.ConfigurationError, match="endingOffsets applies to batch reads"):
        read(streaming=True, subscribe="t", endingOffsets="latest")


def test_schema_time_parse_accepts_what_either_kind_accepts() -> None:
    # Spark asks for the schema before it says whether the read is batch or streaming.
    opts = parse_read_options(
        {**BS, "subscribe": "t", "startingOffsets": "latest", "maxOffsetsPerTrigger": "5"},
        streaming=None,
    )
    assert opts.max_offsets_per_trigger == 5
    parse_read_options({**BS, "subscribe": "t", "endingOffsets": "latest"}, streaming=None)
    with pytest.raises(errors.ConfigurationError, match="unknown option"):
        parse_read_options({**BS, "subscribe": "t", "endingOffset": "latest"}, streaming=None)


def test_streaming_options() -> None:
    opts = read(
        streaming=True, subscribe="t", maxOffsetsPerTrigger="100", startingTimestamp="1700000000000"
    )
    assert opts.max_offsets_per_trigger == 100
    assert opts.starting == ReadBound("timestamp", timestamp=1700000000000)


# --- names that do not belong ---------------------------------------------------------------


def test_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(errors.ConfigurationError) as info:
        read(subscribe="t", startingOffset="earliest")
    assert "unknown option 'startingoffset'" in str(info.value)
    assert "startingOffsets" in str(info.value)


def test_write_option_on_a_read_and_back() -> None:
    fails("option topic does not apply to reads", subscribe="t", topic="x")
    with pytest.raises(errors.ConfigurationError, match="subscribe does not apply to writes"):
        parse_write_options({**BS, "subscribe": "t"}, streaming=False)


def test_spark_added_options_are_accepted() -> None:
    opts = parse_write_options({**BS, "topic": "t", "checkpointLocation": "/tmp/x"}, streaming=True)
    assert opts.topic == "t"
    fails("a path", subscribe="t", path="/data/x")


# --- kafka.* ------------------------------------------------------------------------------


def test_kafka_options_reach_the_right_client() -> None:
    opts = read(
        subscribe="t",
        **{
            "kafka.fetch.max.bytes": "1000000",
            "kafka.isolation.level": "read_committed",
            "kafka.client.id": "spark-job",
            "kafka.request.timeout.ms": "20000",
            "kafka.receive.message.max.bytes": "209715200",
        },
    )
    kwargs = opts.client.consumer_kwargs()
    assert kwargs["fetch_max_bytes"] == 1000000
    assert kwargs["receive_message_max_bytes"] == 209715200
    assert kwargs["isolation_level"] == "read_committed"
    assert kwargs["client_id"] == "spark-job"
    assert kwargs["request_timeout_ms"] == 20000
    assert kwargs["bootstrap_servers"] == "localhost:9092"

    wopts = parse_write_options(
        {
            **BS,
            "topic": "t",
            "kafka.acks": "all",
            "kafka.compression.type": "lz4",
            "kafka.linger.ms": "20",
            "kafka.batch.size": "65536",
        },
        streaming=False,
    )
    pkw = wopts.client.producer_kwargs()
    assert (pkw["acks"], pkw["compression_type"], pkw["linger_ms"], pkw["max_batch_size"]) == (
        "all",
        "lz4",
        20.0,
        65536,
    )


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("kafka.group.id", "g", "without a consumer group"),
        ("kafka.auto.offset.reset", "earliest", "set startingOffsets instead"),
        ("kafka.value.deserializer", "x", "always read as binary"),
        ("kafka.ssl.truststore.location", "/x.jks", "JKS"),
        ("kafka.fetch.max.bites", "1", "unknown option kafka.fetch.max.bites"),
        ("kafka.acks", "all", "applies to writes, not reads"),
        ("kafka.fetch.min.bytes", "many", "must be an integer"),
        ("kafka.isolation.level", "dirty", "isolation_level must be"),
        ("kafka.receive.message.max.bytes", "1000", "receive_message_max_bytes must be"),
        ("kafka.security.protocol", "TLS", "must be PLAINTEXT, SSL"),
        ("kafka.sasl.mechanism", "PLAIN", "need kafka.security.protocol SASL_"),
    ],
)
def test_bad_kafka_options(option: str, value: str, match: str) -> None:
    fails(match, subscribe="t", **{option: value})


def test_producer_values_are_checked_by_the_producer_config() -> None:
    with pytest.raises(errors.ConfigurationError, match=r"invalid kafka\.\* option: acks"):
        parse_write_options({**BS, "topic": "t", "kafka.acks": "some"}, streaming=False)
    with pytest.raises(errors.ConfigurationError, match="idempotence"):
        parse_write_options(
            {**BS, "topic": "t", "kafka.acks": "1", "kafka.enable.idempotence": "true"},
            streaming=False,
        )


def test_sasl_from_jaas_config_and_no_secret_in_repr() -> None:
    opts = read(
        subscribe="t",
        **{
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="alice" password="s3cr\\"et";'
            ),
        },
    )
    kwargs = opts.client.consumer_kwargs()
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("alice", 's3cr"et')
    assert "s3cr" not in repr(opts)


def test_sasl_needs_credentials() -> None:
    fails(
        "needs kafka.sasl.jaas.config or kafka.sasl.username",
        subscribe="t",
        **{"kafka.security.protocol": "SASL_SSL"},
    )


def test_parsed_options_pickle() -> None:
    opts = read(
        subscribe="t",
        **{"kafka.security.protocol": "SSL", "kafka.ssl.endpoint.identification.algorithm": ""},
    )
    again = pickle.loads(pickle.dumps(opts))
    assert again == opts
    assert isinstance(again.client, ClientOptions)
    # The TLS context is built in the task, from the options.
    ctx = again.client.consumer_kwargs()["ssl_context"]
    assert ctx.check_hostname is False


def test_exactly_once_options() -> None:
    plain = parse_write_options({**BS, "topic": "t"}, streaming=False)
    assert not plain.exactly_once and plain.transactional_id_prefix == "aiokafka-lite-spark"
    opts = parse_write_options(
        {**BS, "topic": "t", "exactlyonce": "TRUE", "transactionalIdPrefix": "pipeline.a-1"},
        streaming=True,
    )
    assert opts.exactly_once and opts.transactional_id_prefix == "pipeline.a-1"
    for options, match in (
        ({"exactlyOnce": "yes"}, "exactlyOnce must be true or false"),
        ({"transactionalIdPrefix": "two words"}, "transactionalIdPrefix"),
        ({"transactionalIdPrefix": ""}, "transactionalIdPrefix"),
        (
            {"exactlyOnce": "true", "kafka.enable.idempotence": "false"},
            "needs the idempotent producer",
        ),
        ({"kafka.transactional.id": "x"}, "set exactlyOnce=true"),
        # What only a transactional producer refuses: at planning, not in every task.
        ({"exactlyOnce": "true", "kafka.acks": "1"}, r"exactlyOnce=true: .*acks=\"all\""),
        (
            {"exactlyOnce": "true", "kafka.max.in.flight.requests.per.connection": "6"},
            r"exactlyOnce=true: .*max_in_flight_requests_per_connection <= 5",
        ),
    ):
        with pytest.raises(errors.KafkaConfigurationError, match=match):
            parse_write_options({**BS, "topic": "t", **options}, streaming=False)


def test_min_offsets_per_trigger_and_max_trigger_delay() -> None:
    opts = read(streaming=True, subscribe="t", minOffsetsPerTrigger="100", maxTriggerDelay="30s")
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (100, 30_000)
    assert read(streaming=True, subscribe="t").max_trigger_delay_ms == 15 * 60 * 1000
    assert read(streaming=True, subscribe="t", maxTriggerDelay="250").max_trigger_delay_ms == 250
    for options, match in (
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        (
            {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "minOffsetsPerTrigger .* is above maxOffsetsPerTrigger",
        ),
    ):
        with pytest.raises(errors.ConfigurationError, match=match):
            read(streaming=True, subscribe="t", **options)
