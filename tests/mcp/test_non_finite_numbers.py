"""NaN, Infinity and -Infinity, which a raw JSON-RPC client can send as JSON text (Python's json
reads them as numbers), in any numeric argument of any tool: refused as no number at all
(TOOL_ARGUMENTS_INVALID naming the value, non-retryable), the fix a "<name>" slot and no
next_call. They were mended to the range's end: `delay_seconds: NaN` offered the call that
parks the job for ten years, and `timeout_seconds: NaN` was LIMIT_EXCEEDED, "nan seconds".
The SDK's client turns NaN into null, so these calls are sent raw."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

from engine import Jobs
from engine.backfill import BackfillRegistry
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import INITIALIZE, Caller
from tests.mcp.test_stdio_malformed import Wire
from tests.mcp.test_tasks import raw

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="argument checks, not storage")

NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
JOB_ID = "0" * 32
# Each tool's call but for the number: valid otherwise, so only the number is refused.
CALLS: dict[str, dict[str, Any]] = {
    "describe_jobs": {},
    "list_jobs": {},
    "inspect_job": {"job_id": JOB_ID},
    "queue_stats": {},
    "wait_for_job": {"job_id": JOB_ID},
    "list_backfills": {},
    "enqueue_job": {"name": "greet", "input": {"user_id": 1}},
    "run_backfill": {"name": "normalize_emails", "write": True},
    "prune_history": {},
    "retry_jobs": {},
    "cancel_jobs": {},
}


def _strict_json(text: str) -> Any:
    """`text` read as JSON proper, where NaN and Infinity are no numbers."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} in {text}")

    return json.loads(text, parse_constant=refuse)


