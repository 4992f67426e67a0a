"""`mcp-jobs limits`: the rate limits known (engine/rate_limits.py) and where they hold work back.

The same operation `queue_stats` reads its rate limits with (mcp_jobs/operations/rate_limits.py),
so `--json` prints that envelope. Under `--tenant`, other tenants' keys and keys computed from
input are left out.
"""

from __future__ import annotations

import argparse
from typing import Any

from engine import bounds
from mcp_jobs.cli.commands import guarded, open_jobs, scope_of
from mcp_jobs.cli.render import TEXT, table, when
from mcp_jobs.config import Settings
from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.rate_limits import list_rate_limits


async def limits_command(args: argparse.Namespace, settings: Settings) -> int:
    async def run() -> Envelope:
        # A filter (a read: a stored key is shown as is), bounded as every tenant input is.
        bounds.optional_text("--tenant", settings.tenant, bounds.MAX_TENANT_BYTES)
        async with open_jobs(settings) as jobs:
            return await list_rate_limits(scope_of(jobs, settings, "limits"))

    return await guarded("list_rate_limits", args.json, run, settings)


def _at(r: dict[str, Any], field: str) -> str:
    return "-" if r.get(field) is None else when(r[field])


def _listed(env: dict[str, Any]) -> str:
    rows = [
        [r["key"], r["rate"], _at(r, "next_start_at"), _at(r, "reserved_until")]
        for r in env["rate_limits"]
    ]
    if not rows:
        return "no rate limits: none declared, none taken"
    return table(rows, ["key", "rate", "next start", "reserved until"])


TEXT.update({"list_rate_limits": _listed})
