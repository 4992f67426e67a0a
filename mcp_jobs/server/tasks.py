"""MCP tasks backed by durable jobs: the job row is the task store.

A task id is `<tool>:<job_id>`: the tool says which envelope `tasks/result` answers, the job says
everything else, so a task outlives the server process that created it (no task table). The SDK
types the 2025-11-25 tasks utility but serves none of it, and has no runtime for the 2026-07-28
tasks extension, so both are built here on its public seams:

- `JobTasks` (an SDK `Extension`): `tasks/get`, `tasks/cancel` (both eras), `tasks/result`,
  `tasks/list` (2025-11-25 only), and the extension's advertisement (2026-07-28).
- `TaskMiddleware` (a `Server.middleware`): a task-creating `tools/call` answers a
  `CreateTaskResult`, which the SDK's `tools/call` result check would refuse on a 2025-11-25
  wire; it also adds `capabilities.tasks` to `initialize` and `execution.taskSupport` to the three
  tools in `tools/list` (the SDK has no hook for either).

Which calls become tasks: on 2025-11-25 the client asks (`params.task`) on `run_backfill`
write=true, `wait_for_job` or `enqueue_job`; on 2026-07-28 the server decides, for a client that
declared the extension: `run_backfill` write=true and `wait_for_job` (an enqueue stays immediate;
wait on its job). Status: ready/delayed/running/suspended -> working, done -> completed,
failed/dead -> failed, cancelled -> cancelled.

`StatusWatcher` tells a 2025-11-25 session `notifications/tasks/status` when a task it created
changes status or statusMessage, until the task settles or the session ends. It rides the
subscription hub's one listener on the engine's change signal (no poll per task), and watches
at most `WATCHED_PER_SESSION` tasks per session: a task created beyond that is still served by
`tasks/get`, it only sends no notifications. 2026-07-28 has no such notification (a server
sends nothing there that a `subscriptions/listen` stream did not ask for): poll `tasks/get`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RequestParams
from pydantic import ConfigDict, Field

from engine.errors import JobNotFoundError
from engine.instants import iso
from mcp_jobs import operations
from mcp_jobs.errors import example_call
from mcp_jobs.operations.attempts import AttemptCounter
from mcp_jobs.operations.backfills import follow_backfill
from mcp_jobs.operations.envelope import error_payload, failure, success
from mcp_jobs.operations.models import EnqueueJobResult, Envelope, RunBackfillResult
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.argument_values import not_finite
from mcp_jobs.server.audit import record_call
from mcp_jobs.server.calls import tool_result
from mcp_jobs.server.oauth_grants import authorize
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState
from mcp_jobs.server.subscriptions import SubscriptionHub
from schemas.backfill import BackfillStart
from schemas.jobs import JobRecord
from schemas.states import SETTLED_STATES

EXTENSION_ID = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
RELATED_TASK_META = "io.modelcontextprotocol/related-task"
LEGACY_VERSIONS = frozenset({"2025-11-25"})
TASK_TOOLS = ("run_backfill", "wait_for_job", "enqueue_job")
# The tools a 2026-07-28 server turns into tasks on its own (the client cannot ask there).
SERVER_CHOSEN = ("run_backfill", "wait_for_job")
POLL_INTERVAL_MS = 1000
LIST_PAGE = 50
WATCHED_PER_SESSION = 256
STATUS_METHOD = "notifications/tasks/status"
# Real time one session may take to accept a status notification before its watch is dropped.
_SEND_TIMEOUT_S = 5.0

logger = logging.getLogger(__name__)

STATUS = {
    "ready": "working",
    "delayed": "working",
    "running": "working",
    "suspended": "working",
    "done": "completed",
    "failed": "failed",
    "dead": "failed",
    "cancelled": "cancelled",
}


class TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId", max_length=300)


class ListParams(RequestParams):
    cursor: str | None = Field(default=None, max_length=1000)


def task_id_for(tool: str, job_id: str) -> str:
    return f"{tool}:{job_id}"


def parse_task_id(task_id: str) -> tuple[str, str]:
    tool, _, job_id = task_id.partition(":")
    if tool not in TASK_TOOLS or not job_id:
        raise MCPError(
            INVALID_PARAMS,
            f"unknown task {task_id!r}: a task id is <tool>:<job_id> from a task-augmented "
            f"call of {', '.join(TASK_TOOLS)}",
            {"taskId": task_id},
        )
    return tool, job_id


def _state(ctx: ServerRequestContext[Any, Any]) -> AppState:
    state = ctx.lifespan_context
    assert isinstance(state, AppState)
    return state


def _scope(ctx: ServerRequestContext[Any, Any], tool: str) -> Scope:
    return request_scope(_state(ctx), tool)


async def _record(scope: Scope, task_id: str, job_id: str) -> JobRecord:
    """The job behind the task, within the pinned tenant: another tenant's job is no task."""
    try:
        return await scope.jobs.get(job_id, tenant_id=scope.tenant(None))
    except JobNotFoundError as exc:
        payload = error_payload(exc, where="tasks", context=scope.fixes)
        raise MCPError(
            INVALID_PARAMS, f"unknown task {task_id!r}: {payload.cause}", {"taskId": task_id}
        ) from None


