"""The admin client's types for who may do what: ACLs (`AclBinding`, `AclBindingFilter`
and Kafka's enums) and users' SCRAM credentials (the changes and their results)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from aiokafka_lite import errors
from aiokafka_lite.admin.types import checked_text, enum_member

__all__ = [
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "CreateAclResult",
    "DeleteAclsResult",
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
    "UserScramCredentialsResult",
]


_E = TypeVar("_E", bound=enum.IntEnum)


def from_code(kind: type[_E], code: int) -> _E:
    """A broker's code as a member of ``kind``; UNKNOWN (0) for a code newer than this
    client, rather than failing the whole answer."""
    return next((m for m in kind if m.value == code), kind(0))


# --- access control lists ------------------------------------------------------------


class ResourceType(enum.IntEnum):
    """What an ACL protects (Kafka's resource type codes). ANY matches every type in
    a filter; UNKNOWN is what a newer broker's unknown type reads as."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ResourcePatternType(enum.IntEnum):
    """How an ACL's resource name matches: LITERAL (the name itself; ``"*"`` is every
    name) or PREFIXED (every name starting with it). In a filter, ANY matches both
    kinds as written, MATCH every ACL that applies to the filter's name."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """The operation an ACL allows or denies (ALL: every one; ANY: filters only)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Whether an ACL allows or denies (ANY: filters only)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, init=False)
class AclBinding:
    """One ACL: ``principal`` (``"User:alice"``) from ``host`` (``"*"``: any) is allowed
    or denied ``operation`` on the resource ``resource_type``/``resource_name``, the
    name taken literally or as a prefix (``pattern_type``).

    The enums may also be given by name (``"topic"``, ``"read"``) or code. A binding
    names one ACL, so the filter-only values (ANY, MATCH, UNKNOWN) are refused with
    `ConfigurationError`, as are empty names. Bindings are hashable: the keys of
    ``create_acls``'s results.
    """

    resource_type: ResourceType
    resource_name: str
    principal: str
    operation: AclOperation
    permission_type: AclPermissionType
    host: str
    pattern_type: ResourcePatternType

    def __init__(
        self,
        resource_type: ResourceType | str | int,
        resource_name: str,
        principal: str,
        operation: AclOperation | str | int,
        permission_type: AclPermissionType | str | int = AclPermissionType.ALLOW,
        host: str = "*",
        pattern_type: ResourcePatternType | str | int = ResourcePatternType.LITERAL,
    ) -> None:
        set_ = object.__setattr__
        set_(
            self,
            "resource_type",
            enum_member(
                ResourceType,
                resource_type,
                "resource_type",
                (ResourceType.ANY, ResourceType.UNKNOWN),
            ),
        )
        set_(self, "resource_name", checked_text(resource_name, "resource_name", optional=False))
        set_(self, "principal", checked_text(principal, "principal", optional=False))
        set_(
            self,
            "operation",
            enum_member(
                AclOperation, operation, "operation", (AclOperation.ANY, AclOperation.UNKNOWN)
            ),
        )
        set_(
            self,
            "permission_type",
            enum_member(
                AclPermissionType,
                permission_type,
                "permission_type",
                (AclPermissionType.ANY, AclPermissionType.UNKNOWN),
            ),
        )
        set_(self, "host", checked_text(host, "host", optional=False))
        set_(
            self,
            "pattern_type",
            enum_member(
                ResourcePatternType,
                pattern_type,
                "pattern_type",
                (ResourcePatternType.ANY, ResourcePatternType.MATCH, ResourcePatternType.UNKNOWN),
            ),
        )

    def __repr__(self) -> str:
        return (
            f"AclBinding({self.resource_type.name} {self.pattern_type.name} "
            f"{self.resource_name!r}: {self.permission_type.name} {self.principal!r} "
            f"{self.operation.name} from {self.host!r})"
        )


