"""ACLs: describe, create and delete, on the real broker and against an authorizer.

Neither embedded broker enforces ACLs (no authorizer can be configured), so:

* on the real broker, each call must report what Kafka answers without an authorizer,
  ``SECURITY_DISABLED``, as the typed error (Tansu's deviations are strict xfails);
* the rest runs against `AclStore`, a scripted broker keeping ACLs in memory with
  Kafka's matching rules, and confluent-kafka (librdkafka, code nobody here wrote)
  reads what we created and writes what we read, on the same scripted broker.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import ScriptedBroker, lacks_api

# (resource_type, resource_name, pattern_type, principal, host, operation, permission)
Acl = tuple[int, str, int, str, str, int, int]

ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4


def _matches(acl: Acl, f: dict[str, Any]) -> bool:
    """Kafka's AclBindingFilter.matches, for the scripted authorizer."""
    rtype, name, pattern, principal, host, operation, permission = acl
    want_name = f["resource_name_filter"]
    want_pattern = f.get("pattern_type_filter", LITERAL)
    if f["resource_type_filter"] not in (ANY, rtype):
        return False
    if want_pattern == MATCH:
        if want_name is not None and not (
            (pattern == LITERAL and name in (want_name, "*"))
            or (pattern == PREFIXED and want_name.startswith(name))
        ):
            return False
    elif want_pattern not in (ANY, pattern) or want_name not in (None, name):
        return False
    return (
        f["principal_filter"] in (None, principal)
        and f["host_filter"] in (None, host)
        and f["operation"] in (ANY, operation)
        and f["permission_type"] in (ANY, permission)
    )


class AclStore:
    """The ACL APIs of a scripted broker with an authorizer: ACLs kept in memory.

    A principal that is not ``User:...`` is refused with INVALID_REQUEST, as Kafka's
    authorizer refuses a principal it cannot parse.
    """

    def __init__(self, broker: ScriptedBroker) -> None:
        self.acls: list[Acl] = []
        #: client id -> API key -> the versions its requests came in.
        self.versions: dict[str | None, dict[int, set[int]]] = {}
        broker.scripts[ApiKey.CREATE_ACLS] = self.create
        broker.scripts[ApiKey.DESCRIBE_ACLS] = self.describe
        broker.scripts[ApiKey.DELETE_ACLS] = self.delete

    def _seen(self, header: RequestHeader) -> None:
        by_key = self.versions.setdefault(header.client_id, {})
        by_key.setdefault(header.api_key, set()).add(header.api_version)

    def create(self, header: RequestHeader, body: dict[str, Any], _: int) -> dict[str, Any]:
        self._seen(header)
        results = []
        for c in body["creations"]:
            if not c["principal"].startswith("User:"):
                results.append({"error_code": 42, "error_message": "bad principal"})
                continue
            acl: Acl = (
                c["resource_type"],
                c["resource_name"],
                c.get("resource_pattern_type", LITERAL),
                c["principal"],
                c["host"],
                c["operation"],
                c["permission_type"],
            )
            if acl not in self.acls:
                self.acls.append(acl)
            results.append({"error_code": 0, "error_message": None})
        return {"throttle_time_ms": 0, "results": results}

    def describe(self, header: RequestHeader, body: dict[str, Any], _: int) -> dict[str, Any]:
        self._seen(header)
        by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for acl in self.acls:
            if _matches(acl, body):
                by_resource.setdefault(acl[:3], []).append(
                    {
                        "principal": acl[3],
                        "host": acl[4],
                        "operation": acl[5],
                        "permission_type": acl[6],
                    }
                )
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "resources": [
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                for (t, n, p), acls in by_resource.items()
            ],
        }

    def delete(self, header: RequestHeader, body: dict[str, Any], _: int) -> dict[str, Any]:
        self._seen(header)
        results = []
        for f in body["filters"]:
            matched = [acl for acl in self.acls if _matches(acl, f)]
            self.acls = [acl for acl in self.acls if acl not in matched]
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": a[0],
                            "resource_name": a[1],
                            "pattern_type": a[2],
                            "principal": a[3],
                            "host": a[4],
                            "operation": a[5],
                            "permission_type": a[6],
                        }
                        for a in matched
                    ],
                }
            )
        return {"throttle_time_ms": 0, "filter_results": results}


