"""aiokafka's ``aiokafka.abc``: the base classes applications subclass.

* :class:`ConsumerRebalanceListener`: callbacks around a rebalance (coroutines or plain
  functions, as in aiokafka; see :mod:`aiokafka_lite.consumer.subscription`).
* :class:`AbstractTokenProvider`: an OAUTHBEARER token source (``async token()``,
  optional ``extensions()``).
"""

from __future__ import annotations

from aiokafka_lite.consumer.subscription import ConsumerRebalanceListener
from aiokafka_lite.security import AbstractTokenProvider

__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]
