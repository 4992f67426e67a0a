"""The web dashboard (#26): server-rendered pages over `mcp_jobs.operations`, served by
`mcp-jobs dashboard` and mounted at `/dashboard/` by `serve --transport http`."""

from mcp_jobs.dashboard.app import Dashboard
from mcp_jobs.dashboard.auth import DashboardAuth, mounted_auth, standalone_auth
from mcp_jobs.dashboard.mount import MOUNT_PREFIX, WithDashboard, mounted_beside
from mcp_jobs.dashboard.routing import dashboard_app

__all__ = [
    "MOUNT_PREFIX",
    "Dashboard",
    "DashboardAuth",
    "WithDashboard",
    "dashboard_app",
    "mounted_auth",
    "mounted_beside",
    "standalone_auth",
]
