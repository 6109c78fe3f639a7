"""aiokafka's ``aiokafka.admin.config_resource`` path: ConfigResource and
ConfigResourceType (defined in :mod:`aiokafka_lite.admin.types`)."""

from __future__ import annotations

from aiokafka_lite.admin.types import ConfigResource, ConfigResourceType

__all__ = ["ConfigResource", "ConfigResourceType"]
