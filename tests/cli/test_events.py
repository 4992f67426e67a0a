"""`mcp-jobs events send NAME KEY`: the tool's envelope under --json, the waiting job woken in
the database, --payload as a JSON object (as the tool takes it), --tenant scoping the event, a
bad payload refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Worker, connect, job
from engine.errors import InvalidArgumentError
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.operations.events import checked_payload
from mcp_jobs.server import build_server
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


class Invoice(BaseModel):
    invoice_id: int


def _registry() -> JobRegistry:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: f"inv:{i.invoice_id}", registry=registry)
    async def await_approval(input: Invoice, ctx: JobContext) -> Any:
        outcome = await ctx.step.wait_for_event(
            "invoice.approved", match=str(input.invoice_id), timeout=3600
        )
        return outcome.payload

    return registry


def _park(url: str, tenants: list[str | None]) -> list[str]:
    async def go() -> list[str]:
        jobs = await connect(url, registry=_registry())
        try:
            ids = [
                (await jobs.enqueue("await_approval", {"invoice_id": 1}, tenant_id=t)).id
                for t in tenants
            ]
            await Worker(jobs).run_until_idle()
            return ids
        finally:
            await jobs.close()

    return anyio.run(go)


def _resume(url: str, ids: list[str]) -> list[tuple[str, Any]]:
    async def go() -> list[tuple[str, Any]]:
        jobs = await connect(url, registry=_registry())
        try:
            await Worker(jobs).run_until_idle()
            return [((r := await jobs.get(i)).state, r.output) for i in ids]
        finally:
            await jobs.close()

    return anyio.run(go)


def test_send_wakes_the_waiting_job_with_the_payload(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (made,) = _park(url, [None])
    db = ["--database-url", url]
    argv = ["events", "send", "invoice.approved", "1", "--payload", '{"by": "ann"}', *db]
    code, sent = run(capsys, *argv, "--json")
    assert code == 0 and sent["ok"] is True and sent["woken"] == 1
    assert _resume(url, [made]) == [("done", {"by": "ann"})]
    code, text = run(capsys, "events", "send", "invoice.approved", "1", *db)
    assert code == 0 and "woke 0 waiting jobs" in text


def test_tenant_scopes_the_event(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ours, theirs = _park(url, ["acme", "globex"])
    argv = ["events", "send", "invoice.approved", "1", "--tenant", "acme", "--database-url", url]
    code, sent = run(capsys, *argv, "--json")
    assert code == 0 and sent["woken"] == 1 and sent["tenant_id"] == "acme"
    assert _resume(url, [ours, theirs]) == [("done", None), ("suspended", None)]


def test_a_payload_that_is_not_json_is_refused(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["events", "send", "n", "k", "--payload", "{oops", "--database-url", url, "--json"]
    code, refused = run(capsys, *argv)
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("payload", ["[1]", '"s"', "7", "true", "", "hello", "order paid"])
def test_a_payload_that_is_no_json_object_is_refused_as_the_tool_refuses_it(
    payload: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI stored a list, a string or a number, which `send_event` refuses through MCP; an
    empty --payload (`--payload "$P"`, P unset) was mended to '""', a string payload."""
    argv = ["events", "send", "n", "k", "--payload", payload, "--database-url", url, "--json"]
    code, refused = run(capsys, *argv)
    error = refused["error"]
    assert code == 1 and (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False)
    assert "a JSON object" in error["cause"]
    assert command_words(error["fix"])[:4] == ["mcp-jobs", "events", "send", "--help"], error

    assert not Path(url.removeprefix("sqlite:///")).exists()  # refused before anything opens


def _send_event_schema() -> dict[str, Any]:
    async def load() -> dict[str, Any]:
        jobs = await connect("memory://")
        try:
            tools = {t.name: t for t in await build_server(Settings(), jobs).list_tools()}
            schema: dict[str, Any] = tools["send_event"].input_schema
            return schema
        finally:
            await jobs.close()

    return anyio.run(load)


def test_the_payload_rule_and_the_tools_schema_agree() -> None:
    """One rule for an event's payload (a JSON object, or none): the CLI and the operation call
    it, and the tool's schema, which refuses before it, takes exactly what it takes."""
    tool = _send_event_schema()
    assert "payload" not in tool.get("required", [])  # left out: no payload
    assert checked_payload(None) is None
    schema = Draft202012Validator(tool["properties"]["payload"])
    for payload in ({}, {"a": [1]}, [1], "s", "", 7, 1.5, True):
        try:
            checked_payload(payload)
            taken = True
        except InvalidArgumentError as refused:
            assert refused.expected == "a JSON object"
            taken = False
        assert schema.is_valid(payload) is taken, payload


def test_a_mended_name_keeps_a_key_that_starts_with_a_dash_a_positional(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`events send -1 -- --json`: the name mended to `1`, its fix wrote the key `--json` where
    the parser reads a flag, and the line lacked its KEY. It goes after `--` now."""
    db = ("--database-url", migrated(url))
    assert main(["events", "send", "-1", *db, "--", "--json"]) == 1
    assert "INVALID_ARGUMENT" in capsys.readouterr().err
    code, refused = run(capsys, "events", "send", "--json", "-1", *db, "--", "-k")
    fix = refused["error"]["fix"]
    words = command_words(fix)
    assert words[-3:] == ["--", "1", "-k"], fix
    code, sent = run(capsys, *words[1:])
    assert code == 0, sent
