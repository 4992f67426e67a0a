"""`mcp-jobs demo`: the example shop, a worker, the MCP server as a subprocess, and an agent's
session against it over stdio — every call and its structured result printed.

The CLI loads this module by name (`mcp_jobs.cli.entry.DEMO_MODULE`); it lives beside the app it
drives so that the mcp_jobs package never imports the example.

It runs on the embedded default database (the SQLite file `./.mcp-jobs/jobs.db` unless
`MCP_JOBS_DATABASE_URL` is set). Each step checks what it got; an unexpected answer ends the demo
with exit code 1, so CI running it proves the whole path works.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine.client import Jobs, connect
from engine.drivers import DATABASE_URL_ENV, resolve_url
from engine.errors import JobNotFoundError
from engine.observe import WorkerEvent
from engine.worker import Worker
from mcp_jobs.config import redact

APP = "examples.shop"
ORDER = {"order_id": 1001, "sku": "tea-green", "quantity": 2}
RECEIPT = {"order_id": 1001, "email": "ada@example.com"}
PRICES = {"supplier": "leafco", "batch": "2026-05"}
TENANT = "acme"
WAIT = {"timeout_seconds": 30}
SEED_CUSTOMERS = 250
DEMO_SECONDS = 90


class DemoFailedError(Exception):
    """A step answered something the walkthrough did not expect."""


SHOWN_ITEMS = 4


def _trim(value: Any, depth: int = 0) -> Any:
    """Keep printed results legible: long strings and deep objects are cut, and a long list shows
    its first items with a note beside it (`"(sample_keys)": "4 of 10 shown"`), so a list of keys
    never gains a string. A success has no null fields; the nulls left out here are inside
    free-form event data (an audited call's omitted arguments)."""
    if isinstance(value, dict):
        if depth >= 5:
            return "{…}"
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None:
                continue
            out[key] = _trim(item, depth + 1)
            if isinstance(item, list) and len(item) > SHOWN_ITEMS:
                out[f"({key})"] = f"{SHOWN_ITEMS} of {len(item)} shown"
        return out
    if isinstance(value, list):
        return [_trim(v, depth + 1) for v in value[:SHOWN_ITEMS]]
    if isinstance(value, str) and len(value) > 200:
        return value[:197] + "…"
    return value


def _pretty(value: Any, indent: int = 0) -> str:
    """Indented JSON whose short lists and objects stay on one line, to keep the session short."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, dict | list) or len(flat) + indent <= 90:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + _pretty(v, indent + 2) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    fields = [f"{pad}{json.dumps(k)}: {_pretty(v, indent + 2)}" for k, v in value.items()]
    return "{\n" + ",\n".join(fields) + "\n" + " " * indent + "}"


def _abridged(tool: str, envelope: dict[str, Any]) -> dict[str, Any]:
    """What the demo prints: the whole envelope, except where a payload is too big to read."""
    if tool == "describe_jobs" and envelope.get("ok"):
        jobs = [
            {
                "name": d["name"],
                "queue": d["queue"],
                "input": d["input_schema"].get("required", []),
                "retry_delays_ms": d["retry"]["delays_ms"],
                "tenant_required": d["tenant_required"],
            }
            for d in envelope["jobs"]
        ]
        tasks = [
            {"name": t["name"], "cron": t["cron"], "timezone": t["timezone"]}
            for t in envelope.get("tasks") or []
        ]
        return {"ok": True, "jobs": jobs, "tasks": tasks, "(abridged)": "input schemas omitted"}
    if tool == "diagnose_queue" and envelope.get("ok"):
        shown = {k: v for k, v in envelope.items() if k != "queues"}
        return {**shown, "(abridged)": "per-queue counts omitted"}
    return envelope


class Session:
    """An agent's side of the conversation: call a tool, print the call and its result."""

    def __init__(self, client: Client, out: TextIO) -> None:
        self.client = client
        self.out = out
        self.step = 0

    def say(self, text: str) -> None:
        self.step += 1
        print(f"\n{self.step}. {text}", file=self.out)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        args = arguments or {}
        print(f"   → {tool} {json.dumps(args)}", file=self.out)
        seen: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message and message not in seen:
                seen.append(message)
                print(f"     … {message}", file=self.out)

        result = await self.client.call_tool(tool, args, progress_callback=on_progress)
        envelope: dict[str, Any] = result.structured_content or {}
        shown = _pretty(_trim(_abridged(tool, envelope)))
        print("   ← " + shown.replace("\n", "\n     "), file=self.out)
        if result.is_error != (not envelope.get("ok", False)):
            raise DemoFailedError(f"{tool}: is_error and ok disagree")
        return envelope


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise DemoFailedError(what)


def server_command(url: str) -> StdioServerParameters:
    """The server subprocess. Its database URL goes through the environment, never argv, where
    any local user could read its password (`ps`)."""
    script = Path(sys.executable).with_name("mcp-jobs")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "mcp_jobs.cli"]
    argv = [*head, "serve", "--app", APP, "--log-level", "WARNING"]
    env = {**os.environ, DATABASE_URL_ENV: url}
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=os.getcwd())


