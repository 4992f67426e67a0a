"""The MCP server: `build_server(settings, jobs)` assembles tools, resources and prompts.

`--read-only` registers no mutating tool at all (not even a refusing one: a client that cannot
see a tool cannot be talked into calling it). Argument errors the SDK catches before a tool runs
are turned into the tool's own envelope too, so every failure of every tool has one shape.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from typing import Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from engine import bounds
from engine.backfill import BackfillRegistry
from engine.bounds import MAX_NAME_BYTES
from engine.client import Jobs
from engine.errors import ECHO_LIMIT, InvalidArgumentError, JobsError, short_repr
from engine.meant import meant_as, meant_note
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.server import prompts, resources, subscriptions, tasks, tools
from mcp_jobs.server.apps_ui import apps_extension
from mcp_jobs.server.arguments import make_strict
from mcp_jobs.server.calls import declined_before_run, tool_failure
from mcp_jobs.server.completions import register as register_completions
from mcp_jobs.server.confirm_answer import asking
from mcp_jobs.server.cursor_first import cursor_first
from mcp_jobs.server.derived_arguments import derived_arguments
from mcp_jobs.server.engine_refusal import calling
from mcp_jobs.server.http import http_auth
from mcp_jobs.server.name_first import name_first
from mcp_jobs.server.oauth_grants import callable_tools
from mcp_jobs.server.request_params import named_params
from mcp_jobs.server.schemas import published
from mcp_jobs.server.served import MUTATING_TOOLS
from mcp_jobs.server.state import AppState, StateHolder, lifespan_for
from mcp_jobs.server.stdio import stdio_transport
from mcp_jobs.server.strict_refusal import refusal

INSTRUCTIONS = """\
mcp-jobs operates a durable background-jobs system. Start with describe_jobs (what can run) and \
diagnose_queue (what is wrong). Every tool answers an envelope: `ok`, the payload, and on \
failure `error` with `code`, `cause`, a one-line `fix`, and often `next_call` — a tool call you \
can issue as is. Every time is epoch ms with an ISO 8601 UTC twin (`created_at_iso`). Enqueue \
is idempotent while a job is live (`deduped: true`). run_backfill is a dry run unless \
write=true. wait_for_job is bounded: call it again while `settled` is false."""


def _version() -> str:
    try:
        return importlib.metadata.version("mcp-jobs")
    except importlib.metadata.PackageNotFoundError:
        return "0"


class JobsServer(MCPServer[AppState]):
    """MCPServer whose tools fail with their envelope even when the SDK rejects the arguments,
    refuse arguments they do not declare, and read stdio through `server.stdio`."""

    max_request_bytes: int = ServerLimits().max_request_bytes
    answer_after_eof_seconds: float = ServerLimits().answer_after_eof_seconds
    subscriptions: subscriptions.SubscriptionHub | None = None
    _listed: tuple[tuple[str, ...], list[MCPTool]] | None = None

    async def list_tools(self) -> list[MCPTool]:
        # Compacted once (`server.schemas`): the tools are all registered before a client lists.
        tools = await super().list_tools()
        names = tuple(t.name for t in tools)
        if self._listed is None or self._listed[0] != names:
            self._listed = (names, [published(t) for t in tools])
        return callable_tools(list(self._listed[1]))  # what this request's OAuth token may call

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[AppState, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            raise self._unknown_tool(name)
        # As the strict model reads them (5.0 for an integer is 5), for the fixes of a refusal.
        read = tool.fn_metadata.pre_parse_json(arguments)
        try:
            with calling(tool, read), asking() as question:
                return await super().call_tool(name, arguments, context)
        except (ToolError, MCPError) as exc:
            declined = question.declined(exc)  # the answer to its confirm question is no yes/no
            if declined is not None:
                return await declined_before_run(context, name, declined, read)
            if (
                not isinstance(exc, ToolError)
                or isinstance(exc, UnexpectedToolError)
                or not isinstance(exc.__cause__, ValidationError)
            ):
                raise
            # The strict model (`server.arguments`) refused them, before the tool ran.
            derived = derived_arguments(name, read, context)  # what only the server knows
            refused = refusal(tool, read, exc.__cause__, derived)
            refused = await cursor_first(await name_first(refused, tool, read, context), context)
            return tool_failure(refused, name, context)

    def _unknown_tool(self, name: str) -> MCPError:
        known = sorted(t.name for t in self._tool_manager.list_tools())
        hint, meant = ("", {}) if name in MUTATING_TOOLS else meant_note(name, known)
        why = (
            "it changes state and this server is read-only"
            if name in MUTATING_TOOLS
            else f"no tool has that name{hint}"
        )
        listed = ", ".join(known)
        message = f"unknown tool {short_repr(name)}: {why}; this server's tools: {listed}"
        return MCPError(INVALID_PARAMS, message, {"tool": name[:ECHO_LIMIT], **meant})

    async def read_resource(
        self, uri: Any, context: Context[AppState, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """A URI no resource or template matches is refused naming the ones there are, and
        echoed cut (the SDK echoed it whole, twice: a 1 MB URI answered 2 MB)."""
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            if isinstance(exc.__cause__, JobsError):  # a template's: no such job (resources.py)
                raise
            asked = str(uri)
            known = [str(r.uri) for r in await self.list_resources()]
            known += [t.uri_template for t in await self.list_resource_templates()]
            message = f"unknown resource {short_repr(asked)}; this server's: {', '.join(known)}"
            raise MCPError(INVALID_PARAMS, message, {"uri": asked[:ECHO_LIMIT]}) from None

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[AppState, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        """An unknown prompt, a missing required argument or an undeclared one is a JSON-RPC
        invalid-params error saying which (the SDK answered code 0 and logged a traceback)."""
        prompts_by_name = {p.name: p for p in await self.list_prompts()}
        prompt = prompts_by_name.get(name)
        if prompt is None:
            known = sorted(prompts_by_name)
            listed = ", ".join(known)
            hint, meant = meant_note(name, known)
            message = f"unknown prompt {short_repr(name)}{hint}; this server's prompts: {listed}"
            data = {"prompt": name[:ECHO_LIMIT], "known": known, **meant}
            raise MCPError(INVALID_PARAMS, message, data)
        declared = {a.name: a.required for a in prompt.arguments or []}
        given = set(arguments or {})
        missing = sorted(a for a, required in declared.items() if required and a not in given)
        unknown = sorted(given - set(declared))
        if missing or unknown:
            takes = ", ".join(f"{a} (required)" if r else a for a, r in declared.items())
            said = [f"missing required argument(s): {', '.join(missing)}"] if missing else []
            if unknown:
                said.append(f"unknown argument(s): {', '.join(map(short_repr, unknown))}")
                meant_pairs = [(meant_as(a, declared, given=given), a) for a in unknown]
                hints = [f"{m} for {short_repr(a)}" for m, a in meant_pairs if m is not None]
                if hints:
                    said[-1] += f" (meant {', '.join(hints)}?)"
            message = f"prompt {name}: {'; '.join(said)}; it takes: {takes or 'no arguments'}"
            data = {
                "prompt": name,
                "missing": missing,
                "unknown": [a[:ECHO_LIMIT] for a in unknown],
            }
            raise MCPError(INVALID_PARAMS, message, data)
        for argument, value in (arguments or {}).items():
            # Each is a queue's or a backfill's name, written into the prompt: a megabyte there
            # was a prompt of megabytes. An optional one left blank in a client's form is "".
            if value == "" and not declared[argument]:
                continue
            try:
                bounds.text(argument, value, MAX_NAME_BYTES)
            except InvalidArgumentError as exc:
                message = f"prompt {name}: {exc.cause}"
                data = {"prompt": name, "argument": argument}
                raise MCPError(INVALID_PARAMS, message, data) from None
        return await super().get_prompt(name, arguments, context)

    async def run_stdio_async(self) -> None:
        """Serve stdio through our reader: a malformed or oversized line gets a JSON-RPC error
        reply (as over HTTP) instead of silence, and the session goes on."""
        async with stdio_transport(
            max_request_bytes=self.max_request_bytes, answer_seconds=self.answer_after_eof_seconds
        ) as (read, write):
            await self._lowlevel_server.run(
                read, write, self._lowlevel_server.create_initialization_options()
            )


def build_server(
    settings: Settings,
    jobs: Jobs | None = None,
    *,
    http: bool = False,
    backfills: BackfillRegistry | None = None,
) -> JobsServer:
    """The server for `settings`. `jobs` is borrowed when given (tests, the CLI); otherwise the
    server connects to `settings.url` for its lifetime. `http=True` installs the bearer-token
    check (`settings.token`, or OAuth access tokens with `settings.oauth`). `backfills`
    defaults to the process-wide declarations."""
    holder = StateHolder()
    auth: dict[str, Any] = http_auth(settings) if http else {}
    server = JobsServer(
        name="mcp-jobs",
        title="mcp-jobs",
        version=_version(),
        instructions=INSTRUCTIONS,
        lifespan=lifespan_for(settings, jobs, holder, backfills),
        log_level="WARNING",
        extensions=[tasks.JobTasks(read_only=settings.read_only), apps_extension()],
        subscriptions=(bus := InMemorySubscriptionBus()),
        **auth,
    )
    server.max_request_bytes = settings.limits.max_request_bytes
    server.answer_after_eof_seconds = settings.limits.answer_after_eof_seconds
    tools.read.register(server, settings.limits)
    if not settings.read_only:
        tools.write.register(server, settings.limits)
        tools.events.register(server)
    make_strict(server._tool_manager.list_tools())
    resources.register(server, holder)
    server.subscriptions = subscriptions.install(server._lowlevel_server, holder, bus)
    prompts.register(server, read_only=settings.read_only)
    tasks.install(server, read_only=settings.read_only)
    register_completions(server, holder)
    server._lowlevel_server.middleware.append(named_params)
    return server
