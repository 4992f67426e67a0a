"""Resource subscriptions: `jobs://runs/{id}`, `jobs://stats`, `jobs://backfills`,
`jobs://descriptors`, told when they change, in both protocol eras.

One listener per server process waits on the engine's change signal (`engine/changes.py`:
PostgreSQL LISTEN, SQLite's shared feed and data_version, memory's feed) — never a poll per
subscriber. On each change it re-reads every followed URI ONCE (`followed.fingerprint`), and
tells only the followers of a URI whose reading moved: a 2025-11-25 session by a
`notifications/resources/updated` on its connection, a 2026-07-28 `subscriptions/listen` stream
through the server's bus (the SDK's listen handler filters by the stream's URIs). When the
published descriptors change, `notifications/resources/list_changed` goes to the legacy sessions
that listed resources and to listen streams that asked for it.

Bounded: at most `per_session` URIs per session (a legacy connection, or one listen stream) and
`total` follows in all (SUBSCRIPTION_LIMIT). A legacy session's follows end with its connection
(`Connection.exit_stack`), a listen stream's with the stream; the listener ends when nobody
follows anything, and with the server (`stop`, run by the lifespan).

Watchers (`watch`) ride the same listener for other things a change may move (task status,
`tasks.py`): each is called once per change, and keeps the listener alive while it `wants` to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.types import (
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from engine.drivers.base import CHANGES, require
from engine.errors import JobsError
from engine.logs import log_lost
from mcp_jobs.errors import SubscriptionLimitError
from mcp_jobs.server import followed
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState, StateHolder
from mcp_jobs.server.uri_errors import uri_refusal

logger = logging.getLogger(__name__)

PER_SESSION = 64
TOTAL = 4096
# Clock time between re-reads when no change signal came: what another process wrote without
# a NOTIFY (a claim, a nack, a cancel on PostgreSQL) is seen by then.
RECHECK_MS = 30_000
# Real time one legacy session may take to accept a notification before it is dropped, so a
# client that stopped reading cannot hold up everyone else's.
_SEND_TIMEOUT_S = 5.0
_LIST_METHODS = ("resources/list", "resources/templates/list")


class Watcher(Protocol):
    """Told on each engine change by the hub's listener."""

    def wants(self) -> bool:
        """Whether it still watches anything (the listener runs while one does)."""
        ...

    def changed(self, state: AppState) -> Awaitable[None]: ...


def _refused(exc: JobsError, holder: StateHolder, uri: str | None = None) -> MCPError:
    """A typed engine or server error as the JSON-RPC error a subscribe request answers."""
    state = holder.state
    scope = None if state is None else request_scope(state, "resources/subscribe")
    return uri_refusal(exc, "resources/subscribe", uri, scope)


