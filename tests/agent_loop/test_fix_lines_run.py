"""Every fix a session is handed runs as given (issue #22, items 1 and 2).

A demo-like session drives a real `mcp-jobs serve` over stdio (cwd: the repo root, the shop's
data in `SHOP_DB`) the way an agent does — with no worker first, then with one — and the CLI
commands that fail. Every `fix` and `next_call` in every answer (errors, findings, notices, a
job's last error) is collected, and each is then run the way its reader would: a command with
`bash -c` from ANOTHER directory with nothing of the session's environment but PATH and HOME,
a tool call through the client. Each must succeed, or — a worker line — move the state it
names: the worker is started in the background, must show up as live in the server's database
and settle its queue, and is then stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MCP_JOBS = str(BIN / "mcp-jobs")
APP = "examples.shop"
TOOL_CALL = re.compile(r"(?P<tool>[a-z_]+) (?P<args>\{.*\})", re.DOTALL)
# A bound on each wait: one command, one worker settling its queue.
COMMAND_SECONDS = 30
SETTLE_SECONDS = 45


def minimal_env() -> dict[str, str]:
    """What a fresh shell has: PATH (with the venv) and HOME, nothing of the session."""
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}


class Collected:
    """Every fix line and next call seen, in order, each once."""

    def __init__(self, tools: set[str]) -> None:
        self.tools = tools
        self.lines: list[str] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.done: set[str] = set()
        self.origin: dict[str, str] = {}  # fix line -> the answer it came from

    def take(self, value: Any, where: str = "") -> None:
        if isinstance(value, dict):
            fix = value.get("fix")
            if isinstance(fix, str):
                self._fix(fix)
                self.origin.setdefault(fix, where)
            call = value.get("next_call")
            if isinstance(call, dict) and "tool" in call:
                self._call(call["tool"], call.get("arguments") or {})
            for key, item in value.items():
                if key not in ("input", "output"):  # a job's own data, not the system's words
                    self.take(item, where)
        elif isinstance(value, list):
            for item in value:
                self.take(item, where)

    def _fix(self, fix: str) -> None:
        match = TOOL_CALL.fullmatch(fix)
        if match is not None and match["tool"] in self.tools:
            self._call(match["tool"], json.loads(match["args"]))
        elif fix not in self.lines:
            self.lines.append(fix)

    def _call(self, tool: str, arguments: dict[str, Any]) -> None:
        if (tool, arguments) not in self.calls:
            self.calls.append((tool, arguments))


class Session:
    def __init__(self, client: Client, seen: Collected) -> None:
        self.client = client
        self.seen = seen
        self.progress: list[str] = []

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message:
                self.progress.append(message)

        with anyio.fail_after(COMMAND_SECONDS + 60):
            result = await self.client.call_tool(
                tool, arguments or {}, progress_callback=on_progress
            )
        envelope: dict[str, Any] = result.structured_content or {}
        self.seen.take(envelope, f"{tool} {json.dumps(arguments or {})}")
        return envelope

    async def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        envelope = await self.call(tool, arguments)
        assert envelope.get("ok") is True, (tool, arguments, envelope)
        return envelope

    async def fails(self, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        envelope = await self.call(tool, arguments)
        assert envelope.get("ok") is False and envelope["error"]["code"] == code, envelope
        error: dict[str, Any] = envelope["error"]
        return error

    async def busy(self, queue: str | None) -> int:
        """Jobs of `queue` (every queue: None) a worker still has to act on."""
        stats = await self.ok("queue_stats", {"queues": [queue]} if queue else {})
        return sum(
            q["ready"] + q["running"] + q["delayed"] + q["due_suspended"] + q["expired_leases"]
            for q in stats["queues"]
        )

    async def wait_on_one(self, queue: str | None) -> None:
        """Wait (bounded, in the server) on one live job of `queue`: the worker is moving it."""
        live = ["ready", "delayed", "running", "suspended"]
        page = await self.ok(
            "list_jobs", {"state": live, "limit": 1, **({"queue": queue} if queue else {})}
        )
        if page["jobs"]:
            await self.ok("wait_for_job", {"job_id": page["jobs"][0]["id"], "timeout_seconds": 1})


def notice_codes(envelope: dict[str, Any]) -> list[str]:
    return [n["code"] for n in envelope.get("notices") or []]


async def run_line(line: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(COMMAND_SECONDS):
        return await anyio.run_process(
            ["bash", "-c", line], cwd=cwd, env=minimal_env(), check=False
        )


@contextmanager
def started(line: str, cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`line` in the background, in its own process group, stopped (SIGTERM) on the way out."""
    proc = subprocess.Popen(
        ["bash", "-c", line],
        cwd=cwd,
        env=minimal_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        if proc.stderr is not None:
            proc.stderr.close()


async def run_worker_line(session: Session, line: str, cwd: Path) -> None:
    """Start the worker `line` names; it must check in to THIS database and settle its queue."""
    match = re.search(r"--queues (\S+)", line)
    queue = match.group(1) if match else None
    with started(line, cwd) as proc:
        with anyio.fail_after(SETTLE_SECONDS):
            while True:
                assert proc.poll() is None, f"{line!r} exited: {proc.stderr.read().decode()}"  # type: ignore[union-attr]
                diagnosis = await session.ok("diagnose_queue", {"queue": queue} if queue else {})
                if diagnosis["live_workers"] and not await session.busy(queue):
                    break
                await session.wait_on_one(queue)


async def run_fix_line(session: Session, line: str, cwd: Path) -> None:
    if line in session.seen.done:
        return
    session.seen.done.add(line)
    if " mcp-jobs worker " in f" {line} ":
        await run_worker_line(session, line, cwd)
        return
    done = await run_line(line, cwd)
    out = done.stdout.decode() + done.stderr.decode()
    origin = session.seen.origin.get(line, "?")
    assert done.returncode == 0, f"fix {line!r} (from {origin}) failed in {cwd}:\n{out[-3000:]}"


async def cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    with anyio.fail_after(COMMAND_SECONDS):
        done = await anyio.run_process([MCP_JOBS, *args, "--json"], cwd=REPO, env=env, check=False)
    envelope: dict[str, Any] = json.loads(done.stdout)
    return envelope


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_every_fix_line_of_a_session_runs_as_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    session_env = {
        **minimal_env(),
        "SHOP_DB": str(tmp_path / "shop.db"),
        "SHOP_SETTLE_SECONDS": "0",
    }
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=MCP_JOBS,
        args=["serve", "--app", APP, "--database-url", url, "--log-level", "WARNING"],
        env=session_env,
        cwd=str(REPO),
    )
    async with Client(stdio_client(params, errlog=sys.stderr)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        seen = Collected(tools)
        s = Session(client, seen)

        # --- no worker: every answer that waits on one says so ---------------------------------
        await s.ok("describe_jobs")
        orders = [
            await s.ok(
                "enqueue_job",
                {
                    "name": "fulfil_order",
                    "input": {"order_id": n, "sku": "tea-green", "quantity": 1},
                },
            )
            for n in (1, 2)
        ]
        prices = await s.ok(
            "enqueue_job",
            {"name": "import_supplier_prices", "input": {"supplier": "leafco", "batch": "2026-05"}},
        )
        receipt = await s.ok(
            "enqueue_job",
            {
                "name": "send_receipt",
                "input": {"order_id": 1, "email": "ann@shop.example"},
                "tenant_id": "storefront-a",
            },
        )
        for enqueued in [*orders, prices, receipt]:
            assert notice_codes(enqueued) == ["NO_LIVE_WORKERS"], enqueued
        assert orders[0]["notices"][0]["queue"] == "orders"
        assert "--queues orders" in orders[0]["notices"][0]["fix"]

        waited = await s.ok("wait_for_job", {"job_id": orders[0]["job_id"], "timeout_seconds": 1})
        assert waited["settled"] is False and notice_codes(waited) == ["NO_LIVE_WORKERS"]
        assert any("no live worker serves queue orders" in m for m in s.progress), s.progress

        diagnosis = await s.ok("diagnose_queue")
        codes = {f["code"] for f in diagnosis["findings"]}
        assert {"NO_LIVE_WORKERS", "BACKFILL_PENDING"} <= codes and not diagnosis["healthy"]
        unknown = await s.ok("diagnose_queue", {"queue": "no-such-queue"})
        assert unknown["healthy"] is False
        assert unknown["findings"][0]["code"] == "QUEUE_UNKNOWN"
        assert "orders" in unknown["findings"][0]["cause"]
        await s.fails("queue_stats", {"queues": ["no-such-queue"]}, "QUEUE_UNKNOWN")
        await s.fails("list_jobs", {"name": "no_such_job"}, "JOB_UNKNOWN")
        await s.fails("list_jobs", {"limit": 5000}, "LIMIT_EXCEEDED")

        # The shop's table does not exist yet: the error's fix creates it, as an agent would.
        pending = await s.fails(
            "run_backfill", {"name": "normalize_emails"}, "BACKFILL_MIGRATION_PENDING"
        )
        await run_fix_line(s, pending["fix"], elsewhere)
        plan = await s.ok("run_backfill", {"name": "normalize_emails"})
        assert plan["plan"]["rows_remaining"] > 0
        # This client cannot be asked to confirm: the write answers its plan and a token first.
        asked = await s.fails(
            "run_backfill", {"name": "normalize_emails", "write": True}, "CONFIRMATION_REQUIRED"
        )
        written = await s.ok(asked["next_call"]["tool"], asked["next_call"]["arguments"])
        assert notice_codes(written) == ["NO_LIVE_WORKERS"]
        assert written["notices"][0]["queue"] == "backfills"
        unknown_backfill = await s.fails("run_backfill", {"name": "nosuch"}, "BACKFILL_UNKNOWN")
        assert "normalize_emails" in unknown_backfill["cause"]
        await s.ok("list_backfills")

        # The CLI's own failures, run in the session's shell.
        for args, code in (
            (["jobs", "ls", "--limit", "5000"], "LIMIT_EXCEEDED"),
            (["backfill", "nosuch"], "BACKFILL_UNKNOWN"),
        ):
            envelope = await cli([*args, "--app", APP, "--database-url", url], session_env)
            assert envelope["error"]["code"] == code, envelope
            assert envelope["error"]["fix"].split("mcp-jobs ", 1)[1].startswith(args[0]), envelope
            seen.take(envelope, f"mcp-jobs {' '.join(args)}")

        # --- the agent starts the worker diagnose named, and goes on ---------------------------
        worker = next(f["fix"] for f in diagnosis["findings"] if f["code"] == "NO_LIVE_WORKERS")
        await run_fix_line(s, worker, elsewhere)
        after = await s.ok("diagnose_queue")
        dead = next(f for f in after["findings"] if f["code"] == "DEAD_LETTERS")
        dead_id = dead["job_ids"][0]
        await s.ok("inspect_job", {"job_id": dead_id})
        await s.ok("list_jobs", {"state": "dead"})
        retried = await s.ok("retry_job", {"job_id": dead_id})
        assert retried["job"]["state"] == "ready"
        waited = await s.ok("wait_for_job", {"job_id": dead_id, "timeout_seconds": 1})
        assert notice_codes(waited) == ["NO_LIVE_WORKERS"]
        await s.ok("list_backfills", {"name": "normalize_emails"})

        # --- every fix and next call, run as given ---------------------------------------------
        assert seen.lines and seen.calls
        unrunnable = [
            line for line in seen.lines if not re.match(r"(\w+=\S+ )*(mcp-jobs|python) ", line)
        ]
        assert not unrunnable, f"fix lines that are neither a command nor a tool call: {unrunnable}"
        for line in list(seen.lines):
            await run_fix_line(s, line, elsewhere)
        for tool, arguments in list(seen.calls):
            answer = await s.call(tool, arguments)
            if "confirm" in arguments and not answer["ok"]:
                # A confirmed write's token is single use and bound to its plan: replayed, it
                # is refused, and its fix is the dry run that answers a fresh plan.
                assert answer["error"]["code"] == "CONFIRMATION_INVALID", answer
                again, _, given = answer["error"]["fix"].partition(" ")
                await s.ok(again, json.loads(given))
                continue
            assert answer["ok"] is True, (tool, arguments, answer)
