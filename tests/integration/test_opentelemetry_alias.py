"""opentelemetry-instrumentation-aiokafka on aiokafka_lite, through the aiokafka alias.

The instrumentation wraps ``aiokafka.AIOKafkaProducer.send`` and
``aiokafka.AIOKafkaConsumer.getone`` / ``getmany`` and reads aiokafka's internals
(``producer.client._bootstrap_servers``, ``client._client_id``,
``client._wait_on_metadata()``, ``producer._partition()``, ``consumer._group_id``...).
Under ``aiokafka_lite.compat.install()`` it must trace a record from producer to consumer
on a real broker: a PRODUCER span for ``send``, whose context travels in the record's
``traceparent`` header, and CONSUMER spans for the received record whose *parent* is that
producer span (the instrumentation starts the consumer span in the extracted context; in
``getmany`` the per-topic span also *links* to each record's span).

The instrumentor patches the classes process-wide and the alias puts a finder on
``sys.meta_path``, so the scenario (:func:`scenario`) runs in a subprocess; it prints the
finished spans and what the application saw as JSON, and the test checks them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

APP_HEADER = ("app-header", b"app-value")
KEY = b"order-42"


async def _scenario(bootstrap: str, topic: str, instrument: bool) -> dict[str, Any]:
    # Imported here: the test process itself must import neither aiokafka nor the
    # instrumentation (which imports aiokafka at once).
    import aiokafka_lite
    import aiokafka_lite.compat

    aiokafka_lite.compat.install()

    from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = AIOKafkaInstrumentor()
    if instrument:
        # instrument() first checks the *distribution* aiokafka (>= 0.8, < 1.0): the
        # test extra installs the real one; where only aiokafka_lite is installed, it logs
        # a DependencyConflict and instruments nothing unless given skip_dep_check=True.
        instrumentor.instrument(tracer_provider=provider)

    import aiokafka  # the alias: aiokafka_lite
    import opentelemetry.instrumentation.aiokafka.utils as otel_utils

    out: dict[str, Any] = {
        "alias_producer": aiokafka.AIOKafkaProducer is aiokafka_lite.AIOKafkaProducer,
        "alias_consumer": aiokafka.AIOKafkaConsumer is aiokafka_lite.AIOKafkaConsumer,
        "aiokafka_file": str(getattr(aiokafka, "__file__", "")),
        "aiokafka_lite_file": aiokafka_lite.__file__,
        # The module the instrumentation imported as ``aiokafka`` (and patched).
        "instrumentation_sees_alias": otel_utils.aiokafka is aiokafka,
        "instrumented": instrumentor.is_instrumented_by_opentelemetry,
    }

    tracer = provider.get_tracer("app")
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    try:
        with tracer.start_as_current_span("publish-order") as parent:
            headers = [APP_HEADER]  # a list: the instrumentation appends traceparent to it
            fut = await producer.send(topic, b"payload", key=KEY, headers=headers)
            meta = await fut
        out["app_span_id"] = format(parent.get_span_context().span_id, "016x")
        out["sent"] = {"partition": meta.partition, "offset": meta.offset}
    finally:
        await producer.stop()

    consumer = aiokafka.AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        # Tansu holds a JoinGroup for about half the session timeout (default 45 s).
        session_timeout_ms=6000,
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 30)
        out["getone"] = _record(record)
        # Read it again with getmany (the instrumentation wraps it too).
        tp = aiokafka.TopicPartition(record.topic, record.partition)
        consumer.seek(tp, record.offset)
        batch: dict[Any, Any] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not batch and loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
        out["getmany"] = [_record(r) for records in batch.values() for r in records]
    finally:
        await consumer.stop()

    provider.shutdown()
    out["spans"] = [_span(s) for s in exporter.get_finished_spans()]
    return out


def _record(record: Any) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": record.key.decode(),
        "value": record.value.decode(),
        "headers": [[k, None if v is None else v.decode()] for k, v in record.headers],
    }


def _span(span: Any) -> dict[str, Any]:
    def hexid(ctx: Any, width: int = 16) -> str | None:
        return None if ctx is None else format(ctx.span_id, f"0{width}x")

    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": hexid(span.context),
        "trace_flags": format(span.context.trace_flags, "02x"),
        "parent_span_id": hexid(span.parent),
        "parent_trace_id": None if span.parent is None else format(span.parent.trace_id, "032x"),
        "attributes": dict(span.attributes or {}),
        "links": [
            {"trace_id": format(link.context.trace_id, "032x"), "span_id": hexid(link.context)}
            for link in span.links
        ],
    }


def main(argv: list[str]) -> None:
    """``python -c ... BOOTSTRAP TOPIC [--no-instrument]``: print the result as JSON."""
    bootstrap, topic = argv[0], argv[1]
    instrument = "--no-instrument" not in argv
    result = asyncio.run(_scenario(bootstrap, topic, instrument))
    print(json.dumps(result))


def run_scenario(bootstrap: str, topic: str, *extra: str) -> dict[str, Any]:
    code = (
        "import sys; from tests.integration.test_opentelemetry_alias import main; "
        "main(sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, bootstrap, topic, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_trace_crosses_producer_to_consumer_through_the_alias(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 3)
    out = run_scenario(bootstrap_servers, topic_name)

    # The alias is real: the instrumentation patched aiokafka_lite's own classes.
    assert out["alias_producer"] and out["alias_consumer"]
    assert out["instrumentation_sees_alias"]
    assert Path(out["aiokafka_file"]).resolve() == REPO / "aiokafka_lite/compat/_aiokafka.py"
    assert Path(out["aiokafka_lite_file"]).resolve() == REPO / "aiokafka_lite/__init__.py"
    assert out["instrumented"]

    spans = out["spans"]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_kind.setdefault(span["kind"], []).append(span)
    sent = out["sent"]

    # The PRODUCER span of send(): a child of the application's span, naming the topic
    # and the partition the record went to (the instrumentation asks _partition()).
    [app] = [s for s in spans if s["name"] == "publish-order"]
    assert app["span_id"] == out["app_span_id"]
    [send] = by_kind["PRODUCER"]
    assert send["name"] == f"{topic_name} send"
    assert send["trace_id"] == app["trace_id"]
    assert send["parent_span_id"] == app["span_id"]
    attrs = send["attributes"]
    assert attrs["messaging.system"] == "kafka"
    assert attrs["messaging.destination.name"] == topic_name
    assert attrs["messaging.destination.partition.id"] == str(sent["partition"])
    assert attrs["messaging.kafka.message.key"] == KEY.decode()
    assert attrs["messaging.operation.type"] == "publish"
    assert json.loads(attrs["server.address"]) == bootstrap_servers

    # What the application received, by getone and again by getmany: its own header,
    # then the traceparent the instrumentation injected, naming the producer span.
    traceparent = f"00-{send['trace_id']}-{send['span_id']}-{send['trace_flags']}"
    expected_headers = [[APP_HEADER[0], APP_HEADER[1].decode()], ["traceparent", traceparent]]
    for record in (out["getone"], *out["getmany"]):
        assert record["key"] == KEY.decode() and record["value"] == "payload"
        assert (record["partition"], record["offset"]) == (sent["partition"], sent["offset"])
        assert record["headers"] == expected_headers
    assert len(out["getmany"]) == 1

    # CONSUMER spans for the record (getone's, then getmany's): in the producer's trace,
    # with the producer span as their *parent* (started in the extracted context).
    record_spans = [
        s
        for s in by_kind["CONSUMER"]
        if s["attributes"].get("messaging.kafka.message.offset") == sent["offset"]
    ]
    assert len(record_spans) == 2, spans
    for span in record_spans:
        assert span["name"] == f"{topic_name} receive"
        assert span["trace_id"] == send["trace_id"]
        assert span["parent_trace_id"] == send["trace_id"]
        assert span["parent_span_id"] == send["span_id"]
        assert span["links"] == []
        attrs = span["attributes"]
        assert attrs["messaging.destination.name"] == topic_name
        assert attrs["messaging.destination.partition.id"] == str(sent["partition"])
        assert attrs["messaging.consumer.group.name"] == f"g-{topic_name}"
        assert attrs["messaging.operation.type"] == "receive"
        assert attrs["messaging.message.id"] == f"{topic_name}.{sent['partition']}.{sent['offset']}"

    # getmany's per-topic span links to the record span (the link the instrumentation
    # adds), and the poll span counts the batch.
    getmany_record = record_spans[1]
    [topic_span] = [
        s
        for s in by_kind["CONSUMER"]
        if s["links"] and s["attributes"].get("messaging.batch.message_count") == 1
    ]
    assert topic_span["links"] == [
        {"trace_id": getmany_record["trace_id"], "span_id": getmany_record["span_id"]}
    ]
    assert topic_span["attributes"]["messaging.destination.partition.id"] == str(sent["partition"])
    [poll_span] = [s for s in by_kind["CONSUMER"] if s["span_id"] == topic_span["parent_span_id"]]
    assert poll_span["attributes"]["messaging.batch.message_count"] == 1
    assert len(by_kind["CONSUMER"]) == 4  # getone's, getmany's poll, topic and record spans
