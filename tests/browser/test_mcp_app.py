"""The MCP App in Chromium: the `ui://` page read through the SDK client, put in a sandboxed
iframe of a small host page that speaks the MCP Apps postMessage protocol (answers
`ui/initialize`, then posts `ui/notifications/tool-result`), renders the real answers of
`queue_stats`, `inspect_job` and `diagnose_queue` on the seeded database — the same numbers."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.types import TextResourceContents

from engine import JobRegistry, connect
from engine.backfill import BackfillRegistry
from mcp_jobs.server import build_server
from mcp_jobs.server.apps_ui import APP_MIME_TYPE, DASHBOARD_URI, EXTENSION_ID
from tests.browser.app_jobs import declare
from tests.browser.seeding import Seeded
from tests.browser.support import run_async, settings_for, step_attempts, value

# The host side: answer the App's initialize with the tool it renders, then hand it the result
# once it says it is initialized. Every message the App sends is kept in `window.fromApp`.
HOST = """<!doctype html><html><body style="margin:0">
<iframe id="app" sandbox="allow-scripts" style="width:1200px;height:860px;border:0"></iframe>
<script>
window.fromApp = [];
const frame = document.getElementById("app");
const TOOL = %(tool)s, RESULT = %(result)s;
window.addEventListener("message", (event) => {
  if (event.source !== frame.contentWindow) return;
  const msg = event.data;
  window.fromApp.push(msg);
  const post = (m) => frame.contentWindow.postMessage(Object.assign({jsonrpc: "2.0"}, m), "*");
  if (msg.method === "ui/initialize") {
    post({id: msg.id, result: {
      protocolVersion: msg.params.protocolVersion,
      hostInfo: {name: "browser-test-host", version: "0"},
      hostCapabilities: {},
      hostContext: {theme: "light", toolInfo: {tool: {name: TOOL}}}}});
  } else if (msg.method === "ui/notifications/initialized") {
    post({method: "ui/notifications/tool-result", params: RESULT});
  }
});
frame.srcdoc = %(html)s;
</script></body></html>"""


async def _from_server(url: str, job_id: str) -> tuple[TextResourceContents, dict[str, Any]]:
    """The page and the three tools' results (wire form), through the SDK client."""
    registry, backfills = JobRegistry(), BackfillRegistry()
    declare(registry, backfills)
    jobs = await connect(url, registry=registry)
    try:
        server = build_server(settings_for(url), jobs, backfills=backfills)
        apps = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
        async with Client(server, mode="legacy", extensions=apps) as client:
            (page,) = (await client.read_resource(DASHBOARD_URI)).contents
            results: dict[str, Any] = {}
            for tool, arguments in (
                ("queue_stats", {}),
                ("inspect_job", {"job_id": job_id}),
                ("diagnose_queue", {}),
            ):
                answer = await client.call_tool(tool, arguments)
                assert not answer.is_error, answer
                results[tool] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    finally:
        await jobs.close()
    assert isinstance(page, TextResourceContents)
    return page, results


@pytest.fixture(scope="module")
def served(seeded: Seeded) -> tuple[TextResourceContents, dict[str, Any]]:
    return run_async(lambda: _from_server(seeded.url, seeded.ship_order))


def _host(page: Any, html: str, tool: str, result: dict[str, Any]) -> Any:
    """Load the host page around the App; the App's frame once it rendered `tool`'s view."""
    page.set_content(
        HOST % {"tool": _script(tool), "result": _script(result), "html": _script(html)}
    )
    app = page.frame_locator("#app")
    app.locator(f'body[data-view="{tool}"]').wait_for()
    return app


def _script(value: Any) -> str:
    """`value` as a JavaScript literal inside a <script>: no "</" may close the element early."""
    return json.dumps(value).replace("</", "<\\/")


def _said(page: Any) -> list[str]:
    return [m.get("method") or f"answer:{m.get('id')}" for m in page.evaluate("window.fromApp")]


def test_the_app_speaks_the_apps_handshake_and_renders_queue_stats(
    page: Any, served: tuple[TextResourceContents, dict[str, Any]], shoot: Any
) -> None:
    resource, results = served
    assert resource.mime_type == APP_MIME_TYPE
    result = results["queue_stats"]
    app = _host(page, resource.text, "queue_stats", result)

    said = _said(page)
    assert said[:2] == ["ui/initialize", "ui/notifications/initialized"], said
    assert "ui/notifications/size-changed" in said
    queues = result["structuredContent"]["queues"]
    assert {q["queue"] for q in queues} >= {"mail", "orders", "billing", "reports", "imports"}
    for q in queues:
        for field in ("ready", "running", "delayed", "suspended", "dead", "failed", "done"):
            assert value(app.get_by_test_id(f"queue:{q['queue']}:{field}")) == q[field], (
                q["queue"],
                field,
            )
        # The window done counts, on hover: here the full hour (no queue is busy).
        window = app.get_by_test_id(f"queue:{q['queue']}:done").get_attribute("title")
        assert (q["settled_window_ms"], window) == (3_600_000, "in the last 1 h 0 min")
        shown = value(app.get_by_test_id(f"queue:{q['queue']}:oldest_ready_age_ms"))
        assert shown == q["oldest_ready_ms"]
        paused = app.get_by_test_id(f"paused:{q['queue']}")
        assert paused.count() == (1 if q.get("paused") else 0), q["queue"]
    assert app.get_by_test_id("paused:reports").count() == 1
    shoot("queue-stats")


def test_the_app_renders_inspect_job_with_a_bar_per_step_and_the_error(
    page: Any, served: tuple[TextResourceContents, dict[str, Any]], shoot: Any
) -> None:
    resource, results = served
    answer = results["inspect_job"]["structuredContent"]
    app = _host(page, resource.text, "inspect_job", results["inspect_job"])

    assert app.get_by_test_id("job-state").inner_text() == answer["job"]["state"] == "dead"
    shown = step_attempts(app.get_by_test_id("step-bar"))
    assert shown == {s["name"]: (s["attempts"], s["status"]) for s in answer["steps"]}
    assert shown == {
        "reserve": (1, "completed"),
        "charge": (2, "completed"),
        "notify": (2, "failed"),
    }
    error = answer["job"]["last_error"]
    assert app.get_by_test_id("error-code").inner_text() == error["code"] == "JOB_FAILED"
    assert app.get_by_test_id("error-cause").inner_text() == error["cause"]
    assert app.get_by_test_id("error-fix").inner_text() == error["fix"]
    assert app.get_by_test_id("event").count() == len(answer["events"]) > 0
    shoot("inspect-job")


def test_the_app_renders_diagnose_queue_findings(
    page: Any, served: tuple[TextResourceContents, dict[str, Any]], shoot: Any
) -> None:
    resource, results = served
    answer = results["diagnose_queue"]["structuredContent"]
    app = _host(page, resource.text, "diagnose_queue", results["diagnose_queue"])

    codes = Counter(f["code"] for f in answer["findings"])
    assert codes, "the seeded database has dead letters: diagnose must find them"
    for code, n in codes.items():
        assert app.get_by_test_id(f"finding:{code}").count() == n, code
    assert value(app.get_by_test_id("live-workers")) == answer["live_workers"]
    shoot("diagnose")