class SubscriptionHub:
    """Who follows what, one listener for the process, and the fan-out."""

    def __init__(self, holder: StateHolder, bus: SubscriptionBus) -> None:
        self.per_session = PER_SESSION
        self.total = TOTAL
        self._holder = holder
        self._bus = bus
        self._sessions: dict[Connection, set[str]] = {}  # legacy: each connection's URIs
        self._listers: set[Connection] = set()  # legacy: told when the resource list changes
        self._hooked: set[Connection] = set()  # connections whose end forgets them
        self._streams: dict[object, frozenset[str]] = {}  # 2026-07-28 listen streams' URIs
        self._list_streams = 0  # listen streams that asked for resources list_changed
        self._last: dict[str, str] = {}  # the last reading of each followed URI
        self._last_list: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._watchers: list[Watcher] = []
        self.rounds = 0  # re-reads done: how a test knows the listener looked before it writes

    # --- who follows what -----------------------------------------------------------------------

    @property
    def follows(self) -> int:
        """How many (follower, URI) pairs there are: what `total` bounds."""
        return sum(map(len, self._sessions.values())) + sum(map(len, self._streams.values()))

    @property
    def listening(self) -> bool:
        """Whether the process's listener task is running."""
        return self._task is not None and not self._task.done()

    def _followed(self) -> set[str]:
        uris: set[str] = set()
        for each in (*self._sessions.values(), *self._streams.values()):
            uris |= each
        return uris

    def _anyone(self) -> bool:
        followers = self._sessions or self._streams or self._listers or self._list_streams
        return bool(followers) or any(w.wants() for w in self._watchers)

    def watch(self, watcher: Watcher) -> None:
        """Call `watcher` on each change from now on; a watcher calls this again when it has
        something new to watch, since the listener ends while no one wants it."""
        if watcher not in self._watchers:
            self._watchers.append(watcher)
        self._start()

    async def _admit(self, uris: set[str], held: int, where: str, fix: str) -> AppState:
        """Check `uris` (new to this follower, which holds `held`) against the URIs served and
        the caps, and take each one's first reading: the baseline its change is told against."""
        state = self._holder.require()
        for uri in uris:
            followed.check(uri)
        if held + len(uris) > self.per_session:
            raise SubscriptionLimitError(where, self.per_session, fix)
        if self.follows + len(uris) > self.total:
            raise SubscriptionLimitError("this server", self.total, fix)
        for uri in uris - self._followed():
            self._last[uri] = await followed.fingerprint(state, uri)  # JOB_NOT_FOUND refuses
        return state

    def _hook(self, connection: Connection) -> None:
        if connection not in self._hooked:
            self._hooked.add(connection)
            connection.exit_stack.callback(self._forget, connection)

    def _forget(self, connection: Connection) -> None:
        """The session ended: everything it followed goes with it."""
        self._hooked.discard(connection)
        self._listers.discard(connection)
        self._sessions.pop(connection, None)
        self._prune()

    def _prune(self) -> None:
        followed_now = self._followed()
        for uri in [u for u in self._last if u not in followed_now]:
            del self._last[uri]

    async def subscribe(self, connection: Connection, uri: str) -> None:
        mine = self._sessions.get(connection, set())
        if uri in mine:
            return
        fix = f'resources/unsubscribe {{"uri": "{next(iter(mine), followed.STATS)}"}}'
        await self._admit({uri}, len(mine), "this session", fix)
        self._sessions.setdefault(connection, set()).add(uri)
        self._hook(connection)
        self._start()

    def unsubscribe(self, connection: Connection, uri: str) -> None:
        mine = self._sessions.get(connection)
        if mine is not None:
            mine.discard(uri)
            if not mine:
                del self._sessions[connection]
        self._prune()

    def lists(self, connection: Connection) -> None:
        """A legacy session listed resources: tell it when the list changes."""
        if connection not in self._listers and len(self._listers) < self.total:
            self._listers.add(connection)
            self._hook(connection)
            self._start()

    async def follow_stream(self, token: object, uris: set[str], list_changed: bool) -> None:
        fix = "close another subscriptions/listen stream, or listen to fewer resource URIs"
        await self._admit(uris, 0, "one subscriptions/listen stream", fix)
        self._streams[token] = frozenset(uris)
        self._list_streams += int(list_changed)
        self._start()

    def unfollow_stream(self, token: object, list_changed: bool) -> None:
        if self._streams.pop(token, None) is not None:
            self._list_streams -= int(list_changed)
        self._prune()

    # --- the listener -------------------------------------------------------------------------

    def _start(self) -> None:
        if not self.listening:
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def stop(self) -> None:
        """End the listener (the server is stopping)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _listen(self) -> None:
        state = self._holder.state
        if state is None:
            return
        driver = state.jobs.driver
        source = require(driver, CHANGES) if CHANGES.offered_by(driver) else None
        seen = -1  # no count is -1: the first wait returns at once and reads a baseline
        while self._anyone() and self._holder.state is state:
            if source is not None:
                seen = await source.wait_for_change(seen, RECHECK_MS)
            else:
                await state.jobs.clock.sleep_ms(RECHECK_MS)
            try:
                await self.refresh(state)
            except Exception as exc:  # the listener outlives a failed reading; the next retries
                log_lost(logger, exc, "subscriptions: re-reading followed resources failed")

    async def refresh(self, state: AppState) -> None:
        """Re-read each followed URI once; tell the followers of those that moved."""
        self.rounds += 1
        moved: list[str] = []
        for uri in sorted(self._followed()):
            try:
                reading = await followed.fingerprint(state, uri)
            except JobsError as exc:
                reading = f"error:{exc.code}"  # gone (pruned) or unreadable: told once
            if self._last.get(uri) != reading:
                self._last[uri] = reading
                moved.append(uri)
        if self._listers or self._list_streams:
            listed = await followed.descriptor_list(state)
            if self._last_list is not None and listed != self._last_list:
                await self._tell_list_changed()
            self._last_list = listed
        for uri in moved:
            await self._tell_updated(uri)
        for watcher in list(self._watchers):
            if watcher.wants():
                try:
                    await watcher.changed(state)
                except Exception as exc:  # one watcher's failure costs only its round
                    log_lost(logger, exc, "subscriptions: a change watcher failed")

    async def _tell_updated(self, uri: str) -> None:
        for connection, uris in list(self._sessions.items()):
            if uri in uris:
                await self._send(connection, connection.send_resource_updated(uri))
        if any(uri in uris for uris in self._streams.values()):
            await self._bus.publish(ResourceUpdated(uri=uri))

    async def _tell_list_changed(self) -> None:
        for connection in list(self._listers):
            await self._send(connection, connection.send_resource_list_changed())
        if self._list_streams:
            await self._bus.publish(ResourcesListChanged())

    async def _send(self, connection: Connection, sending: Any) -> None:
        try:
            with anyio.fail_after(_SEND_TIMEOUT_S):
                await sending
        except Exception:  # a session that cannot take it is gone: forget it
            logger.info("subscriptions: a session stopped taking notifications; forgetting it")
            self._forget(connection)


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection:
    # The SDK hands handlers a per-request session; the connection behind it is what lives
    # as long as the client's session (and carries the exit stack that ends its follows).
    connection: Connection = ctx.session._connection
    return connection


class _FollowingListen(ListenHandler):
    """The SDK's `subscriptions/listen` handler, telling the hub what each stream follows."""

    def __init__(self, bus: SubscriptionBus, hub: SubscriptionHub, holder: StateHolder) -> None:
        super().__init__(bus)
        self._hub = hub
        self._holder = holder

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        wanted = params.notifications
        uris = {str(u) for u in wanted.resource_subscriptions or ()}
        list_changed = bool(wanted.resources_list_changed)
        token = object()
        try:
            await self._hub.follow_stream(token, uris, list_changed)
        except JobsError as exc:
            raise _refused(exc, self._holder) from exc
        try:
            return await super().__call__(ctx, params)
        finally:
            self._hub.unfollow_stream(token, list_changed)


