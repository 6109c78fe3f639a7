"""aiokafka's ``aiokafka.helpers``: :func:`create_ssl_context` (aiokafka's keywords:
``cafile``, ``capath``, ``cadata``, ``certfile``, ``keyfile``, ``password``)."""

from __future__ import annotations

from aiokafka_lite.security import create_ssl_context

__all__ = ["create_ssl_context"]