def _task(task_id: str, record: JobRecord, message: str) -> dict[str, Any]:
    """The 2025-11-25 `Task` (wire names); a job is kept until pruned, so ttl is null."""
    return {
        "taskId": task_id,
        "status": STATUS[record.state],
        "statusMessage": message,
        "createdAt": iso(record.created_at),
        "lastUpdatedAt": iso(record.updated_at),
        "ttl": None,
        "pollInterval": POLL_INTERVAL_MS,
    }


def job_line(record: JobRecord) -> str:
    """The job's state and attempt, as wait_for_job's progress says it, and why it failed."""
    message = AttemptCounter().line(record)
    if record.last_error is not None and record.state in ("failed", "dead"):
        message += f": {record.last_error.code}: {record.last_error.cause}"
    return message


async def status_message(scope: Scope, tool: str, record: JobRecord) -> str:
    """A backfill pass says how far its ledger row got; any other task says its job's line."""
    line = job_line(record)
    if tool != "run_backfill":
        return line
    name, run_id = str(record.input.get("name")), str(record.input.get("run_id"))
    run, _ = await follow_backfill(scope, name, run_id, record.id, 0)
    if run is None:
        return f"pass not started; job {line}"
    total = "?" if run.rows_total is None else str(run.rows_total)
    return f"{run.status}: {run.rows_processed} of {total} rows processed; job {line}"


async def _described(scope: Scope, tool: str, task_id: str, record: JobRecord) -> dict[str, Any]:
    return _task(task_id, record, await status_message(scope, tool, record))


def _v2(legacy: dict[str, Any]) -> dict[str, Any]:
    """The 2026-07-28 extension's task: the same facts, `ttlMs`/`pollIntervalMs` names."""
    legacy["ttlMs"] = legacy.pop("ttl")
    legacy["pollIntervalMs"] = legacy.pop("pollInterval")
    return legacy


async def settled_envelope(scope: Scope, tool: str, record: JobRecord) -> dict[str, Any]:
    """What the bounded call of `tool` answers once the job has settled (its outputSchema)."""
    model: Envelope
    if tool == "wait_for_job":
        model = await operations.wait_for_job(scope, record.id, 0)
    elif tool == "enqueue_job":
        model = EnqueueJobResult(
            ok=True,
            job_id=record.id,
            run_id=record.run_id,
            name=record.name,
            tenant_id=record.tenant_id,
            state=record.state,
            deduped=False,
        )
    else:
        start = BackfillStart(
            name=str(record.input.get("name")),
            environment=str(record.input.get("environment")),
            job_id=record.id,
            run_id=str(record.input.get("run_id")),
            deduped=False,
        )
        run, settled = await follow_backfill(scope, start.name, start.run_id, record.id, 0)
        model = RunBackfillResult(ok=True, mode="write", start=start).followed(run, settled)
    return success(scope.fixes.qualify_all(model))


def _call_result(envelope: dict[str, Any], task_id: str) -> dict[str, Any]:
    dumped = tool_result(envelope).model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped["_meta"] = {RELATED_TASK_META: {"taskId": task_id}}
    return dumped


async def _until_settled(scope: Scope, job_id: str) -> None:
    """Block as `tasks/result` must, in bounded waits (the client may cancel the request)."""
    cap = scope.settings.limits.max_wait_seconds
    while True:
        waited = await operations.wait_for_job(scope, job_id, cap)
        if waited.settled:
            return


@dataclass
class _Watched:
    scope: Scope  # the creating request's: its tenant pin reads the job
    tool: str
    job_id: str
    told: tuple[str, str]  # the status and statusMessage the session last heard