@dataclass(frozen=True, init=False)
class AclBindingFilter:
    """Which ACLs ``describe_acls`` and ``delete_acls`` act on. Each field narrows the
    match; ``None`` (names, principal, host) and ANY (enums) match everything, so
    ``AclBindingFilter()`` matches every ACL. ``pattern_type`` defaults to ANY (both
    LITERAL and PREFIXED bindings of exactly ``resource_name``); MATCH finds every ACL
    that applies to ``resource_name`` (the literal one, ``"*"``, and the prefixes of
    it). Hashable: the keys of ``delete_acls``'s results.
    """

    resource_type: ResourceType
    resource_name: str | None
    principal: str | None
    operation: AclOperation
    permission_type: AclPermissionType
    host: str | None
    pattern_type: ResourcePatternType

    def __init__(
        self,
        resource_type: ResourceType | str | int = ResourceType.ANY,
        resource_name: str | None = None,
        principal: str | None = None,
        operation: AclOperation | str | int = AclOperation.ANY,
        permission_type: AclPermissionType | str | int = AclPermissionType.ANY,
        host: str | None = None,
        pattern_type: ResourcePatternType | str | int = ResourcePatternType.ANY,
    ) -> None:
        set_ = object.__setattr__
        set_(
            self,
            "resource_type",
            enum_member(ResourceType, resource_type, "resource_type", (ResourceType.UNKNOWN,)),
        )
        set_(self, "resource_name", checked_text(resource_name, "resource_name", optional=True))
        set_(self, "principal", checked_text(principal, "principal", optional=True))
        set_(
            self,
            "operation",
            enum_member(AclOperation, operation, "operation", (AclOperation.UNKNOWN,)),
        )
        set_(
            self,
            "permission_type",
            enum_member(
                AclPermissionType, permission_type, "permission_type", (AclPermissionType.UNKNOWN,)
            ),
        )
        set_(self, "host", checked_text(host, "host", optional=True))
        set_(
            self,
            "pattern_type",
            enum_member(
                ResourcePatternType, pattern_type, "pattern_type", (ResourcePatternType.UNKNOWN,)
            ),
        )

    def __repr__(self) -> str:
        parts = [
            f"{name}={value.name if isinstance(value, enum.Enum) else repr(value)}"
            for name, value in vars(self).items()
            if value is not None and value != 1  # (1 is every enum's ANY)
        ]
        return f"AclBindingFilter({', '.join(parts) or 'every ACL'})"

    @classmethod
    def of(cls, binding: AclBinding) -> AclBindingFilter:
        """The filter matching exactly ``binding``."""
        return cls(
            binding.resource_type,
            binding.resource_name,
            binding.principal,
            binding.operation,
            binding.permission_type,
            binding.host,
            binding.pattern_type,
        )


# --- SCRAM credentials --------------------------------------------------------------------

#: Kafka's bounds on a SCRAM credential's iteration count.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


class ScramMechanism(enum.IntEnum):
    """A SCRAM mechanism (Kafka's codes); also given as ``"SCRAM-SHA-256"``."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def hash_name(self) -> str:
        """The ``hashlib`` name of its hash function."""
        return {1: "sha256", 2: "sha512"}[self.value]


def _scram_mechanism(value: object) -> ScramMechanism:
    if isinstance(value, str):
        value = value.replace("-", "_")
    return enum_member(ScramMechanism, value, "SCRAM mechanism", (ScramMechanism.UNKNOWN,))


def _scram_user(user: object) -> str:
    text = checked_text(user, "user", optional=False)
    assert text is not None
    return text


@dataclass(frozen=True, init=False)
class UserScramCredentialUpsertion:
    """Set ``user``'s SCRAM credential for ``mechanism`` from ``password``: the client
    salts and hashes it (the password itself is never sent). ``salt`` defaults to 32
    random bytes; ``iterations`` must be within Kafka's 4096 to 16384."""

    user: str
    mechanism: ScramMechanism
    password: bytes = field(repr=False)
    iterations: int
    salt: bytes | None = field(repr=False)

    def __init__(
        self,
        user: str,
        mechanism: ScramMechanism | str | int,
        password: str | bytes,
        iterations: int = SCRAM_MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> None:
        if isinstance(password, str):
            password = password.encode("utf-8")  # raw UTF-8, as Kafka's clients hash it
        if not isinstance(password, bytes) or not password:
            raise errors.ConfigurationError("password must be a non-empty str or bytes")
        if (
            not isinstance(iterations, int)
            or isinstance(iterations, bool)
            or not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS
        ):
            raise errors.ConfigurationError(
                f"iterations must be an int from {SCRAM_MIN_ITERATIONS} to "
                f"{SCRAM_MAX_ITERATIONS}, got {iterations!r}"
            )
        if salt is not None and (not isinstance(salt, bytes) or not salt):
            raise errors.ConfigurationError("salt must be non-empty bytes or None")
        object.__setattr__(self, "user", _scram_user(user))
        object.__setattr__(self, "mechanism", _scram_mechanism(mechanism))
        object.__setattr__(self, "password", password)
        object.__setattr__(self, "iterations", iterations)
        object.__setattr__(self, "salt", salt)


@dataclass(frozen=True, init=False)
class UserScramCredentialDeletion:
    """Delete ``user``'s SCRAM credential for ``mechanism``."""

    user: str
    mechanism: ScramMechanism

    def __init__(self, user: str, mechanism: ScramMechanism | str | int) -> None:
        object.__setattr__(self, "user", _scram_user(user))
        object.__setattr__(self, "mechanism", _scram_mechanism(mechanism))


# --- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateAclResult:
    binding: AclBinding
    error: errors.KafkaError | None = None


@dataclass(frozen=True)
class DeleteAclsResult:
    """What one filter of ``delete_acls`` deleted, and the ACLs it matched but could
    not delete (each with its error)."""

    filter: AclBindingFilter
    error: errors.KafkaError | None = None
    deleted: tuple[AclBinding, ...] = ()
    not_deleted: Mapping[AclBinding, errors.KafkaError] = field(default_factory=dict)


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    """A user's SCRAM credentials (mechanism and iterations: never the keys)."""

    user: str
    #: `ResourceNotFoundError` for a user without SCRAM credentials.
    error: errors.KafkaError | None = None
    credentials: tuple[ScramCredentialInfo, ...] = ()


@dataclass(frozen=True)
class UserScramCredentialsResult:
    user: str
    error: errors.KafkaError | None = None
