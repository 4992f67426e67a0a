"""The MCP server: `build_server(settings, jobs)` assembles tools, resources and prompts.

`--read-only` registers no mutating tool at all (not even a refusing one: a client that cannot
see a tool cannot be talked into calling it). Argument errors the SDK catches before a tool runs
are turned into the tool's own envelope too, so every failure of every tool has one shape.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from engine.backfill import BackfillRegistry
from engine.client import Jobs
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.errors import ToolArgumentsInvalidError, example_call
from mcp_jobs.server import prompts, resources, tools
from mcp_jobs.server.calls import tool_failure
from mcp_jobs.server.http import StaticTokenVerifier, auth_settings
from mcp_jobs.server.state import AppState, StateHolder, lifespan_for
from mcp_jobs.server.stdio import stdio_transport

INSTRUCTIONS = """\
mcp-jobs operates a durable background-jobs system. Start with describe_jobs (what can run) and \
diagnose_queue (what is wrong). Every tool answers an envelope: `ok`, the payload, and on \
failure `error` with `code`, `cause`, a one-line `fix`, and often `next_call` — a tool call you \
can issue as is. Enqueue is idempotent while a job is live (`deduped: true`). run_backfill is a \
dry run unless write=true. wait_for_job is bounded: call it again while `settled` is false."""

MUTATING_TOOLS = ("enqueue_job", "retry_job", "cancel_job", "run_backfill", "prune_history")
READ_TOOLS = (
    "describe_jobs",
    "list_jobs",
    "inspect_job",
    "queue_stats",
    "diagnose_queue",
    "wait_for_job",
    "list_backfills",
)


def _version() -> str:
    try:
        return importlib.metadata.version("mcp-jobs")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _placeholder(schema: dict[str, Any], name: str) -> Any:
    kinds = {s.get("type") for s in schema.get("anyOf", [schema])}
    if "object" in kinds:
        return {}
    if "boolean" in kinds:
        return True
    if kinds & {"integer", "number"}:
        return 0
    return f"<{name}>"


def example_arguments(input_schema: dict[str, Any]) -> str:
    """A call with every required argument filled by a placeholder of its type."""
    props: dict[str, Any] = input_schema.get("properties", {})
    required = input_schema.get("required", [])
    return example_call({n: _placeholder(props.get(n, {}), n) for n in required})


class JobsServer(MCPServer[AppState]):
    """MCPServer whose tools fail with their envelope even when the SDK rejects the arguments,
    refuse arguments they do not declare, and read stdio through `server.stdio`."""

    max_request_bytes: int = ServerLimits().max_request_bytes
    _declared: dict[str, frozenset[str]] | None = None

    async def list_tools(self) -> list[MCPTool]:
        # Published as refused, since they are: a misspelt `include_cancelled` must not be
        # silently dropped from a retry.
        return [
            tool.model_copy(
                update={"input_schema": {**tool.input_schema, "additionalProperties": False}}
            )
            for tool in await super().list_tools()
        ]

    async def _unknown_arguments(self, name: str, arguments: dict[str, Any]) -> list[str]:
        if self._declared is None:
            self._declared = {
                t.name: frozenset(t.input_schema.get("properties", {}))
                for t in await super().list_tools()
            }
        declared = self._declared.get(name)
        return [] if declared is None else [a for a in arguments if a not in declared]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[AppState, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        unknown = await self._unknown_arguments(name, arguments)
        if unknown:
            extra: list[dict[str, Any]] = [
                {"loc": [a], "msg": "unknown argument", "type": "extra_forbidden"} for a in unknown
            ]
            refused = ToolArgumentsInvalidError(name, extra, await self._example(name))
            return tool_failure(refused, where=f"tool {name}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(
                exc.__cause__, ValidationError
            ):
                raise
            tool = next((t for t in await self.list_tools() if t.name == name), None)
            if tool is None or tool.output_schema is None:
                raise
            errors = [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.__cause__.errors(include_url=False, include_input=False)
            ]
            error = ToolArgumentsInvalidError(name, errors, example_arguments(tool.input_schema))
            return tool_failure(error, where=f"tool {name}")

    async def _example(self, name: str) -> str:
        tool = next(t for t in await self.list_tools() if t.name == name)
        return example_arguments(tool.input_schema)

    async def run_stdio_async(self) -> None:
        """Serve stdio through our reader: a malformed or oversized line gets a JSON-RPC error
        reply (as over HTTP) instead of silence, and the session goes on."""
        async with stdio_transport(max_request_bytes=self.max_request_bytes) as (read, write):
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
    check (`settings.token`). `backfills` defaults to the process-wide declarations."""
    holder = StateHolder()
    auth: dict[str, Any] = {}
    if http and settings.token:
        auth = {
            "token_verifier": StaticTokenVerifier(settings.token),
            "auth": auth_settings(settings.host, settings.port),
        }
    server = JobsServer(
        name="mcp-jobs",
        title="mcp-jobs",
        version=_version(),
        instructions=INSTRUCTIONS,
        lifespan=lifespan_for(settings, jobs, holder, backfills),
        log_level="WARNING",
        **auth,
    )
    server.max_request_bytes = settings.limits.max_request_bytes
    tools.read.register(server)
    if not settings.read_only:
        tools.write.register(server)
    resources.register(server, holder)
    prompts.register(server, read_only=settings.read_only)
    return server