class StatusWatcher:
    """Each 2025-11-25 session's unsettled tasks, and the status it last heard of each (a
    `subscriptions.Watcher`, called by the hub on each engine change)."""

    def __init__(self, hub: SubscriptionHub, per_session: int = WATCHED_PER_SESSION) -> None:
        self.per_session = per_session
        self._hub = hub
        self._sessions: dict[Connection, dict[str, _Watched]] = {}
        self._hooked: set[Connection] = set()  # connections whose end forgets them

    @property
    def watched(self) -> int:
        """How many tasks are watched across sessions (what a test checks goes to 0)."""
        return sum(map(len, self._sessions.values()))

    def wants(self) -> bool:
        return bool(self._sessions)

    def follow(
        self, connection: Connection, task_id: str, scope: Scope, tool: str, task: Mapping[str, Any]
    ) -> bool:
        """Watch a task the session just created; False when it is settled or over the cap."""
        if task["status"] != "working":
            return False
        mine = self._sessions.get(connection, {})
        if task_id not in mine and len(mine) >= self.per_session:
            return False
        if connection not in self._hooked:  # once per session, however often it goes idle
            self._hooked.add(connection)
            connection.exit_stack.callback(self.forget, connection)
        self._sessions[connection] = mine
        _, job_id = parse_task_id(task_id)
        mine[task_id] = _Watched(scope, tool, job_id, (task["status"], task["statusMessage"]))
        self._hub.watch(self)
        return True

    def forget(self, connection: Connection) -> None:
        """The session ended: its watches go with it."""
        self._sessions.pop(connection, None)
        self._hooked.discard(connection)

    async def changed(self, state: AppState) -> None:
        for connection, mine in list(self._sessions.items()):
            for task_id, watched in list(mine.items()):
                task = await self._reading(task_id, watched)
                if task is None or task["status"] != "working":
                    mine.pop(task_id, None)  # settled or gone: this is its last word
                if task is None or (task["status"], task["statusMessage"]) == watched.told:
                    continue
                watched.told = (task["status"], task["statusMessage"])
                if not await self._tell(connection, task):
                    break
            if not mine:
                self._sessions.pop(connection, None)

    @staticmethod
    async def _reading(task_id: str, watched: _Watched) -> dict[str, Any] | None:
        scope = watched.scope
        try:
            record = await scope.jobs.get(watched.job_id, tenant_id=scope.tenant(None))
        except JobNotFoundError:
            return None  # pruned: tasks/get says so when asked
        return await _described(scope, watched.tool, task_id, record)

    async def _tell(self, connection: Connection, task: dict[str, Any]) -> bool:
        try:
            with anyio.fail_after(_SEND_TIMEOUT_S):
                await connection.notify(STATUS_METHOD, task)
        except TimeoutError:  # a session that stopped reading cannot hold up the others
            logger.info("tasks: a session stopped taking status notifications; forgetting it")
            self._sessions.pop(connection, None)
            return False
        return True


