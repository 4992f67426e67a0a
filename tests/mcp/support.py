"""The MCP test app and a client that checks every answer against the tool's published schema.

`Caller.call` validates EVERY structured result — success and failure — against the tool's own
`outputSchema` with a JSON Schema validator, checks `is_error` agrees with `ok`, and that the text
content carries the same JSON. A strict client (MCP Inspector, the TypeScript SDK) rejects
anything else.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, field
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.types import ElicitResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from engine import Clock, JobContext, JobRegistry, Jobs, Retry, Worker, job
from engine.backfill import BackfillRegistry
from engine.drivers.sqlite.library import sqlite3
from engine.testing.kit.test_descriptors import declare as declare_charge
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.audit import AUDIT_EVENT

# The first JSON-RPC message of a session, for tests that speak the wire themselves.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}

# Keys a test "heals": the flaky job fails until its key is in here.
HEALED: set[str] = set()
# Checking a schema against the metaschema is slow; each distinct schema is checked once.
_CHECKED: set[str] = set()


def check_schema(schema: dict[str, Any]) -> None:
    key = json.dumps(schema, sort_keys=True)
    if key not in _CHECKED:
        Draft202012Validator.check_schema(schema)
        _CHECKED.add(key)


class Greet(BaseModel):
    user_id: int = Field(ge=1)
    note: str = ""


class Order(BaseModel):
    order_id: int


class Flaky(BaseModel):
    key: str


class Receipt(BaseModel):
    order_id: int


class Opaque:
    """A type pydantic can validate (arbitrary types allowed) but not describe as JSON Schema."""


class Weird(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque | None = None


def declare_app(registry: JobRegistry) -> None:
    """The jobs the MCP tests enqueue: plain, multi-step with a sleep, flaky, per tenant."""

    @job(idempotency_key=lambda i: f"greet:{i.user_id}", queue="mail", registry=registry)
    async def greet(input: Greet, ctx: JobContext) -> dict[str, Any]:
        """Say hello to a user."""
        return {"greeted": input.user_id}

    @job(
        idempotency_key=lambda i: f"order:{i.order_id}",
        queue="orders",
        retry=Retry(attempts=3, base_delay=1),
        registry=registry,
    )
    async def fulfil(input: Order, ctx: JobContext) -> dict[str, Any]:
        """Reserve, sleep, ship."""
        reserved = await ctx.step.run("reserve", lambda: {"order": input.order_id})
        await ctx.step.sleep("settle", 10)
        shipped = await ctx.step.run("ship", lambda: f"TRK{input.order_id}")
        return {"reserved": reserved, "tracking": shipped}

    @job(
        idempotency_key=lambda i: f"flaky:{i.key}",
        queue="catalog",
        retry=Retry(attempts=2, backoff="fixed", base_delay=1),
        registry=registry,
    )
    async def flaky(input: Flaky, ctx: JobContext) -> str:
        """Fails until the test heals its key."""
        if input.key not in HEALED:
            raise RuntimeError(f"upstream down for {input.key}")
        return "ok"

    @job(
        idempotency_key=lambda i: f"receipt:{i.order_id}",
        queue="mail",
        tenant_required=True,
        priority=2,
        registry=registry,
    )
    async def receipt(input: Receipt, ctx: JobContext) -> str | None:
        """Send a tenant's receipt."""
        return ctx.tenant_id


def declare_weird(registry: JobRegistry) -> None:
    """A job whose input model cannot be described: describing it crashes (a bug in the app)."""

    @job(idempotency_key=lambda i: "weird", registry=registry)
    async def weird(input: Weird, ctx: JobContext) -> None:
        return None


@dataclass
class Answer:
    is_error: bool
    data: dict[str, Any]

    @property
    def code(self) -> str | None:
        error = self.data.get("error")
        return error["code"] if error else None


@dataclass
class Person:
    """The person behind the client, asked to confirm writes (elicitation): answers `action`
    ("accept", "decline", "cancel", or "no": accept with confirm false) and keeps each question."""

    action: str = "accept"
    asked: list[str] = field(default_factory=list)

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        if self.action in ("accept", "no"):
            return ElicitResult(action="accept", content={"confirm": self.action == "accept"})
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


