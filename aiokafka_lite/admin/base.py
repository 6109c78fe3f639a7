"""What every area of the admin client shares: its construction and lifecycle, and the
plumbing of one call (its deadline, its requests to any node or to the controller).

Requests go through `aiokafka_lite.routing`, the cluster client's one request path;
this module only adds what is admin's own: every call under its `Deadline`, a call
whose every item ran out of time raised as the call's timeout, and the controller.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.admin.types import AdminResults
from aiokafka_lite.admin.validation import check_timeout
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.connection import DEFAULT_RECEIVE_MESSAGE_MAX_BYTES
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.protocol.bodies import MetadataRequest, MetadataResponse
from aiokafka_lite.retry import Deadline
from aiokafka_lite.routing import request, request_any_node, retry_delay
from aiokafka_lite.security import SecurityConfig, TokenProviderLike

__all__ = [
    "AdminBase",
    "ControllerAnswers",
    "ControllerOutcome",
    "item_error",
    "request_metadata",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_E = TypeVar("_E")
_Admin = TypeVar("_Admin", bound="AdminBase")

#: What a controller request's ``parse`` reads from one answer: name -> (error code,
#: error message, the response's entry for it).
ControllerAnswers = dict[str, tuple[int, str | None, _E]]
#: The outcome of `AdminBase._controller_rounds`: as ``ControllerAnswers``, with None
#: for the entry of a name no answer had.
ControllerOutcome = dict[str, tuple[int, str | None, _E | None]]


async def request_metadata(
    client: KafkaClient, topics: list[str] | None, deadline: Deadline
) -> MetadataResponse:
    """A Metadata answer for ``topics`` (None: all); never creates or tracks a topic."""
    body: MetadataRequest = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return await request_any_node(client, bodies.METADATA, body, deadline)


def item_error(code: int, message: str | None, what: str) -> errors.KafkaError:
    """The typed error of one item's error code (``what`` names the item)."""
    detail = f"{what}: {message}" if message else what
    return errors.error_for_code(code, detail)