@pytest.fixture
async def authorizer() -> AsyncIterator[tuple[ScriptedBroker, AclStore]]:
    broker = ScriptedBroker()
    store = AclStore(broker)
    await broker.start()
    yield broker, store
    await broker.stop()


ALICE_READS_ORDERS = AclBinding("topic", "orders", "User:alice", "read")
BOB_WRITES_PAY = AclBinding(
    ResourceType.TOPIC, "pay-", "User:bob", AclOperation.WRITE, pattern_type="prefixed"
)
EVERYONE_DESCRIBES = AclBinding("topic", "*", "User:*", "describe", host="10.0.0.1")
ALICE_DENIED_GROUP = AclBinding("group", "billing", "User:alice", "read", "deny")


async def test_create_describe_delete_against_an_authorizer(
    authorizer: tuple[ScriptedBroker, AclStore],
) -> None:
    broker, store = authorizer
    async with AdminClient(broker.bootstrap, client_id="ours", request_timeout_ms=5000) as admin:
        bad = AclBinding("topic", "orders", "alice", "read")  # no principal type
        created = await admin.create_acls(
            [ALICE_READS_ORDERS, BOB_WRITES_PAY, EVERYONE_DESCRIBES, ALICE_DENIED_GROUP, bad]
        )
        assert created.succeeded == [
            ALICE_READS_ORDERS,
            BOB_WRITES_PAY,
            EVERYONE_DESCRIBES,
            ALICE_DENIED_GROUP,
        ]
        assert isinstance(created[bad].error, errors.InvalidRequestError)
        assert "bad principal" in str(created[bad].error)

        every = await admin.describe_acls()
        assert set(every) == {
            ALICE_READS_ORDERS,
            BOB_WRITES_PAY,
            EVERYONE_DESCRIBES,
            ALICE_DENIED_GROUP,
        }
        # Every ACL that applies to topic "pay-eu": the prefix and the wildcard.
        applying = await admin.describe_acls(
            AclBindingFilter("topic", "pay-eu", pattern_type=ResourcePatternType.MATCH)
        )
        assert set(applying) == {BOB_WRITES_PAY, EVERYONE_DESCRIBES}
        denied = await admin.describe_acls(AclBindingFilter(permission_type="deny"))
        assert denied == [ALICE_DENIED_GROUP]
        assert denied[0].permission_type is AclPermissionType.DENY

        alice = AclBindingFilter(principal="User:alice")
        exact = AclBindingFilter.of(BOB_WRITES_PAY)
        nothing = AclBindingFilter("cluster")
        deleted = await admin.delete_acls([alice, exact, nothing])
        assert deleted.ok
        assert set(deleted[alice].deleted) == {ALICE_READS_ORDERS, ALICE_DENIED_GROUP}
        assert deleted[exact].deleted == (BOB_WRITES_PAY,)
        assert deleted[nothing].deleted == ()
        assert await admin.describe_acls() == [EVERYONE_DESCRIBES]
    # The newest version both sides know (v3, flexible) was used for every call.
    assert store.versions["ours"] == {
        ApiKey.CREATE_ACLS: {3},
        ApiKey.DESCRIBE_ACLS: {3},
        ApiKey.DELETE_ACLS: {3},
    }


