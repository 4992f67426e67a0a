"""A backfill named from a process that imported no app (the CLI run without --app, elsewhere):
BACKFILL_UNKNOWN's fix is the rehearsal with the apps the workers published, which runs as given
there; the list of this process's backfills, which is empty, was its fix. `jobs drain` publishes
its jobs as a worker does, so a drain alone is enough for that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.fix_lines import run_fix

APP = """
from pydantic import BaseModel
from engine import job
from engine.backfill import backfill

class Ping(BaseModel):
    n: int

@job(idempotency_key=lambda i: str(i.n))
async def ping(data: Ping, ctx) -> None:
    return None

async def count():
    return 0

async def read(after, limit):
    return []

async def handle(rows):
    return None

backfill(name="renumber_orders", count=count, read=read, key=lambda row: row, handle=handle)
"""


def _cli(home: Path, url: str, *words: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *words, "--database-url", url],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_a_backfill_named_without_the_app_is_rehearsed_with_the_published_one(
    tmp_path: Path,
) -> None:
    home, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    module = f"orders_app_{tmp_path.name.replace('-', '_')}"
    (home / f"{module}.py").write_text(APP)
    url = f"sqlite:///{tmp_path}/jobs.db"
    assert _cli(home, url, "db", "migrate").returncode == 0
    drained = _cli(home, url, "jobs", "drain", "--app", module, "--json")
    assert drained.returncode == 0, drained.stderr

    # A process of its own: this one may declare backfills other tests imported.
    refused = _cli(elsewhere, url, "backfill", "renumber_orders", "--json")
    assert refused.returncode != 0
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "BACKFILL_UNKNOWN"
    assert module in error["cause"]
    assert f"--app {module}" in error["fix"] and f"PYTHONPATH={home}" in error["fix"]
    plan = json.loads(run_fix(error["fix"]))  # from a scratch directory
    assert plan["ok"] is True and plan["mode"] == "dry_run"
    assert plan["plan"]["name"] == "renumber_orders"