class JobTasks(Extension):
    """The tasks methods over the jobs engine (both eras; see the module docstring)."""

    identifier = EXTENSION_ID

    def __init__(self, *, read_only: bool = False) -> None:
        # A read-only server serves no mutation, so it has no tasks/cancel.
        self.read_only = read_only

    def methods(self) -> Sequence[MethodBinding]:
        cancel = (
            () if self.read_only else (MethodBinding("tasks/cancel", TaskIdParams, self._cancel),)
        )
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get),
            *cancel,
            MethodBinding(
                "tasks/result", TaskIdParams, self._result, protocol_versions=LEGACY_VERSIONS
            ),
            MethodBinding("tasks/list", ListParams, self._list, protocol_versions=LEGACY_VERSIONS),
        )

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, TaskIdParams)
        tool, job_id = parse_task_id(params.task_id)
        scope = _scope(ctx, "tasks/get")
        record = await _record(scope, params.task_id, job_id)
        task = await _described(scope, tool, params.task_id, record)
        if ctx.protocol_version in LEGACY_VERSIONS:
            return task
        view = _v2(task)
        if view["status"] == "completed":
            envelope = await settled_envelope(scope, tool, record)
            view["result"] = _call_result(envelope, params.task_id)
        elif view["status"] == "failed":
            envelope = await settled_envelope(scope, tool, record)
            message = view["statusMessage"]
            view["error"] = {"code": INTERNAL_ERROR, "message": message, "data": envelope}
        return view

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, TaskIdParams)
        tool, job_id = parse_task_id(params.task_id)
        scope = _scope(ctx, "tasks/result")
        await _record(scope, params.task_id, job_id)
        await _until_settled(scope, job_id)
        record = await _record(scope, params.task_id, job_id)
        return _call_result(await settled_envelope(scope, tool, record), params.task_id)

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        """cancel_job's operation and audit event; a task already settled is refused."""
        assert isinstance(params, TaskIdParams)
        tool, job_id = parse_task_id(params.task_id)
        scope = _scope(ctx, "cancel_job")
        record = await _record(scope, params.task_id, job_id)
        if record.state in SETTLED_STATES:
            raise MCPError(
                INVALID_PARAMS,
                f"task {params.task_id!r} is already {STATUS[record.state]} (job {record.state})",
                {"taskId": params.task_id, "status": STATUS[record.state]},
            )
        try:
            authorize(scope.settings, "cancel_job", mutating=True)  # OAuth: jobs:write
            model = await operations.cancel_job(scope, job_id)
            envelope = success(scope.fixes.qualify_all(model))
        except Exception as exc:  # the audit records a refused cancel too, as cancel_job does
            envelope = failure(error_payload(exc, where="tasks/cancel", context=scope.fixes))
        acted = (job_id, record.tenant_id)
        await record_call(scope, "cancel_job", envelope, acted, {"job_id": job_id})
        if not envelope["ok"]:
            raise MCPError(INVALID_PARAMS, envelope["error"]["cause"], envelope["error"])
        record = await _record(scope, params.task_id, job_id)
        if ctx.protocol_version in LEGACY_VERSIONS:
            return await _described(scope, tool, params.task_id, record)
        return {}

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        """A page of jobs as `wait_for_job` tasks (every job can be waited on as one), newest
        first, within the pinned tenant."""
        assert isinstance(params, ListParams)
        scope = _scope(ctx, "tasks/list")
        try:
            page = await operations.list_jobs(scope, limit=LIST_PAGE, cursor=params.cursor)
        except Exception as exc:
            payload = error_payload(exc, where="tasks/list", context=scope.fixes)
            raise MCPError(INVALID_PARAMS, payload.cause, payload.model_dump(mode="json")) from None
        tasks = []
        for summary in page.jobs or []:
            record = await scope.jobs.get(summary.id, tenant_id=scope.tenant(None))
            tasks.append(_task(task_id_for("wait_for_job", record.id), record, job_line(record)))
        answer: dict[str, Any] = {"tasks": tasks}
        if page.next_cursor is not None:
            answer["nextCursor"] = page.next_cursor
        return answer


def _client_declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """2026-07-28: the request's own `_meta` carries the client's capabilities."""
    meta = (ctx.params or {}).get("_meta")
    declared = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, Mapping) else None
    extensions = declared.get("extensions") if isinstance(declared, Mapping) else None
    if isinstance(extensions, Mapping) and EXTENSION_ID in extensions:
        return True
    capabilities = ctx.session.client_capabilities
    return bool(
        capabilities and capabilities.extensions and EXTENSION_ID in capabilities.extensions
    )


def _job_of(tool: str, envelope: Mapping[str, Any]) -> str | None:
    if tool == "run_backfill":
        start = envelope.get("start")
        return start.get("job_id") if isinstance(start, Mapping) else None
    if tool == "wait_for_job":
        job = envelope.get("job")
        return job.get("id") if isinstance(job, Mapping) else None
    found = envelope.get("job_id")
    return found if isinstance(found, str) else None


