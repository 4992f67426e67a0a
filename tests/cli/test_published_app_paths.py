"""A fix line written with the app modules a worker published (a CLI or server run without
--app, elsewhere) carries the PYTHONPATH that worker imported them from: `--app app` alone, run
anywhere but the app's directory, was APP_IMPORT_FAILED."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import anyio
import pytest

from engine import Worker, connect
from engine.declare import JobRegistry
from mcp_jobs.cli import main
from tests.support.fix_lines import run_fix

APP = """
from pydantic import BaseModel
from engine import JobRegistry, Retry, job

REGISTRY = JobRegistry()

class Mail(BaseModel):
    to: str

@job(idempotency_key=lambda i: i.to, retry=Retry(attempts=1), registry=REGISTRY)
async def bounce(data: Mail, ctx) -> None:
    raise RuntimeError("refused " + data.to)
"""


async def _run_beside_the_app(url: str, module: str) -> None:
    """What `mcp-jobs worker --app MODULE` does started in the app's directory: import it from
    there, publish its jobs, run one that dies."""
    app = importlib.import_module(module)
    registry: JobRegistry = app.REGISTRY
    async with await connect(url, registry=registry) as jobs:
        await jobs.enqueue("bounce", {"to": "a@x"})
        worker = Worker(jobs, prune=False)
        await worker.publish_descriptors()
        with anyio.fail_after(30):
            await worker.run_until_idle()


def test_a_line_with_published_apps_imports_them_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    home, elsewhere = tmp_path / "app", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    module = f"bounce_app_{tmp_path.name.replace('-', '_')}"
    (home / f"{module}.py").write_text(APP)
    url = f"sqlite:///{tmp_path}/jobs.db"
    monkeypatch.chdir(home)
    sys.path.insert(0, str(home))
    try:
        anyio.run(_run_beside_the_app, url, module)
    finally:
        sys.path.remove(str(home))
        sys.modules.pop(module, None)

    monkeypatch.chdir(elsewhere)
    assert main(["jobs", "diagnose", "--database-url", url, "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    (dead,) = [f for f in findings if f["code"] == "DEAD_LETTERS"]
    # Among the assignments ahead of the command (an app imported earlier declares its own).
    assert f"PYTHONPATH={home} " in dead["fix"].split(" mcp-jobs ")[0] + " ", dead["fix"]
    assert f"--app {module}" in dead["fix"]
    assert '"state": "dead"' in run_fix(dead["fix"])  # from a scratch directory: it imports