async def _answer(mcp: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's envelope for a call sent as given (NaN stays NaN), checked against its
    outputSchema and as JSON proper, as a strict client reads it."""
    result = await raw(mcp.client, "tools/call", {"name": tool, "arguments": arguments})
    envelope: dict[str, Any] = result["structuredContent"]
    assert not list(Draft202012Validator(mcp.schemas[tool]).iter_errors(envelope)), envelope
    assert _strict_json(json.dumps(envelope)) == envelope
    assert result["isError"] is True and envelope["ok"] is False, envelope
    error: dict[str, Any] = envelope["error"]
    return error


def _numeric(schema: dict[str, Any]) -> list[str]:
    return [
        name
        for name, prop in schema.get("properties", {}).items()
        if any(v.get("type") in ("integer", "number") for v in prop.get("anyOf", [prop]))
    ]


@pytest.mark.parametrize("spelt", list(NON_FINITE))
async def test_a_non_finite_number_is_refused_with_a_slot_in_every_numeric_argument(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
    spelt: str,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        listed = {t.name: t.input_schema for t in (await mcp.client.list_tools()).tools}
        numeric = {tool: _numeric(schema) for tool, schema in listed.items()}
        # Every tool with a number is called here: one added later is checked too.
        assert {t for t, names in numeric.items() if names} <= set(CALLS), numeric
        checked = 0
        for tool, names in numeric.items():
            for name in names:
                given = {**CALLS[tool], name: NON_FINITE[spelt]}
                error = await _answer(mcp, tool, given)
                said = f"{tool} {name}={spelt}: {error}"
                assert error["code"] == "TOOL_ARGUMENTS_INVALID", said
                assert error["retryable"] is False, said
                assert f"argument {name}: {spelt} is not a finite number" in error["cause"], said
                assert error["fix"] == f"{tool} {json.dumps({**given, name: f'<{name}>'})}", said
                assert error.get("next_call") is None, said
                (entry,) = error["details"]["errors"]
                assert entry["loc"] == [name] and entry["type"] == "finite_number", said
                checked += 1
        assert checked >= 14, numeric
        # A list of one stands for its item, which is no number either.
        error = await _answer(
            mcp, "enqueue_job", {**CALLS["enqueue_job"], "delay_seconds": [NON_FINITE[spelt]]}
        )
        assert error["fix"].endswith('"delay_seconds": "<delay_seconds>"}'), error
        assert error.get("next_call") is None, error
    assert (await jobs.list()).jobs == []


async def test_a_server_cap_is_not_said_over_by_nan(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    """`timeout_seconds: NaN` was LIMIT_EXCEEDED "nan seconds; at most 50", its next_call at
    the cap; a number over the cap still is, mended to it."""
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        for tool, wait in (("wait_for_job", "timeout_seconds"), ("run_backfill", "wait_seconds")):
            error = await _answer(mcp, tool, {**CALLS[tool], wait: math.nan})
            assert error["code"] == "TOOL_ARGUMENTS_INVALID", error
            assert "nan" not in error["cause"] and "NaN is not a finite" in error["cause"]
            over = await _answer(mcp, tool, {**CALLS[tool], wait: 99})
            assert over["code"] == "LIMIT_EXCEEDED", over
            assert over["next_call"]["arguments"][wait] == 50, over


async def test_a_bad_number_beside_an_unknown_name_offers_no_call_refused_again(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    """run_backfill {"name": "x", "write": true, "wait_seconds": NaN} offered the call at the
    cap, "x" and all: refused again. enqueue_job's name is checked first (JOB_UNKNOWN), and its
    fix carried NaN (no JSON) and a number over its range as given."""
    customers.declare(backfill_registry, batch_size=10)
    async with open_mcp() as mcp:
        given = {"name": "x", "write": True, "wait_seconds": math.nan}
        error = await _answer(mcp, "run_backfill", given)
        assert error["code"] == "TOOL_ARGUMENTS_INVALID" and error.get("next_call") is None
        for wait, shown in ((math.nan, '"<delay_seconds>"'), (1e12, "315360000")):
            given = {"name": "gret", "input": {"user_id": 1}, "delay_seconds": wait}
            error = await _answer(mcp, "enqueue_job", given)
            assert error["code"] == "JOB_UNKNOWN" and error.get("next_call") is None, error
            assert "; and " in error["cause"] and "delay_seconds" in error["cause"], error
            mended = f'"name": "greet", "input": {{"user_id": 1}}, "delay_seconds": {shown}}}'
            assert error["fix"] == f"enqueue_job {{{mended}", error
        # A slip of the keys in a write's name: the fix is the dry run of the name meant (a
        # guess is never written), which takes no wait: a dry run starts no pass to follow.
        given = {"name": "normalize_emailz", "write": True, "wait_seconds": 5}
        slip = await _answer(mcp, "run_backfill", given)
        assert slip["code"] == "BACKFILL_UNKNOWN" and slip.get("next_call") is None, slip
        assert slip["fix"] == 'run_backfill {"name": "normalize_emails"}', slip
        assert (await mcp.ok("run_backfill", {"name": "normalize_emails"}))["mode"] == "dry_run"
    assert (await jobs.list()).jobs == []


@pytest.mark.slow
async def test_json_text_nan_over_stdio_gets_a_slot_and_strict_json(tmp_path: Path) -> None:
    """The wire as the user pass spoke it: `NaN` and `-Infinity` as JSON text on stdio."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    env = {**os.environ, "MCP_JOBS_DATABASE_URL": url, "SHOP_DB": str(tmp_path / "shop.db")}
    price = {"supplier": "leafco", "batch": "b1"}
    calls = [
        ("enqueue_job", '"name": "import_supplier_prices", "input": %s, "delay_seconds": NaN'),
        ("list_jobs", '"limit": -Infinity'),
    ]
    with anyio.fail_after(50):
        async with await anyio.open_process(argv, env=env, cwd=tmp_path) as process:
            wire = Wire(process)
            await wire.send(INITIALIZE)
            assert "result" in await wire.reply()
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            for i, (tool, arguments) in enumerate(calls):
                text = "{" + (arguments % json.dumps(price) if "%s" in arguments else arguments)
                line = (
                    f'{{"jsonrpc": "2.0", "id": {10 + i}, "method": "tools/call", '
                    f'"params": {{"name": "{tool}", "arguments": {text}}}}}}}'
                )
                await wire.send(line.encode())
                with anyio.fail_after(20):
                    raw_reply = await wire.stdout.receive_until(b"\n", 1 << 20)
                reply = _strict_json(raw_reply.decode())
                error = reply["result"]["structuredContent"]["error"]
                assert error["code"] == "TOOL_ARGUMENTS_INVALID", error
                assert "is not a finite number" in error["cause"], error
                assert '"<' in error["fix"] and "next_call" not in error, error
            await wire.stdin.aclose()
            assert await process.wait() == 0