def banner(url: str) -> str:
    return f"mcp-jobs demo — database {redact(url)}, app {APP}"


async def _seed() -> None:
    from examples.shop import seed_customers

    await anyio.to_thread.run_sync(seed_customers, SEED_CUSTOMERS)


async def walkthrough(session: Session, jobs: Jobs | None = None) -> None:
    s = session
    s.say("What can run here?")
    described = await s.call("describe_jobs")
    names = {d["name"] for d in described["jobs"]}
    expect({"fulfil_order", "import_supplier_prices", "send_receipt"} <= names, "shop jobs missing")

    s.say("Enqueue an order: several steps and a durable sleep.")
    order = await s.call("enqueue_job", {"name": "fulfil_order", "input": ORDER})
    expect(order["ok"], "enqueue failed")

    s.say("Wait for it, with progress.")
    waited = await s.call("wait_for_job", {"job_id": order["job_id"], **WAIT})
    expect(waited["settled"] and waited["job"]["state"] == "done", "the order did not finish")

    s.say("Inspect its steps.")
    trace = await s.call("inspect_job", {"job_id": order["job_id"]})
    steps = [step["name"] for step in trace["steps"]]
    expect(steps == ["reserve-stock", "charge-card", "settle-payment", "ship"], f"steps {steps}")

    if jobs is not None:
        await _checkout(s, jobs)

    s.say(f"Schedule tenant {TENANT}'s receipt for an hour from now, then enqueue it again.")
    receipt_args = {
        "name": "send_receipt",
        "input": RECEIPT,
        "tenant_id": TENANT,
        "delay_seconds": 3600,
    }
    receipt = await s.call("enqueue_job", receipt_args)
    again = await s.call("enqueue_job", receipt_args)
    expect(
        again["deduped"] and again["job_id"] == receipt["job_id"], "the duplicate was not deduped"
    )

    s.say("Import a supplier's prices while the supplier is down: watch it dead-letter.")
    prices = await s.call("enqueue_job", {"name": "import_supplier_prices", "input": PRICES})
    dead = await s.call("wait_for_job", {"job_id": prices["job_id"], **WAIT})
    expect(dead["job"]["state"] == "dead", "the import did not dead-letter")

    s.say("Diagnose the queues.")
    diagnosis = await s.call("diagnose_queue")
    codes = {f["code"] for f in diagnosis["findings"]}
    expect("DEAD_LETTERS" in codes, "diagnose missed the dead letter")

    s.say("The supplier is back: retry the dead job and wait for it.")
    await s.call("retry_job", {"job_id": prices["job_id"]})
    retried = await s.call("wait_for_job", {"job_id": prices["job_id"], **WAIT})
    expect(retried["job"]["state"] == "done", "the retried import did not finish")

    s.say("The customer asked us not to send the receipt: cancel it.")
    cancelled = await s.call("cancel_job", {"job_id": receipt["job_id"]})
    expect(cancelled["job"]["state"] == "cancelled", "the receipt was not cancelled")

    await _backfill(s)