class TaskMiddleware:
    """The wire-level half of tasks (see the module docstring)."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            return self._advertise(await call_next(ctx))
        if ctx.method == "tools/list" and ctx.protocol_version in LEGACY_VERSIONS:
            return self._mark_tools(await call_next(ctx))
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            return await self._call(ctx, ctx.params, call_next)
        return await call_next(ctx)

    def __init__(self, *, read_only: bool = False, watcher: StatusWatcher | None = None) -> None:
        self.read_only = read_only
        self.watcher = watcher

    def _advertise(self, result: HandlerResult) -> HandlerResult:
        if isinstance(result, dict) and result.get("protocolVersion") in LEGACY_VERSIONS:
            tasks: dict[str, Any] = {"list": {}, "requests": {"tools": {"call": {}}}}
            if not self.read_only:
                tasks["cancel"] = {}
            result.setdefault("capabilities", {})["tasks"] = tasks
        return result

    @staticmethod
    def _mark_tools(result: HandlerResult) -> HandlerResult:
        if isinstance(result, dict):
            for tool in result.get("tools") or []:
                if isinstance(tool, dict) and tool.get("name") in TASK_TOOLS:
                    tool["execution"] = {"taskSupport": "optional"}
        return result

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any], call_next: CallNext
    ) -> HandlerResult:
        name = params.get("name")
        arguments = params.get("arguments")
        arguments = dict(arguments) if isinstance(arguments, Mapping) else {}
        legacy = ctx.protocol_version in LEGACY_VERSIONS
        if legacy:
            if "task" not in params:
                return await call_next(ctx)
            if name not in TASK_TOOLS:
                # 2025-11-25: a tool whose taskSupport is absent is never called as a task.
                raise MCPError(
                    METHOD_NOT_FOUND,
                    f"tool {name!r} does not run as a task; these do: {', '.join(TASK_TOOLS)}",
                    {"tool": name},
                )
        elif name not in SERVER_CHOSEN or not _client_declares_tasks(ctx):
            return await call_next(ctx)
        if name == "run_backfill" and arguments.get("write") is not True:
            if not legacy:
                return await call_next(ctx)  # a dry run answers at once
            raise MCPError(
                INVALID_PARAMS,
                "run_backfill runs as a task only with write=true (a dry run answers at once)",
                {"tool": name},
            )
        # Start the work without following it: the task is how the caller follows it now.
        given = dict(arguments)
        wait = _ZERO_WAIT.get(str(name))
        # A wait that is no number (NaN) is left for the argument refusal to answer as given.
        if wait is not None and not_finite(arguments.get(wait)):
            wait = None
        if wait is not None:
            arguments[wait] = 0
        plain = {key: value for key, value in params.items() if key != "task"}
        plain["arguments"] = arguments
        answered = await call_next(replace(ctx, params=plain))
        if isinstance(answered, dict) and answered.get("resultType") == "input_required":
            # The write's confirmation round trip (2026-07-28): the retried call makes the task.
            return answered
        envelope = answered.get("structuredContent") if isinstance(answered, dict) else None
        if not isinstance(envelope, Mapping) or not envelope.get("ok"):
            # No job, so no task: the bounded call's failure, as a JSON-RPC error with it.
            error = envelope.get("error") if isinstance(envelope, Mapping) else None
            cause = error.get("cause") if isinstance(error, Mapping) else None
            retryable = isinstance(error, Mapping) and error.get("retryable") is True
            said = str(cause or json.dumps(answered)[:300])
            data = dict(envelope) if isinstance(envelope, Mapping) else None
            if data is not None and isinstance(error, Mapping) and wait is not None:
                data["error"] = _as_given(error, str(name), wait, given)
            raise MCPError(
                INTERNAL_ERROR if retryable else INVALID_PARAMS,
                said if said.startswith(f"{name}: ") else f"{name}: {said}",
                data,
            )
        job_id = _job_of(str(name), envelope)
        assert job_id is not None, f"{name} answered ok without a job"
        task_id = task_id_for(str(name), job_id)
        scope = _scope(ctx, str(name))
        task = await _described(scope, str(name), task_id, await _record(scope, task_id, job_id))
        if legacy:
            if self.watcher is not None:
                connection: Connection = ctx.session._connection  # lives as long as the session
                self.watcher.follow(connection, task_id, scope, str(name), task)
            return {"task": task}
        return {"resultType": "task", **_v2(task)}


def install(server: Any, *, read_only: bool = False) -> StatusWatcher | None:
    """Add the wire-level half to a server built with `extensions=[JobTasks(...)]`; status
    notifications ride its subscription hub (`server.subscriptions`) when it has one."""
    hub = getattr(server, "subscriptions", None)
    watcher = StatusWatcher(hub) if isinstance(hub, SubscriptionHub) else None
    server._lowlevel_server.middleware.append(TaskMiddleware(read_only=read_only, watcher=watcher))
    return watcher


# The argument a task sets to 0 so the call starts the work without following it.
_ZERO_WAIT = {"run_backfill": "wait_seconds", "wait_for_job": "timeout_seconds"}


def _as_given(error: Mapping[str, Any], tool: str, wait: str, given: Mapping[str, Any]) -> Any:
    """`error` with its fix and next_call as the caller's call, not the zero-wait call a task
    makes of it: `wait` as the caller gave it, or left out."""
    mended = dict(error)
    call = error.get("next_call")
    if (
        isinstance(call, Mapping)
        and call.get("tool") == tool
        and isinstance(call.get("arguments"), Mapping)
    ):
        mended["next_call"] = {**call, "arguments": _restored(call["arguments"], wait, given)}
    fix = error.get("fix")
    head, _, shown = fix.partition(" ") if isinstance(fix, str) else ("", "", "")
    if head == tool:
        try:
            arguments = json.loads(shown)
        except ValueError:
            return mended
        if isinstance(arguments, dict):
            mended["fix"] = f"{tool} {example_call(_restored(arguments, wait, given))}"
    return mended


def _restored(arguments: Mapping[str, Any], wait: str, given: Mapping[str, Any]) -> dict[str, Any]:
    restored = {key: value for key, value in arguments.items() if key != wait}
    if wait in given:
        restored[wait] = given[wait]
    return restored
