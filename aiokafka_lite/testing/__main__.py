"""``python -m aiokafka_lite.testing``: an embedded broker in the foreground (``make broker``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence

from aiokafka_lite.errors import ConfigurationError
from aiokafka_lite.testing.broker import EMBEDDED_KINDS, EmbeddedBroker, _tail
from aiokafka_lite.testing.probe import BrokerError


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiokafka_lite.testing",
        description="Run an embedded Kafka-protocol broker in the foreground (Ctrl-C stops it).",
    )
    parser.add_argument("--kind", choices=EMBEDDED_KINDS, default="tansu")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 9092))
    parser.add_argument("--advertised-port", type=int, default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    broker = EmbeddedBroker(
        args.kind, host=args.host, port=args.port, advertised_port=args.advertised_port
    )

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C and `kill` both stop the broker cleanly (SIGINT is ignored in a
    # background job, so set its handler explicitly).
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        broker.start()
    except (BrokerError, ConfigurationError) as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    except KeyboardInterrupt:
        broker.stop()
        return 0
    out = sys.stdout
    out.write(
        f"{args.kind} broker ready: bootstrap servers {broker.bootstrap_servers}"
        f" (pid {broker.pid}, log {broker.log_path}). Ctrl-C stops it.\n"
    )
    out.flush()
    try:
        while broker.running:
            time.sleep(0.5)
        out.write(f"broker exited:\n{_tail(broker.log_path)}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(_main())