class AdminBase:
    """The admin client's constructor, lifecycle and per-call plumbing."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] = "localhost:9092",
        *,
        client_id: str = "aiokafka-lite-admin",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
        security: SecurityConfig | None = None,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: TokenProviderLike | None = None,
        api_version: str | None = "auto",
        connections_max_idle_ms: int = 540000,
        receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
        loop: Any = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
    ) -> None:
        # aiokafka's loop and Kerberos settings: accepted, unused (the running loop is
        # used; sasl_mechanism="GSSAPI" itself is refused below).
        del loop, sasl_kerberos_service_name, sasl_kerberos_domain_name
        if security is None:
            security = SecurityConfig.from_options(
                security_protocol=security_protocol,
                ssl_context=ssl_context,
                sasl_mechanism=sasl_mechanism,
                sasl_plain_username=sasl_plain_username,
                sasl_plain_password=sasl_plain_password,
                sasl_oauth_token_provider=sasl_oauth_token_provider,
            )
        elif not isinstance(security, SecurityConfig):
            raise errors.ConfigurationError("security must be a SecurityConfig")
        if api_version not in ("auto", None):
            log.debug("api_version=%r ignored: versions are negotiated per connection", api_version)
        del connections_max_idle_ms
        self._client = KafkaClient(
            bootstrap_servers,
            client_id=client_id,
            security=security,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            # Describing a topic must never create it.
            allow_auto_create_topics=False,
            receive_message_max_bytes=receive_message_max_bytes,
        )
        self._timeout_ms = request_timeout_ms
        self._backoff = retry_backoff_ms / 1000
        self._started = False
        self._closed = False

    @property
    def client(self) -> KafkaClient:
        """The underlying cluster client."""
        return self._client

    async def start(self) -> None:
        """Connect to the cluster; raises `NoBrokersAvailableError` if none answers in time."""
        if self._closed:
            raise errors.IllegalStateError(
                "the admin client was closed and cannot be started again; create a new one"
            )
        if self._started:
            return
        await self._client.start()
        self._started = True

    async def close(self) -> None:
        self._closed = True
        await self._client.close()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Garbage-collected while started and never closed (no loop access here).
        if not self.__dict__.get("_started") or self.__dict__.get("_closed", True):
            return
        _warn(
            f"unclosed admin client {self!r}; call close() (or use 'async with')",
            ResourceWarning,
            source=self,
        )

    async def __aenter__(self: _Admin) -> _Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- one call ------------------------------------------------------------------

    async def _run(
        self,
        what: str,
        timeout_ms: int | None,
        body: Callable[[Deadline], Awaitable[_T]],
    ) -> _T:
        """Run one admin call under its deadline, as a `KafkaTimeoutError` when it passes."""
        check_timeout(timeout_ms)
        if self._closed:
            raise errors.IllegalStateError("the admin client is closed")
        if not self._started:
            raise errors.IllegalStateError("admin client is not started; call start() first")
        deadline = Deadline(timeout_ms or self._timeout_ms, what)
        try:
            # The margin lets inner requests report their own, more precise timeout.
            result = await wait_for(body(deadline), deadline.timeout_ms / 1000 + 0.5)
        except errors.KafkaTimeoutError:
            raise  # the body's own, naming what it waited for
        except asyncio.TimeoutError:
            raise deadline.timeout_error() from None
        if isinstance(result, AdminResults) and result:
            # Every item ran out of time: that is the call timing out, not per-item news
            # (an item's own request timeout can fire a moment before the call's deadline).
            failed = result.errors
            if len(failed) == len(result) and all(
                isinstance(e, errors.KafkaTimeoutError) for e in failed.values()
            ):
                raise deadline.timeout_error(next(iter(failed.values())))
        return result

    async def _send(
        self, node_id: int, api_key: Api[RequestT, ResponseT], body: RequestT, deadline: Deadline
    ) -> ResponseT:
        return await request(self._client, node_id, api_key, body, deadline)

    async def _send_to_node(
        self, node_id: int, api_key: Api[RequestT, ResponseT], body: RequestT, deadline: Deadline
    ) -> ResponseT:
        """A request only ``node_id`` can answer (about itself): sent again after a
        backoff while its connection fails, until the deadline (then its timeout, naming
        the node and the connection error)."""
        last: errors.KafkaError | None = None
        while True:
            deadline.check(last)
            try:
                return await self._send(node_id, api_key, body, deadline)
            except errors.KafkaConnectionError as exc:
                last = errors.KafkaConnectionError(
                    self._client.node_problem(node_id) or f"node {node_id}: {exc}"
                )
            except errors.KafkaTimeoutError as exc:
                deadline.raise_cut_short(exc, last)
            await self._pause(deadline, last)

    async def _send_to_node_loaded(
        self,
        node_id: int,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        deadline: Deadline,
        code_of: Callable[[ResponseT], int],
        loading: frozenset[int],
        what: str,
    ) -> ResponseT:
        """`_send_to_node`, asked again after a backoff while the answer's error code
        (``code_of``) is one of ``loading``: a broker still loading the groups or
        transactions it just took over (``what`` names the request in the timeout)."""
        while True:
            response = await self._send_to_node(node_id, api_key, body, deadline)
            code = code_of(response)
            if code not in loading:
                return response
            await self._pause(deadline, item_error(code, None, f"{what} on node {node_id}"))

    async def _version(self, api_key: int, deadline: Deadline) -> int | None:
        """The version of ``api_key`` negotiated with a broker (None: it lacks the API)."""
        node = self._client.least_loaded_node()
        conn = await wait_for(self._client.get_connection(node), deadline.remaining())
        try:
            return conn.version_for(api_key)
        except errors.UnsupportedVersionError:
            return None

    async def _pause(self, deadline: Deadline, last: errors.KafkaError | None) -> None:
        """Back off before a retry; raise the timeout if there is no time left."""
        await deadline.pause(retry_delay(self._client), last)

    async def _refresh(self, deadline: Deadline) -> None:
        """Refresh the client's cluster view (controller, brokers) before a retry."""
        try:
            await self._client.refresh_metadata(timeout_ms=deadline.remaining_ms())
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.debug("metadata refresh for %s failed: %s", deadline.what, exc)

    # --- the controller --------------------------------------------------------------

    def _controller(self) -> int:
        controller = self._client.cluster.controller_id
        if controller >= 0 and controller in self._client.cluster.brokers:
            return controller
        return self._client.least_loaded_node()

    async def _controller_rounds(
        self,
        api_key: Api[RequestT, ResponseT],
        names: list[str],
        build: Callable[[list[str], Deadline], RequestT],
        parse: Callable[[ResponseT], ControllerAnswers[_E]],
        deadline: Deadline,
    ) -> ControllerOutcome[_E]:
        """Send ``names`` to the controller; resend those answered NOT_CONTROLLER."""
        outcome: ControllerOutcome[_E] = {}
        pending = list(names)
        last: errors.KafkaError | None = None
        while pending:
            try:
                response = await self._send(
                    self._controller(), api_key, build(pending, deadline), deadline
                )
            except errors.KafkaConnectionError as exc:
                last = exc
                await self._pause(deadline, last)
                await self._refresh(deadline)
                continue
            parsed = parse(response)
            retry: list[str] = []
            for name in pending:
                entry = parsed.get(name)
                if entry is None:
                    outcome[name] = (-1, f"the broker returned no result for {name!r}", None)
                elif (
                    entry[0] == errors.NotControllerError.errno
                    and deadline.remaining() > self._backoff
                ):
                    retry.append(name)
                    last = item_error(entry[0], entry[1], name)
                else:
                    outcome[name] = entry
            pending = retry
            if pending:
                await self._pause(deadline, last)
                await self._refresh(deadline)
        return outcome
