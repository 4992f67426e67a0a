"""Resource subscriptions with a real third-party client: the TypeScript SDK's
`client.subscribeResource` and a `notifications/resources/updated` handler
(tests/node/run_scenario.mjs) follow a job run of `mcp-jobs serve --app examples.shop` over
stdio and over HTTP with a bearer token, on the 2025-11-25 protocol the SDK speaks.

The worker runs in its own process as a scenario step (`exec`), so the change reaches the server
through the database (SQLite's data_version), as it does in production; the scenario then waits,
bounded, for the notification itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.mcp.test_tasks_ts import RECEIPT, WORKER
from tests.mcp.tsclient_support import Shop, run_over

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

RUN_URI = {"$template": "jobs://runs/{}", "$ref": "enqueue.result.structuredContent.job_id"}
WAIT_MS = 20_000


def scenario(shop: Shop) -> list[dict[str, Any]]:
    worker = [sys.executable, "-c", WORKER, shop.database_url]
    arguments = {"name": "send_receipt", "input": RECEIPT, "tenant_id": "storefront-a"}
    return [
        {
            "id": "enqueue",
            "op": "callTool",
            "params": {"name": "enqueue_job", "arguments": arguments},
        },
        {"id": "subscribe", "op": "subscribe", "params": {"uri": RUN_URI}},
        {"id": "work", "op": "exec", "params": {"argv": worker}},
        {"id": "updated", "op": "waitUpdated", "params": {"uri": RUN_URI, "timeoutMs": WAIT_MS}},
        {"id": "read", "op": "readResource", "params": {"uri": RUN_URI}},
        {"id": "unsubscribe", "op": "unsubscribe", "params": {"uri": RUN_URI}},
        {"id": "bad", "op": "subscribe", "params": {"uri": "jobs://runs/no-such-job"}},
    ]


@pytest.fixture(scope="module", params=["stdio", "http"])
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp(f"ts-subscribe-{request.param}")
    with run_over(request.param, root, scenario) as done:
        yield done


def ok(run: dict[str, Any], step_id: str) -> dict[str, Any]:
    step = run["by_id"][step_id]
    assert step["ok"], f"{step_id}: the client threw: {step['error']}"
    found: dict[str, Any] = step["result"]
    return found


def test_the_server_offers_subscriptions(run: dict[str, Any]) -> None:
    assert run["capabilities"]["resources"]["subscribe"] is True


def test_the_client_hears_its_followed_run_change(run: dict[str, Any]) -> None:
    job_id = ok(run, "enqueue")["structuredContent"]["job_id"]
    uri = f"jobs://runs/{job_id}"
    ok(run, "subscribe")
    assert ok(run, "updated")["uri"] == uri
    assert uri in [n["uri"] for n in run["resourceUpdated"]]
    # The notification says only "read it again": the read shows the run done.
    read = json.loads(ok(run, "read")["contents"][0]["text"])
    assert read["job"]["id"] == job_id and read["job"]["state"] == "done", read
    ok(run, "unsubscribe")


def test_an_unknown_run_is_refused(run: dict[str, Any]) -> None:
    step = run["by_id"]["bad"]
    assert not step["ok"] and step["error"]["code"] == -32602
    assert "JOB_NOT_FOUND" in step["error"]["message"]
