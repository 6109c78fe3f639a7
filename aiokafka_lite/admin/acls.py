"""Access control lists: describe, create and delete the ACLs a broker's authorizer
enforces (DescribeAcls, CreateAcls, DeleteAcls).

Any broker answers them (the authorizer's store is the cluster's), so each call is one
request to the least loaded node, sent again elsewhere only if the connection fails;
creating or deleting twice leaves the same ACLs. A broker without an authorizer
answers `SecurityDisabledError`; one without the API, `UnsupportedVersionError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, item_error
from aiokafka_lite.admin.security_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    CreateAclResult,
    DeleteAclsResult,
    ResourcePatternType,
    ResourceType,
    from_code,
)
from aiokafka_lite.admin.types import (
    AdminResults,
)
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    CreateAclsRequest,
    DeleteAclsFilter,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request_any_node

__all__ = ["AclsAdmin"]

_T = TypeVar("_T", AclBinding, AclBindingFilter)


def _binding(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    """An ACL as a broker described it: taken as it is, not checked as an argument
    (a newer broker's codes read as UNKNOWN rather than fail the call)."""
    binding = object.__new__(AclBinding)
    for name, value in (
        ("resource_type", from_code(ResourceType, resource_type)),
        ("resource_name", resource_name),
        ("principal", principal),
        ("operation", from_code(AclOperation, operation)),
        ("permission_type", from_code(AclPermissionType, permission_type)),
        ("host", host),
        ("pattern_type", from_code(ResourcePatternType, pattern_type)),
    ):
        object.__setattr__(binding, name, value)
    return binding


def _filter_body(f: AclBindingFilter) -> DeleteAclsFilter:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def _unique(items: Iterable[_T], kind: type[_T]) -> list[_T]:
    unique: dict[_T, None] = {}
    for item in items:
        if not isinstance(item, kind):
            raise errors.ConfigurationError(f"expected {kind.__name__} items, got {item!r}")
        unique[item] = None
    return list(unique)


class AclsAdmin(AdminBase):
    """The ACLs of the cluster's authorizer."""

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (default: every ACL).

        Raises the broker's error: `SecurityDisabledError` without an authorizer,
        `ClusterAuthorizationFailedError` when the caller may not describe them.
        """
        f = AclBindingFilter() if acl_filter is None else acl_filter
        if not isinstance(f, AclBindingFilter):
            raise errors.ConfigurationError(f"acl_filter must be an AclBindingFilter, got {f!r}")

        async def body(deadline: Deadline) -> list[AclBinding]:
            request: DescribeAclsRequest = _filter_body(f)
            response = await request_any_node(self._client, bodies.DESCRIBE_ACLS, request, deadline)
            if response["error_code"]:
                raise item_error(
                    response["error_code"], response["error_message"], f"DescribeAcls {f}"
                )
            return [
                _binding(
                    resource["resource_type"],
                    resource["resource_name"],
                    resource.get("pattern_type", ResourcePatternType.LITERAL),
                    acl["principal"],
                    acl["host"],
                    acl["operation"],
                    acl["permission_type"],
                )
                for resource in response["resources"]
                for acl in resource["acls"]
            ]

        return await self._run("describe_acls", timeout_ms, body)

    async def create_acls(
        self, acls: Iterable[AclBinding], timeout_ms: int | None = None
    ) -> AdminResults[AclBinding, CreateAclResult]:
        """Create ACLs; each binding's result carries its own ``error``."""
        wanted = _unique(acls, AclBinding)

        async def body(deadline: Deadline) -> AdminResults[AclBinding, CreateAclResult]:
            request: CreateAclsRequest = {
                "creations": [
                    {
                        "resource_type": b.resource_type,
                        "resource_name": b.resource_name,
                        "resource_pattern_type": b.pattern_type,
                        "principal": b.principal,
                        "host": b.host,
                        "operation": b.operation,
                        "permission_type": b.permission_type,
                    }
                    for b in wanted
                ]
            }
            response = await request_any_node(self._client, bodies.CREATE_ACLS, request, deadline)
            answers = response["results"]
            results: AdminResults[AclBinding, CreateAclResult] = AdminResults()
            for i, b in enumerate(wanted):
                if i >= len(answers):
                    error: errors.KafkaError | None = _unanswered("CreateAcls", answers, wanted)
                elif answers[i]["error_code"]:
                    error = item_error(
                        answers[i]["error_code"], answers[i]["error_message"], repr(b)
                    )
                else:
                    error = None
                results[b] = CreateAclResult(b, error)
            return results

        if not wanted:
            return AdminResults()
        return await self._run("create_acls", timeout_ms, body)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], timeout_ms: int | None = None
    ) -> AdminResults[AclBindingFilter, DeleteAclsResult]:
        """Delete every ACL matching each filter; each filter's result lists the ACLs it
        deleted (and any it matched but could not delete, with their errors)."""
        wanted = _unique(filters, AclBindingFilter)

        async def body(deadline: Deadline) -> AdminResults[AclBindingFilter, DeleteAclsResult]:
            request: DeleteAclsRequest = {"filters": [_filter_body(f) for f in wanted]}
            response = await request_any_node(self._client, bodies.DELETE_ACLS, request, deadline)
            answers = response["filter_results"]
            results: AdminResults[AclBindingFilter, DeleteAclsResult] = AdminResults()
            for i, f in enumerate(wanted):
                if i >= len(answers):
                    results[f] = DeleteAclsResult(f, _unanswered("DeleteAcls", answers, wanted))
                    continue
                answer = answers[i]
                if answer["error_code"]:
                    error = item_error(answer["error_code"], answer["error_message"], repr(f))
                    results[f] = DeleteAclsResult(f, error)
                    continue
                deleted: list[AclBinding] = []
                refused: dict[AclBinding, errors.KafkaError] = {}
                for match in answer["matching_acls"]:
                    binding = _binding(
                        match["resource_type"],
                        match["resource_name"],
                        match.get("pattern_type", ResourcePatternType.LITERAL),
                        match["principal"],
                        match["host"],
                        match["operation"],
                        match["permission_type"],
                    )
                    if match["error_code"]:
                        refused[binding] = item_error(
                            match["error_code"], match["error_message"], repr(binding)
                        )
                    else:
                        deleted.append(binding)
                results[f] = DeleteAclsResult(f, None, tuple(deleted), refused)
            return results

        if not wanted:
            return AdminResults()
        return await self._run("delete_acls", timeout_ms, body)


def _unanswered(api: str, answers: Sequence[object], sent: Sequence[object]) -> errors.KafkaError:
    """The error of an item past the end of a short answer (results come in the order
    the items were sent)."""
    return item_error(-1, f"the broker answered {len(answers)} of {len(sent)} items", api)
