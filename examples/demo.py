"""`mcp-jobs demo`: the example shop, a worker, the MCP server as a subprocess, and an agent's
session against it over stdio — every call and its structured result printed.

The session speaks 2025-11-25, the revision whose clients ask for tasks (`params.task`) and
subscribe to resources (`resources/subscribe`): it follows an order's run by subscription as the
worker moves it, and runs the backfill write as a task the person behind the client confirms
(elicitation) after reading its plan.

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
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ResourceUpdatedNotification,
    TextResourceContents,
)

from engine.client import Jobs, connect
from engine.drivers import DATABASE_URL_ENV, resolve_url
from engine.drivers.urls import redact
from engine.errors import JobNotFoundError
from engine.observe import WorkerEvent
from engine.worker import Worker

APP = "examples.shop"
ORDER = {"order_id": 1001, "sku": "tea-green", "quantity": 2}
RECEIPT = {"order_id": 1001, "email": "ada@example.com"}
PRICES = {"supplier": "leafco", "batch": "2026-05"}
TENANT = "acme"
WAIT = {"timeout_seconds": 30}
SEED_CUSTOMERS = 250
DEMO_SECONDS = 90
# The protocol revision the session speaks (see the module docstring).
PROTOCOL = "legacy"  # the SDK client's name for the 2025-11-25 handshake
TASK_TTL_MS = 60_000
# A bound on following one run by subscription, never a pause. Past the server's re-read when
# no change signal came (subscriptions.RECHECK_MS, 30 s): on PostgreSQL a settle NOTIFYs only
# once the worker has seen that someone follows, so a lost race there costs time, not the demo.
FOLLOW_SECONDS = 45
SETTLED = ("done", "failed", "dead", "cancelled")


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


def _shown(value: Any) -> str:
    return _pretty(_trim(value)).replace("\n", "\n     ")


class Person:
    """The person behind the client (its elicitation callback): reads each confirmation the
    server asks for, printed as they see it, and accepts."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        self.asked.append(params.message)
        question = textwrap.fill(
            params.message, width=96, initial_indent="     ", subsequent_indent="       "
        )
        print(f"   ? the server asks the person (elicitation/create):\n{question}", file=self.out)
        answer = ElicitResult(action="accept", content={"confirm": True})
        print(
            f"   ! the person answers: {_shown(answer.model_dump(exclude_none=True))}",
            file=self.out,
        )
        return answer


class Updates:
    """The session's message handler: the `notifications/resources/updated` that arrived."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            arrived, self._arrived = self._arrived, anyio.Event()
            arrived.set()

    async def after(self, uri: str, seen: int) -> int:
        """Wait until more than `seen` updates of `uri` have arrived; answer how many have."""
        while self.uris.count(uri) <= seen:
            await self._arrived.wait()
        return self.uris.count(uri)


class Session:
    """An agent's side of the conversation: call a tool, print the call and its result."""

    def __init__(
        self,
        client: Client,
        out: TextIO,
        updates: Updates | None = None,
        person: Person | None = None,
    ) -> None:
        self.client = client
        self.out = out
        self.step = 0
        self.updates = updates or Updates()
        self.person = person

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

    async def call_as_task(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A task-augmented `tools/call`: the server answers a task handle at once. Sent raw,
        as the SDK's typed `call_tool` expects a tool result on a 2025-11-25 session."""
        params = {"name": tool, "arguments": arguments, "task": {"ttl": TASK_TTL_MS}}
        print(f"   → tools/call {json.dumps(params)}", file=self.out)
        session: Any = self.client.session
        data: dict[str, Any] = {"method": "tools/call", "params": params}
        options: dict[str, Any] = {}
        session._stamp(data, options)
        created: dict[str, Any] = await session._dispatcher.send_raw_request(
            "tools/call", data["params"], options
        )
        print(f"   ← {_shown(created)}", file=self.out)
        task: dict[str, Any] = created.get("task") or {}
        return task

    async def get_task(self, task_id: str) -> GetTaskResult:
        print(f"   → tasks/get {json.dumps({'taskId': task_id})}", file=self.out)
        request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
        task = await self.client.session.send_request(request, GetTaskResult)
        print(f"   ← {_shown(task.model_dump(by_alias=True, mode='json'))}", file=self.out)
        return task

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """`tasks/result`: blocks until the task settles, then answers the tool's result."""
        print(f"   → tasks/result {json.dumps({'taskId': task_id})}", file=self.out)
        request = GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id))
        result = await self.client.session.send_request(request, CallToolResult)
        envelope: dict[str, Any] = result.structured_content or {}
        print(f"   ← {_shown(envelope)}", file=self.out)
        if result.is_error != (not envelope.get("ok", False)):
            raise DemoFailedError("tasks/result: is_error and ok disagree")
        return envelope

    async def read_run(self, uri: str) -> dict[str, Any]:
        read = await self.client.read_resource(uri, cache_mode="bypass")
        (contents,) = read.contents
        if not isinstance(contents, TextResourceContents):
            raise DemoFailedError(f"{uri} is not text")
        run: dict[str, Any] = json.loads(contents.text)
        return run

    async def follow(self, uri: str) -> dict[str, Any]:
        """Print the run each time the server says it changed, until it settles."""
        run = await self.read_run(uri)
        seen = 0
        with anyio.move_on_after(FOLLOW_SECONDS) as bound:
            while run["job"]["state"] not in SETTLED:
                seen = await self.updates.after(uri, seen)
                run = await self.read_run(uri)
                steps = [step["name"] for step in run.get("steps") or []]
                print(
                    f"   ⇠ notifications/resources/updated {uri}\n"
                    f"     re-read: state {run['job']['state']}, {len(steps)} step(s) "
                    f"{json.dumps(steps)}",
                    file=self.out,
                )
        expect(not bound.cancelled_caught, f"{uri}: no update in {FOLLOW_SECONDS} s")
        return run


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


