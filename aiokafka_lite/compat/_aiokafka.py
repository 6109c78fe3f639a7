"""What ``import aiokafka`` gives under the alias (:mod:`aiokafka_lite.compat`).

aiokafka's top-level names, taken from aiokafka_lite; its submodules
(``aiokafka.errors``, ``aiokafka.structs``, ...) are reachable as attributes, as after
``import aiokafka``. ``__version__`` is the aiokafka version whose API aiokafka_lite
follows (code comparing aiokafka versions sees that), ``__aiokafka_lite_version__`` is
aiokafka_lite's own.
"""

from __future__ import annotations

import importlib
from typing import Any

from aiokafka_lite import __version__ as __aiokafka_lite_version__
from aiokafka_lite.abc import ConsumerRebalanceListener
from aiokafka_lite.client import AIOKafkaClient
from aiokafka_lite.consumer import AIOKafkaConsumer
from aiokafka_lite.errors import ConsumerStoppedError, IllegalOperation
from aiokafka_lite.producer import AIOKafkaProducer
from aiokafka_lite.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

#: The aiokafka release whose public API aiokafka_lite follows.
__version__ = "0.14.0"

#: Submodules must be found by the alias's finder, which needs this to be a package.
__path__: list[str] = []

__all__ = [
    "AIOKafkaClient",
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TopicPartition",
    "__aiokafka_lite_version__",
]


def __getattr__(name: str) -> Any:
    # ``import aiokafka`` then ``aiokafka.errors.KafkaError``: aiokafka's package imports
    # its submodules; here they load on first use, through the alias.
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"aiokafka.{name}")
        except ModuleNotFoundError:
            pass
    raise AttributeError(f"module 'aiokafka' (aiokafka_lite) has no attribute {name!r}")