def install(server: Server[AppState], holder: StateHolder, bus: SubscriptionBus) -> SubscriptionHub:
    """Serve subscriptions on `server` (the lowlevel server of an MCPServer built with `bus`),
    declare them, and stop the listener with the server's lifespan."""
    hub = SubscriptionHub(holder, bus)

    async def on_subscribe(
        ctx: ServerRequestContext[AppState, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        try:
            await hub.subscribe(_connection(ctx), str(params.uri))
        except JobsError as exc:
            raise _refused(exc, holder, str(params.uri)) from exc
        return EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[AppState, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        hub.unsubscribe(_connection(ctx), str(params.uri))
        return EmptyResult()

    async def remember_listers(ctx: ServerRequestContext[AppState, Any], call_next: Any) -> Any:
        if ctx.method in _LIST_METHODS and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            hub.lists(_connection(ctx))
        return await call_next(ctx)

    server.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
    server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, _FollowingListen(bus, hub, holder)
    )
    server.middleware.append(remember_listers)
    # 2025-11-25 derives `resources.listChanged` from options every transport builds with no
    # arguments; 2026-07-28 derives it (and `subscribe`) from the listen handler above.
    build_options = server.create_initialization_options

    def with_list_changed(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions(resources_changed=True)
        return build_options(options, experimental_capabilities, extensions)

    server.create_initialization_options = with_list_changed  # type: ignore[method-assign]
    holder.on_stop.append(hub.stop)
    return hub