async def walkthrough(
    session: Session, jobs: Jobs | None = None, start_worker: Callable[[], object] | None = None
) -> None:
    """The agent's session. With `start_worker`, the worker starts once the first order's run
    is subscribed to, so the subscription sees every move; without it, one already runs."""
    s = session
    s.say("What can run here?")
    described = await s.call("describe_jobs")
    names = {d["name"] for d in described["jobs"]}
    expect({"fulfil_order", "import_supplier_prices", "send_receipt"} <= names, "shop jobs missing")

    s.say("Enqueue an order: several steps and a durable sleep.")
    order = await s.call("enqueue_job", {"name": "fulfil_order", "input": ORDER})
    expect(order["ok"], "enqueue failed")

    uri = f"jobs://runs/{order['job_id']}"
    s.say("Subscribe to its run, start the worker, and re-read the run at each update.")
    print(f"   → resources/subscribe {json.dumps({'uri': uri})}", file=s.out)
    with warnings.catch_warnings():  # resources/subscribe is the 2025-11-25 road, on purpose
        warnings.simplefilter("ignore")
        await s.client.subscribe_resource(uri)
    first = await s.read_run(uri)
    print(f"   ← {{}}; the run reads: state {first['job']['state']}", file=s.out)
    if start_worker is not None:
        start_worker()
        print("   (worker started)", file=s.out)
    run = await s.follow(uri)
    expect(run["job"]["state"] == "done", "the order did not finish")
    if start_worker is not None:  # the run moved only after the subscription began
        expect(uri in s.updates.uris, "no update arrived for the order's run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await s.client.unsubscribe_resource(uri)

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
    s.say(
        "Write it as a task: the server asks the person to confirm the plan first, then "
        "answers a task handle at once."
    )
    asked = len(s.person.asked) if s.person is not None else 0
    task = await s.call_as_task("run_backfill", {"name": name, "write": True, "force": force})
    expect(s.person is not None and len(s.person.asked) == asked + 1, "the write went unasked")
    task_id = task.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise DemoFailedError(f"no task handle: {task}")

    s.say("Poll the task: its status message is the pass's ledger row.")
    await s.get_task(task_id)

    s.say("Take its result: tasks/result answers once the pass has settled.")
    result = await s.task_result(task_id)
    expect(result.get("settled") is True, "the backfill pass did not finish")
    expect(result["run"]["status"] == "completed", "the backfill pass did not complete")
    settled = await s.get_task(task_id)
    expect(settled.status == "completed", f"the task is {settled.status}")

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
                params = server_command(url)
                print(f"server: {params.command} {' '.join(params.args)}", file=out)
                person, updates = Person(out), Updates()
                connection = Client(
                    stdio_client(params, errlog=sys.stderr),
                    mode=PROTOCOL,
                    elicitation_callback=person,
                    message_handler=updates,
                )
                async with connection as client:
                    print(f"connected: protocol {client.protocol_version}", file=out)
                    session = Session(client, out, updates, person)
                    try:
                        await walkthrough(session, jobs, lambda: tg.start_soon(worker.run))
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
