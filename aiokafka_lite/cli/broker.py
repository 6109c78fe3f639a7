"""The ``broker`` command: an embedded test broker in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aiokafka_lite.cli.shared import EXIT_OK, CliError, Leaf, StopSignal, err, out, port_number

__all__ = ["add_broker_parser", "cmd_broker"]


async def cmd_broker(args: argparse.Namespace) -> int:
    from aiokafka_lite import testing

    with StopSignal() as stop:
        broker = testing.EmbeddedBroker(
            args.kind, host=args.host, port=None if args.port == 0 else args.port
        )
        try:
            await broker.start_async()
        except (testing.BrokerError, OSError) as exc:
            raise CliError(f"cannot start the embedded broker: {exc}") from None
        try:
            out(f"bootstrap servers: {broker.bootstrap_servers}")
            sys.stdout.flush()
            err("Embedded broker running; press Ctrl-C to stop.")
            while broker.running and not await stop.wait(0.5):
                pass
            if not broker.running:
                raise CliError("the embedded broker exited unexpectedly")
        finally:
            await broker.stop_async()
    err("Broker stopped.")
    return EXIT_OK


def add_broker_parser(commands: Any, leaf: Leaf) -> None:
    p = leaf(commands, "broker", cmd_broker, "run the embedded test broker until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=port_number, default=9092, help="0: any free port")
    p.add_argument(
        "--kind",
        choices=("tansu", "noida"),
        default="tansu",
        help="which embedded broker (default tansu)",
    )