@dataclass
class Caller:
    client: Client
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    person: Person | None = None

    async def load(self) -> None:
        for tool in (await self.client.list_tools()).tools:
            assert tool.output_schema is not None, tool.name
            check_schema(tool.output_schema)
            self.schemas[tool.name] = tool.output_schema

    async def call(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Answer:
        result = await self.client.call_tool(tool, arguments or {}, **kw)
        data = result.structured_content
        assert data is not None, f"{tool} answered without structured content"
        errors = sorted(
            Draft202012Validator(self.schemas[tool]).iter_errors(data), key=lambda e: e.path
        )
        assert not errors, f"{tool}: result does not match its outputSchema: {errors[0].message}"
        assert result.is_error == (not data["ok"]), f"{tool}: is_error disagrees with ok"
        assert (data.get("error") is not None) == (not data["ok"])
        (text,) = result.content
        assert isinstance(text, TextContent) and json.loads(text.text) == data
        return Answer(is_error=bool(result.is_error), data=data)

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
        answer = await self.call(tool, arguments, **kw)
        assert not answer.is_error, f"{tool} failed: {answer.data['error']}"
        return answer.data

    async def fails(self, tool: str, arguments: dict[str, Any] | None, code: str) -> Any:
        answer = await self.call(tool, arguments)
        assert answer.is_error and answer.code == code, answer.data
        return answer.data["error"]


@asynccontextmanager
async def serve(
    jobs: Jobs,
    mode: str,
    settings: Settings | None = None,
    backfills: BackfillRegistry | None = None,
    *,
    person: Person | None = None,
    elicitation: bool = True,
) -> AsyncIterator[Caller]:
    """A client whose person accepts every write (a `Person`), unless `person` answers
    otherwise; with `elicitation=False` the client cannot be asked (two-step confirm tokens)."""
    server = build_server(settings or Settings(), jobs, backfills=backfills)
    if elicitation and person is None:
        person = Person()
    callback = person if elicitation else None
    async with Client(server, mode=mode, elicitation_callback=callback) as client:
        caller = Caller(client, person=person if elicitation else None)
        await caller.load()
        yield caller


def audit_log(jobs: Jobs, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The data of every audit event `jobs` records from now on (each is still written)."""
    audited: list[dict[str, Any]] = []
    record = jobs.record_event

    async def spy(kind: str, **fields: Any) -> None:
        if kind == AUDIT_EVENT:
            audited.append(fields["data"])
        await record(kind, **fields)

    monkeypatch.setattr(jobs, "record_event", spy)
    return audited


async def stored_rows(jobs: Jobs, table: str) -> list[tuple[Any, ...]]:
    """Every stored row of `table` ("jobs", "steps" or "events") as plain values in a stable
    order, read past the engine: what a test compares before and after to prove nothing moved."""
    driver: Any = jobs.driver
    if driver.kind == "memory":
        held: list[Any] = {
            "jobs": list(driver._jobs.values()),
            "steps": [s for run in driver._steps.values() for s in run.values()],
            "events": list(driver._events.values()),
        }[table]
        return [tuple(m.model_dump(mode="json").values()) for m in held]
    if driver.kind == "sqlite":
        with closing(sqlite3.connect(f"file:{driver.path}?mode=ro", uri=True)) as db:
            return [tuple(r) for r in db.execute(f"SELECT * FROM mcp_jobs_{table} ORDER BY 1, 2")]
    import asyncpg

    conn = await asyncpg.connect(driver.url)
    try:
        rows = await conn.fetch(f"SELECT * FROM {driver.schema}.{table} ORDER BY 1, 2")
    finally:
        await conn.close()
    return [tuple(r.values()) for r in rows]


async def publish_charge(jobs: Jobs, clock: Clock) -> Worker:
    """A worker of the shop app (the kit's `charge`, a job whose key the caller must pass)
    publishes its descriptors to `jobs`' database, which this process's server knows no app of."""
    app = JobRegistry()
    declare_charge(app)
    worker = Worker(Jobs(jobs.driver, registry=app, clock=clock), apps=["shop.jobs"])
    await worker.publish_descriptors()
    return worker