async def test_short_and_failed_answers_are_item_errors(
    authorizer: tuple[ScriptedBroker, AclStore],
) -> None:
    broker, _ = authorizer

    def refuse(header: RequestHeader, body: dict[str, Any], count: int) -> dict[str, Any]:
        return {"results": [{"error_code": 31, "error_message": "not allowed"}]}

    broker.scripts[ApiKey.CREATE_ACLS] = refuse
    broker.scripts[ApiKey.DESCRIBE_ACLS] = lambda header, body, count: {
        "error_code": 31,
        "error_message": "not allowed",
        "resources": [],
    }
    async with AdminClient(broker.bootstrap, request_timeout_ms=5000) as admin:
        created = await admin.create_acls([ALICE_READS_ORDERS, BOB_WRITES_PAY])
        # The broker answered one of two: the first is its answer, the second an error
        # saying so, never a silent success.
        assert isinstance(created[ALICE_READS_ORDERS].error, errors.ClusterAuthorizationFailedError)
        assert "answered 1 of 2" in str(created[BOB_WRITES_PAY].error)
        with pytest.raises(errors.ClusterAuthorizationFailedError, match="not allowed"):
            await admin.describe_acls()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: AclBinding("any", "t", "User:a", "read"),
            "resource_type 'any' is not one of TOPIC, GROUP",
        ),
        (lambda: AclBinding("topic", "", "User:a", "read"), "resource_name must be"),
        (
            lambda: AclBinding("topic", "t", "User:a", "any"),
            "operation 'any' is not one of ALL, READ",
        ),
        (lambda: AclBinding("topic", "t", "User:a", "read", "any"), "permission_type"),
        (lambda: AclBinding("topic", "t", "User:a", "read", pattern_type="match"), "LITERAL"),
        (lambda: AclBindingFilter(operation="reed"), "operation 'reed' is not one of ANY, ALL"),
        (lambda: AclBindingFilter(principal=""), "principal must be a non-empty str or None"),
    ],
)
def test_invalid_bindings_fail_at_construction(make: Any, message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message):
        make()


# --- the real broker: no authorizer -----------------------------------------------------


async def test_describe_without_authorizer_is_security_disabled(
    admin: AdminClient, expect_deviation: ExpectDeviation
) -> None:
    described: object
    try:
        described = await admin.describe_acls()
    except errors.SecurityDisabledError as exc:
        described = exc
    with expect_deviation("tansu", "Tansu 0.6.0 answers DescribeAcls with no ACLs and no error"):
        assert isinstance(described, errors.SecurityDisabledError)


async def test_create_without_authorizer_is_security_disabled(
    admin: AdminClient, expect_deviation: ExpectDeviation
) -> None:
    with expect_deviation(
        "tansu",
        "Tansu 0.6.0 answers CreateAcls with a null results array",
        raises=errors.DecodeError,
        match="null value for non-nullable field results",
    ):
        created = await admin.create_acls([ALICE_READS_ORDERS])
    assert isinstance(created[ALICE_READS_ORDERS].error, errors.SecurityDisabledError)


async def test_delete_without_authorizer_is_security_disabled(
    admin: AdminClient, expect_deviation: ExpectDeviation
) -> None:
    with lacks_api(expect_deviation, "tansu", "DeleteAcls"):
        deleted = await admin.delete_acls([AclBindingFilter()])
    assert isinstance(deleted[AclBindingFilter()].error, errors.SecurityDisabledError)


# --- confluent-kafka on the same authorizer ---------------------------------------------


def _peer_binding(peer: Any, b: AclBinding) -> Any:
    from confluent_kafka.admin import AclBinding as PeerBinding
    from confluent_kafka.admin import AclOperation as PeerOperation
    from confluent_kafka.admin import AclPermissionType as PeerPermission
    from confluent_kafka.admin import ResourcePatternType as PeerPattern
    from confluent_kafka.admin import ResourceType as PeerType

    del peer
    return PeerBinding(
        PeerType[b.resource_type.name],
        b.resource_name,
        PeerPattern[b.pattern_type.name],
        b.principal,
        b.host,
        PeerOperation[b.operation.name],
        PeerPermission[b.permission_type.name],
    )


def _from_peer(p: Any) -> AclBinding:
    return AclBinding(
        p.restype.name,
        p.name,
        p.principal,
        p.operation.name,
        p.permission_type.name,
        p.host,
        p.resource_pattern_type.name,
    )


