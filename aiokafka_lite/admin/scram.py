"""SCRAM credentials of users: describe them, set and delete them
(DescribeUserScramCredentials, AlterUserScramCredentials).

The client salts and hashes each new password (PBKDF2 with the mechanism's HMAC, as
SCRAM's SaltedPassword, RFC 5802) and sends only the salt, the iteration count and the
salted password. Changes go to the controller (sent again while the answer is
NOT_CONTROLLER); descriptions to any broker.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Iterable

from aiokafka_lite import errors
from aiokafka_lite.admin.base import AdminBase, ControllerAnswers, item_error
from aiokafka_lite.admin.security_types import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialsResult,
    UserScramCredentialUpsertion,
    from_code,
)
from aiokafka_lite.admin.types import (
    AdminResults,
)
from aiokafka_lite.admin.validation import unique_names
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.bodies import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsScramCredentialUpsertion,
    DescribeUserScramCredentialsRequest,
)
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request_any_node

__all__ = ["ScramAdmin", "salted_password"]

#: Bytes of random salt for a credential when the caller gives none.
SALT_BYTES = 32

Alteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def salted_password(
    mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int
) -> bytes:
    """SCRAM's SaltedPassword: Hi(password, salt, iterations), which is PBKDF2 with the
    mechanism's HMAC (RFC 5802 section 2.2)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


class ScramAdmin(AdminBase):
    """Users' SCRAM credentials."""

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, timeout_ms: int | None = None
    ) -> AdminResults[str, UserScramCredentialsDescription]:
        """The SCRAM mechanisms and iteration counts of ``users`` (every user with a
        credential when None). A user without one gets `ResourceNotFoundError`."""
        names = None if users is None else unique_names("user", users)

        async def body(deadline: Deadline) -> AdminResults[str, UserScramCredentialsDescription]:
            request: DescribeUserScramCredentialsRequest = {
                "users": None if names is None else [{"name": n} for n in names]
            }
            response = await request_any_node(
                self._client, bodies.DESCRIBE_USER_SCRAM_CREDENTIALS, request, deadline
            )
            if response["error_code"]:
                raise item_error(
                    response["error_code"],
                    response["error_message"],
                    "DescribeUserScramCredentials",
                )
            results: AdminResults[str, UserScramCredentialsDescription] = AdminResults()
            for r in response["results"]:
                user = r["user"]
                if r["error_code"]:
                    error = item_error(r["error_code"], r["error_message"], f"user {user!r}")
                    results[user] = UserScramCredentialsDescription(user, error)
                    continue
                infos = tuple(
                    ScramCredentialInfo(from_code(ScramMechanism, c["mechanism"]), c["iterations"])
                    for c in r["credential_infos"]
                )
                results[user] = UserScramCredentialsDescription(user, None, infos)
            for user in names or ():
                if user not in results:
                    error = item_error(-1, "the broker returned no result", f"user {user!r}")
                    results[user] = UserScramCredentialsDescription(user, error)
            return results

        if names == []:
            return AdminResults()
        return await self._run("describe_user_scram_credentials", timeout_ms, body)

    async def alter_user_scram_credentials(
        self, alterations: Iterable[Alteration], timeout_ms: int | None = None
    ) -> AdminResults[str, UserScramCredentialsResult]:
        """Set (`UserScramCredentialUpsertion`) and delete (`UserScramCredentialDeletion`)
        SCRAM credentials; one result per user, with its own ``error``."""
        changes = list(alterations)
        for change in changes:
            if not isinstance(change, (UserScramCredentialUpsertion, UserScramCredentialDeletion)):
                raise errors.ConfigurationError(
                    "expected UserScramCredentialUpsertion or UserScramCredentialDeletion "
                    f"items, got {change!r}"
                )
        users = list(dict.fromkeys(change.user for change in changes))

        def salt_all() -> list[AlterUserScramCredentialsScramCredentialUpsertion]:
            upsertions: list[AlterUserScramCredentialsScramCredentialUpsertion] = []
            for u in changes:
                if isinstance(u, UserScramCredentialUpsertion):
                    salt = u.salt if u.salt is not None else secrets.token_bytes(SALT_BYTES)
                    upsertions.append(
                        {
                            "name": u.user,
                            "mechanism": u.mechanism,
                            "iterations": u.iterations,
                            "salt": salt,
                            "salted_password": salted_password(
                                u.mechanism, u.password, salt, u.iterations
                            ),
                        }
                    )
            return upsertions

        async def body(deadline: Deadline) -> AdminResults[str, UserScramCredentialsResult]:
            # PBKDF2 is the costly step: off the event loop (hashlib releases the GIL).
            upsertions = await asyncio.to_thread(salt_all)

            def build(pending: list[str], _: Deadline) -> AlterUserScramCredentialsRequest:
                wanted = set(pending)
                return {
                    "deletions": [
                        {"name": d.user, "mechanism": d.mechanism}
                        for d in changes
                        if isinstance(d, UserScramCredentialDeletion) and d.user in wanted
                    ],
                    "upsertions": [u for u in upsertions if u["name"] in wanted],
                }

            def parse(response: AlterUserScramCredentialsResponse) -> ControllerAnswers[None]:
                return {
                    r["user"]: (r["error_code"], r["error_message"], None)
                    for r in response["results"]
                }

            outcome = await self._controller_rounds(
                bodies.ALTER_USER_SCRAM_CREDENTIALS, users, build, parse, deadline
            )
            results: AdminResults[str, UserScramCredentialsResult] = AdminResults()
            for user in users:
                code, message, _ = outcome[user]
                error = item_error(code, message, f"user {user!r}") if code else None
                results[user] = UserScramCredentialsResult(user, error)
            return results

        if not changes:
            return AdminResults()
        return await self._run("alter_user_scram_credentials", timeout_ms, body)