async def _checkout(s: Session, jobs: Jobs) -> None:
    """App code, not a tool call: the shop checks out inside its own transaction (the outbox)."""
    from examples.shop import OrderTakenError, checkout
    from examples.shop.jobs import OrderInput

    order = OrderInput(order_id=int(time.time()), sku="mug", quantity=1)
    s.say(
        f"Check out order {order.order_id} in the shop's own transaction, staging its "
        "fulfilment in it (the outbox): the job exists because the order committed."
    )
    staged = await checkout(jobs, order)
    print(f"   staged job {staged.job_id}; the worker's relay publishes it", file=s.out)
    with anyio.fail_after(30):
        while True:  # published within one relay poll
            try:
                await jobs.get(staged.job_id)
                break
            except JobNotFoundError:
                await anyio.sleep(0.05)
    done = await s.call("wait_for_job", {"job_id": staged.job_id, **WAIT})
    expect(done["job"]["state"] == "done", "the checked-out order did not finish")
    s.say(
        f"Check out order {order.order_id} again: the insert fails and the transaction rolls back."
    )
    try:
        await checkout(jobs, order)
    except OrderTakenError:
        page = await jobs.list(name="fulfil_order", limit=100)
        staged_twice = [j for j in page.jobs if j.input.get("order_id") == order.order_id]
        expect(len(staged_twice) == 1, "a rolled-back checkout left a job behind")
        print("   refused, and no second job was staged.", file=s.out)
    else:
        expect(False, "a duplicate checkout was accepted")


async def _backfill(s: Session) -> None:
    s.say("Which backfills does this app declare?")
    listed = await s.call("list_backfills")
    if not listed["backfills"]:
        print("   (this build's example app declares no backfill)", file=s.out)
        return
    name = listed["backfills"][0]["name"]

    s.say(f"Rehearse backfill {name}: a dry run writes nothing.")
    plan = (await s.call("run_backfill", {"name": name}))["plan"]
    blocked = plan.get("blocked_by")
    force = blocked is not None and blocked["code"] == "BACKFILL_APPLIED"
    expect(blocked is None or force, f"the dry run is blocked: {blocked}")

    if force:
        s.say("It already ran here (an earlier demo); the fix says rerun with force.")
    else:
        s.say("Write it: a durable pass, followed here with progress.")
    write = {"name": name, "write": True, "force": force, "wait_seconds": 30}
    asked = await s.call("run_backfill", write)
    # This client cannot show the server's confirmation question, so the server answers the
    # plan and a single-use token instead; the person reviews it and the token writes.
    expect(asked.get("error", {}).get("code") == "CONFIRMATION_REQUIRED", "a write went unasked")
    s.say("The server wants the plan confirmed first; the person reviewed it and says yes.")
    confirmed = asked["error"]["next_call"]
    started = await s.call(confirmed["tool"], confirmed["arguments"])
    expect(started["ok"] and started.get("settled") is True, "the backfill pass did not finish")
    expect(started["run"]["status"] == "completed", "the backfill pass did not complete")

    s.say("List the backfills again.")
    after = await s.call("list_backfills")
    state = next(b for b in after["backfills"] if b["name"] == name)
    expect(not state["pending"], "the backfill is still pending")


def _worker_echo(out: TextIO) -> Any:
    shown = {"succeeded", "retried", "dead", "parked", "cancelled"}

    def echo(event: WorkerEvent) -> None:
        if event.kind in shown:
            reason = f" ({event.reason or event.error})" if event.reason or event.error else ""
            print(f"     [worker] {event.name} {event.kind}{reason}", file=out)

    return echo


async def run(out: TextIO = sys.stdout, argv: Sequence[str] = ()) -> int:
    url = resolve_url(None)
    # The worker's own log lines would repeat what the echo above prints.
    logging.getLogger("mcp_jobs.worker").setLevel(logging.CRITICAL)
    logging.getLogger("mcp_jobs.job").setLevel(logging.CRITICAL)
    print(banner(url), file=out)
    import examples.shop  # noqa: F401  (registers the shop's jobs, task and backfill)

    await _seed()
    jobs: Jobs = await connect(url)
    worker = Worker(jobs, concurrency=4, poll_ms=100)
    worker.add_listener(_worker_echo(out))
    code = 0
    try:
        with anyio.fail_after(DEMO_SECONDS):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run)
                params = server_command(url)
                print(f"server: {params.command} {' '.join(params.args)}", file=out)
                async with Client(stdio_client(params, errlog=sys.stderr)) as client:
                    print(f"connected: protocol {client.protocol_version}", file=out)
                    try:
                        await walkthrough(Session(client, out), jobs)
                    except DemoFailedError as exc:
                        print(f"\ndemo FAILED: {exc}", file=out)
                        code = 1
                worker.stop()
    finally:
        await jobs.close()
    if code == 0:
        print("\ndemo finished: every step answered as expected.", file=out)
    return code


def main() -> int:
    return anyio.run(run)