async def test_confluent_kafka_reads_what_we_wrote_and_back(
    authorizer: tuple[ScriptedBroker, AclStore],
) -> None:
    from confluent_kafka.admin import AclBindingFilter as PeerFilter
    from confluent_kafka.admin import AclOperation as PeerOperation
    from confluent_kafka.admin import AclPermissionType as PeerPermission
    from confluent_kafka.admin import AdminClient as PeerAdmin
    from confluent_kafka.admin import ResourcePatternType as PeerPattern
    from confluent_kafka.admin import ResourceType as PeerType

    broker, store = authorizer
    peer = PeerAdmin({"bootstrap.servers": broker.bootstrap, "client.id": "librdkafka"})
    every = PeerFilter(
        PeerType.ANY, None, PeerPattern.ANY, None, None, PeerOperation.ANY, PeerPermission.ANY
    )

    def peer_describe(client: Any) -> set[AclBinding]:
        return {_from_peer(b) for b in client.describe_acls(every).result(10)}

    async with AdminClient(broker.bootstrap, request_timeout_ms=5000) as admin:
        ours = [ALICE_READS_ORDERS, BOB_WRITES_PAY, EVERYONE_DESCRIBES]
        (await admin.create_acls(ours)).raise_for_errors()
        assert await asyncio.to_thread(peer_describe, peer) == set(ours)

        theirs = [ALICE_DENIED_GROUP]
        futures = peer.create_acls([_peer_binding(peer, b) for b in theirs])
        for future in futures.values():
            await asyncio.to_thread(future.result, 10)
        assert set(await admin.describe_acls()) == set(ours + theirs)

        # They delete by our filter's fields; we see what is left.
        gone = peer.delete_acls(
            [
                PeerFilter(
                    PeerType.TOPIC,
                    "pay-",
                    PeerPattern.PREFIXED,
                    None,
                    None,
                    PeerOperation.ANY,
                    PeerPermission.ANY,
                )
            ]
        )
        for future in gone.values():
            deleted = await asyncio.to_thread(future.result, 10)
            assert [_from_peer(b) for b in deleted] == [BOB_WRITES_PAY]
        deleted_by_us = await admin.delete_acls([AclBindingFilter("group")])
        assert deleted_by_us[AclBindingFilter("group")].deleted == (ALICE_DENIED_GROUP,)
        assert await asyncio.to_thread(peer_describe, peer) == {
            ALICE_READS_ORDERS,
            EVERYONE_DESCRIBES,
        }
    # librdkafka spoke the three APIs, at the versions it chose, to the same store.
    assert {ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS} <= set(
        store.versions["librdkafka"]
    )
    del peer  # (librdkafka closes its connections when the handle goes)
    gc.collect()


# --- the command line --------------------------------------------------------------------


async def test_cli_creates_lists_and_deletes(authorizer: tuple[ScriptedBroker, AclStore]) -> None:
    from .test_cli import cli_command, run

    broker, store = authorizer

    async def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # In a thread: the scripted broker answers on this test's loop meanwhile.
        return await asyncio.to_thread(run, cli_command(), "-b", broker.bootstrap, "acls", *args)

    created = await cli(
        "create", "--topic", "orders", "--allow", "User:alice", "--operation", "read",
        "--operation", "describe",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [
        "Created TOPIC LITERAL orders User:alice * READ ALLOW",
        "Created TOPIC LITERAL orders User:alice * DESCRIBE ALLOW",
    ]
    prefixed = await cli(
        "create", "--topic", "pay-", "--prefixed", "--deny", "User:bob", "--operation", "write"
    )
    assert prefixed.returncode == 0, prefixed.stderr
    refused = await cli("create", "--group", "g", "--allow", "bob", "--operation", "read")
    assert refused.returncode == 1
    assert "bad principal" in refused.stderr and "[INVALID_REQUEST]" in refused.stderr

    applying = await cli("list", "--topic", "pay-eu", "--match", "--json")
    assert [json.loads(line) for line in applying.stdout.splitlines()] == [
        {
            "resource_type": "TOPIC",
            "pattern": "PREFIXED",
            "name": "pay-",
            "principal": "User:bob",
            "host": "*",
            "operation": "WRITE",
            "permission": "DENY",
        }
    ]
    listed = await cli("list")
    assert listed.stdout.split("\n")[0].split() == [
        "RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION",
    ]  # fmt: skip
    assert len(listed.stdout.splitlines()) == 4

    everything = await cli("delete")
    assert everything.returncode == 2 and "--all" in everything.stderr
    deleted = await cli("delete", "--principal", "User:alice")
    assert deleted.returncode == 0, deleted.stderr
    assert sorted(deleted.stdout.splitlines()) == [
        "Deleted TOPIC LITERAL orders User:alice * DESCRIBE ALLOW",
        "Deleted TOPIC LITERAL orders User:alice * READ ALLOW",
    ]
    assert store.acls == [(2, "pay-", PREFIXED, "User:bob", "*", 4, 2)]
