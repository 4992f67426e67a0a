"""`mcp-jobs jobs describe` without `--app` shows the descriptors a worker published to the
database (engine/descriptors.py), flagged `published` and with the worker's app modules."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from engine import JobRegistry, Worker, connect
from engine.testing.kit.test_descriptors import declare
from mcp_jobs.cli import main


async def _publish(url: str) -> str:
    app = JobRegistry()
    declare(app)
    async with await connect(url, registry=app) as jobs:
        worker = Worker(jobs, apps=["shop.jobs"])
        await worker.publish_descriptors()
        return worker.id


def test_describe_without_the_app_shows_the_published_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    worker_id = anyio.run(_publish, url)

    assert main(["jobs", "describe", "--database-url", url, "--json"]) == 0
    envelope = json.loads(capsys.readouterr().out)
    (charge,) = [d for d in envelope["jobs"] if d["name"] == "charge"]
    assert (charge["source"], charge["published_by"]) == ("published", worker_id)
    assert (charge["apps"], charge["stale"], charge["queue"]) == (["shop.jobs"], False, "billing")

    assert main(["jobs", "describe", "charge", "--database-url", url]) == 0
    out = capsys.readouterr().out
    assert "charge" in out and "billing" in out
