"""The dashboard as an MCP App (#26): three read tools name the `ui://` page in
`_meta.ui.resourceUri`, the page is served as `text/html;profile=mcp-app` under the advertised
Apps extension, and a host without Apps gets exactly the answers it got before."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.types import TextResourceContents

from engine import JobRegistry, Jobs, Worker
from engine.clock import ManualClock
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.apps_ui import (
    APP_MIME_TYPE,
    DASHBOARD_URI,
    EXTENSION_ID,
    UI_TOOLS,
    dashboard_html,
)

SURFACE = pytest.mark.drivers("memory", reason="the published surface does not depend on storage")


@SURFACE
@pytest.mark.parametrize("read_only", [False, True], ids=["full", "read-only"])
async def test_exactly_the_three_dashboard_tools_name_the_ui_resource(
    jobs: Jobs, app: JobRegistry, mode: str, read_only: bool
) -> None:
    server = build_server(Settings(read_only=read_only), jobs)
    async with Client(server, mode=mode) as client:
        tools = (await client.list_tools()).tools
    with_ui = {t.name: (t.meta or {}).get("ui") for t in tools if (t.meta or {}).get("ui")}
    assert with_ui == {name: {"resourceUri": DASHBOARD_URI} for name in UI_TOOLS}
    assert set(UI_TOOLS) == {"inspect_job", "queue_stats", "diagnose_queue"}


@SURFACE
@pytest.mark.parametrize("read_only", [False, True], ids=["full", "read-only"])
async def test_the_ui_resource_is_the_dashboard_page_under_the_apps_mime_type(
    jobs: Jobs, app: JobRegistry, mode: str, read_only: bool
) -> None:
    server = build_server(Settings(read_only=read_only), jobs)
    async with Client(server, mode=mode) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        (content,) = (await client.read_resource(DASHBOARD_URI)).contents
        extensions = client.server_capabilities.extensions or {}
    assert listed[DASHBOARD_URI].mime_type == APP_MIME_TYPE == "text/html;profile=mcp-app"
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == APP_MIME_TYPE
    assert content.text == dashboard_html()
    assert content.text.startswith("<!doctype html>")
    assert EXTENSION_ID == "io.modelcontextprotocol/ui"
    if mode == "auto":
        # Capabilities carry `extensions` from 2026-07-28 on; an older host finds the page from
        # the tools' `_meta` alone.
        assert EXTENSION_ID in extensions


def test_the_page_is_self_contained_and_never_writes_markup_from_data() -> None:
    # Hosts render it in a sandbox without network; every value goes in as text or an attribute.
    html = dashboard_html()
    script = html.split("<script>", 1)[1].split("</script>", 1)[0]
    assert not re.search(r"\b(src|href)\s*=|https?://|@import|url\(", html)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    for call in ("fetch(", "XMLHttpRequest", "WebSocket", "localStorage", "import("):
        assert call not in script, call
    # The guest side of the protocol, and the contract's names for the numbers it shows.
    for method in ("ui/initialize", "ui/notifications/initialized", "ui/notifications/tool-result"):
        assert f'"{method}"' in script
    for testid in ('"queue:"', '"job-state"', '"step-bar"', '"error-code"', '"finding:"'):
        assert testid in script


async def _answers(server: Any, mode: str, *, apps: bool, job_id: str) -> list[dict[str, Any]]:
    extensions = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})] if apps else []
    async with Client(server, mode=mode, extensions=extensions) as client:
        calls = [
            ("queue_stats", {}),
            ("diagnose_queue", {}),
            ("inspect_job", {"job_id": job_id}),
            ("inspect_job", {"job_id": "no-such-job"}),
        ]
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return [r.model_dump(mode="json", by_alias=True) for r in results]


async def test_a_host_without_apps_gets_the_same_answers_as_one_with_apps(
    jobs: Jobs, app: JobRegistry, mode: str, clock: ManualClock
) -> None:
    dead = await jobs.enqueue("flaky", {"key": "app"})
    await jobs.enqueue("fulfil", {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(1_000)
    await worker.run_until_idle()
    server = build_server(Settings(), jobs)

    with_apps = await _answers(server, mode, apps=True, job_id=dead.id)
    without = await _answers(server, mode, apps=False, job_id=dead.id)

    assert with_apps == without
    stats, diagnosis, inspected, missing = without
    assert stats["structuredContent"]["queues"]
    assert "DEAD_LETTERS" in {f["code"] for f in diagnosis["structuredContent"]["findings"]}
    assert inspected["structuredContent"]["job"]["state"] == "dead"
    assert missing["isError"] and missing["structuredContent"]["error"]["code"] == "JOB_NOT_FOUND"
