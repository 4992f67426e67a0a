"""The dashboard as an MCP App: the `ui://` resource that `inspect_job`, `queue_stats` and
`diagnose_queue` name in `_meta.ui.resourceUri`, served through the SDK's Apps extension.

A host that renders MCP Apps reads the resource and hands it each tool result; any other host
ignores the `_meta` and reads the same structured answer as before (the tools are not wrapped).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, Apps

__all__ = [
    "APP_MIME_TYPE",
    "DASHBOARD_URI",
    "EXTENSION_ID",
    "UI_META",
    "UI_TOOLS",
    "apps_extension",
    "dashboard_html",
]

DASHBOARD_URI = "ui://mcp-jobs/dashboard.html"
# The tools whose answers the page renders; each is registered with `meta=UI_META`.
UI_TOOLS = ("inspect_job", "queue_stats", "diagnose_queue")
UI_META: dict[str, Any] = {"ui": {"resourceUri": DASHBOARD_URI}}


def dashboard_html() -> str:
    """The page: one self-contained file (inline CSS and JS, no network), shipped as package
    data."""
    return files("mcp_jobs.server").joinpath("ui", "dashboard.html").read_text(encoding="utf-8")


def apps_extension() -> Apps:
    """The Apps extension with the dashboard resource and no tools of its own: the tools stay
    where they are registered and carry `UI_META`. Passing it to the server advertises
    `io.modelcontextprotocol/ui` and serves the resource as `text/html;profile=mcp-app`."""
    apps = Apps()
    apps.add_html_resource(
        DASHBOARD_URI,
        dashboard_html(),
        name="dashboard",
        title="mcp-jobs dashboard",
        description="renders inspect_job, queue_stats and diagnose_queue answers",
    )
    return apps
