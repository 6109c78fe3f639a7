"""Configs of topics, brokers and other resources: describe them and change them.

A broker's own configs must be asked of that broker (again while its connection fails,
until the call's timeout); everything else of any node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, TypeVar

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error
from aiokafka_lite.admin.types import (
    AdminResults,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ResourceResult,
)
from aiokafka_lite.admin.validation import config_value
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.protocol.bodies import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    IncrementalAlterConfigsRequest,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request_any_node

__all__ = ["ConfigsAdmin"]


class _ResourceAnswer(TypedDict):
    """What the answers of DescribeConfigs and IncrementalAlterConfigs say of each
    resource (both answers' entries have these keys)."""

    resource_type: int
    resource_name: str
    error_code: int
    error_message: str | None


_A = TypeVar("_A", bound=_ResourceAnswer)


class ConfigsAdmin(AdminBase):
    """Describe and change configs (``incremental_alter_configs``, ``alter_configs``)."""

    def _config_node(self, resource: ConfigResource) -> int | None:
        """Broker resources must go to that broker; others to any node (None)."""
        if resource.resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
            if resource.name == "":
                return None  # the cluster-wide default
            try:
                return int(resource.name)
            except ValueError:
                raise errors.ConfigurationError(
                    f"broker config resource name must be a broker id, got {resource.name!r}"
                ) from None
        return None

    async def _by_node(
        self,
        resources: list[ConfigResource],
        api_key: Api[RequestT, ResponseT],
        build: Callable[[list[ConfigResource], Deadline], RequestT],
        answers: Callable[[ResponseT], Iterable[_A]],
        deadline: Deadline,
    ) -> dict[ConfigResource, tuple[errors.KafkaError | None, _A | None]]:
        """Send config requests grouped by the node that must answer them.

        ``answers`` lists a response's entries, one per resource. Returns resource ->
        (error or None, the response's entry for it: None when there was none).
        """
        groups: dict[int | None, list[ConfigResource]] = {}
        for resource in resources:
            groups.setdefault(self._config_node(resource), []).append(resource)

        async def one(node: int | None, items: list[ConfigResource]) -> ResponseT:
            body = build(items, deadline)
            if node is None:
                return await request_any_node(self._client, api_key, body, deadline)
            if node not in self._client.cluster.brokers:
                raise errors.BrokerNotAvailableError(f"broker {node} is not in the cluster")
            # Only that broker can answer: asked again while its connection fails.
            return await self._send_to_node(node, api_key, body, deadline)

        nodes = list(groups)
        responses = await asyncio.gather(
            *(one(n, groups[n]) for n in nodes), return_exceptions=True
        )
        outcome: dict[ConfigResource, tuple[errors.KafkaError | None, _A | None]] = {}
        for node, response in zip(nodes, responses, strict=True):
            if isinstance(response, BaseException):
                if isinstance(response, errors.UnsupportedVersionError) or not isinstance(
                    response, errors.KafkaError
                ):
                    raise response
                # Only the resources of the node that failed get its error.
                for resource in groups[node]:
                    outcome[ConfigResource(resource.resource_type, resource.name)] = (
                        response,
                        None,
                    )
                continue
            for entry in answers(response):
                key = ConfigResource(
                    _resource_type_lenient(entry["resource_type"]), entry["resource_name"]
                )
                code = entry["error_code"]
                what = f"{key.resource_type.name.lower()} {key.name!r}"
                error = item_error(code, entry["error_message"], what) if code else None
                outcome[key] = (error, entry)
        for resource in resources:
            key = ConfigResource(resource.resource_type, resource.name)
            if key not in outcome:
                missing = errors.UnknownServerError(f"the broker returned no result for {key!r}")
                outcome[key] = (missing, None)
        return outcome

    async def describe_configs(
        self,
        config_resources: Iterable[ConfigResource],
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ConfigDescription]:
        """The configs of topics and brokers; ``ConfigResource.configs`` keys limit the names.

        A missing topic gets `UnknownTopicOrPartitionError` in its result.
        """
        resources = _unique_resources(config_resources)

        def build(items: list[ConfigResource], deadline: Deadline) -> DescribeConfigsRequest:
            return {
                "resources": [
                    {
                        "resource_type": int(r.resource_type),
                        "resource_name": r.name,
                        "configuration_keys": None if r.configs is None else list(r.configs),
                    }
                    for r in items
                ],
                "include_synonyms": include_synonyms,
                "include_documentation": include_documentation,
            }

        async def body(deadline: Deadline) -> AdminResults[ConfigResource, ConfigDescription]:
            outcome = await self._by_node(
                resources, bodies.DESCRIBE_CONFIGS, build, lambda r: r["results"], deadline
            )
            results: AdminResults[ConfigResource, ConfigDescription] = AdminResults()
            for resource in resources:
                key = ConfigResource(resource.resource_type, resource.name)
                error, entry = outcome[key]
                if error is not None or entry is None:  # (no entry: an error)
                    results[key] = ConfigDescription(key, error)
                    continue
                entries = {c["name"]: _config_entry(c) for c in entry.get("configs", ())}
                results[key] = ConfigDescription(key, None, entries)
            return results

        if not resources:
            return AdminResults()
        return await self._run("describe_configs", timeout_ms, body)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp] | Mapping[str, Any]],
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ResourceResult]:
        """Change configs of topics and brokers, leaving the others as they are.

        Each resource maps to `AlterConfigOp` operations, or to a ``{name: value}``
        dict where a value sets the config and ``None`` resets it to its default.
        """
        return await self._alter_configs(
            "incremental_alter_configs", changes, validate_only, timeout_ms
        )

    async def _alter_configs(
        self,
        call: str,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp] | Mapping[str, Any]],
        validate_only: bool,
        timeout_ms: int | None,
    ) -> AdminResults[ConfigResource, ResourceResult]:
        """IncrementalAlterConfigs for ``changes``; errors and timeouts name ``call``."""
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for resource, change in changes.items():
            if not isinstance(resource, ConfigResource):
                raise errors.ConfigurationError(f"expected ConfigResource, got {resource!r}")
            key = ConfigResource(resource.resource_type, resource.name)
            if key in ops:
                raise errors.ConfigurationError(f"{key!r} is given more than once")
            ops[key] = _alter_ops(change)

        def build(
            items: list[ConfigResource], deadline: Deadline
        ) -> IncrementalAlterConfigsRequest:
            return {
                "resources": [
                    {
                        "resource_type": int(r.resource_type),
                        "resource_name": r.name,
                        "configs": [
                            {
                                "name": op.name,
                                "config_operation": int(op.op_type),
                                "value": op.value,
                            }
                            for op in ops[r]
                        ],
                    }
                    for r in items
                ],
                "validate_only": validate_only,
            }

        async def body(deadline: Deadline) -> AdminResults[ConfigResource, ResourceResult]:
            outcome = await self._by_node(
                list(ops),
                bodies.INCREMENTAL_ALTER_CONFIGS,
                build,
                lambda r: r["responses"],
                deadline,
            )
            results: AdminResults[ConfigResource, ResourceResult] = AdminResults()
            for key in ops:
                results[key] = ResourceResult(key, outcome[key][0])
            return results

        if not ops:
            return AdminResults()
        return await self._run(call, timeout_ms, body)

    async def alter_configs(
        self,
        config_resources: Iterable[ConfigResource],
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResults[ConfigResource, ResourceResult]:
        """Set each resource's ``configs`` (aiokafka's call, done incrementally).

        Unlike Kafka's deprecated AlterConfigs request, configs not named keep their
        values instead of being reset.
        """
        changes: dict[ConfigResource, Mapping[str, Any]] = {}
        for resource in config_resources:
            if not isinstance(resource, ConfigResource) or resource.configs is None:
                raise errors.ConfigurationError(
                    f"alter_configs needs ConfigResource(..., configs={{...}}), got {resource!r}"
                )
            changes[resource] = resource.configs
        return await self._alter_configs("alter_configs", changes, validate_only, timeout_ms)

    # --- consumer groups ---------------------------------------------------------


# --- request/response conversions ------------------------------------------------------


def _resource_type_lenient(value: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return ConfigResourceType.UNKNOWN


def _unique_resources(resources: Iterable[ConfigResource]) -> list[ConfigResource]:
    seen: dict[ConfigResource, ConfigResource] = {}
    for resource in resources:
        if not isinstance(resource, ConfigResource):
            raise errors.ConfigurationError(f"expected ConfigResource, got {resource!r}")
        if resource in seen:
            raise errors.ConfigurationError(f"{resource!r} is given more than once")
        seen[resource] = resource
    return list(seen.values())


def _source(value: int) -> ConfigSource | int:
    try:
        return ConfigSource(value)
    except ValueError:
        return value


def _config_entry(c: DescribeConfigsResourceResult) -> ConfigEntry:
    source = _source(c.get("config_source", -1))
    is_default = source == ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name=c["name"],
        value=c.get("value"),
        source=source if c.get("config_source", -1) >= 0 else ConfigSource.UNKNOWN,
        is_default=bool(is_default),
        read_only=bool(c.get("read_only", False)),
        is_sensitive=bool(c.get("is_sensitive", False)),
        synonyms=tuple(
            ConfigSynonym(s["name"], s.get("value"), _source(s.get("source", 0)))
            for s in c.get("synonyms") or ()
        ),
        config_type=int(c.get("config_type", 0)),
        documentation=c.get("documentation"),
    )


def _alter_ops(change: Iterable[AlterConfigOp] | Mapping[str, Any]) -> list[AlterConfigOp]:
    if isinstance(change, Mapping):
        return [
            AlterConfigOp(str(name), None, AlterConfigOpType.DELETE)
            if value is None
            else AlterConfigOp(str(name), config_value(value), AlterConfigOpType.SET)
            for name, value in change.items()
        ]
    ops = list(change)
    for op in ops:
        if not isinstance(op, AlterConfigOp):
            raise errors.ConfigurationError(f"expected AlterConfigOp, got {op!r}")
        if op.op_type != AlterConfigOpType.DELETE and op.value is None:
            raise errors.ConfigurationError(f"{op.op_type.name} of {op.name!r} needs a value")
    return ops
