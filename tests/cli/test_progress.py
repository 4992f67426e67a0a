"""A job's own progress (engine/progress.py) in `mcp-jobs jobs ls` and `jobs show`: the JSON is
the tools' envelope, the text a "done/total (percent) message" line; a column only when a job on
the page has reported."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import examples.shop
from engine import ManualClock, connect
from engine.drivers.base import PROGRESS
from mcp_jobs.cli.job_progress import progress_text
from schemas.progress import Progress
from tests.cli.support import run


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_ENV", "MCP_JOBS_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    yield f"sqlite:///{tmp_path}/jobs.db"


def running_with_progress(url: str, progress: Progress | None) -> str:
    """A fulfil_order job claimed by a worker; it has reported `progress` when given."""

    async def make() -> str:
        jobs = await connect(url, clock=ManualClock())
        try:
            r = await jobs.enqueue(
                examples.shop.fulfil_order, {"order_id": 1, "sku": "mug", "quantity": 1}
            )
            (claimed,) = await jobs.driver.claim("w-1", 1, 60_000)
            if progress is not None:
                store = jobs.driver
                assert isinstance(store, PROGRESS.protocol)
                assert await store.save_progress(r.id, claimed.token, progress)
            return r.id
        finally:
            await jobs.close()

    return anyio.run(make)


def test_show_and_ls_print_the_progress_a_job_reported(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    at = ManualClock().now_ms()
    job_id = running_with_progress(
        url, Progress(done=3, total=10, message="packing", at=at, attempt=1)
    )
    db = ["--database-url", url]
    code, shown = run(capsys, "jobs", "show", job_id, *db, "--json")
    assert code == 0 and shown["job"]["progress"]["done"] == 3
    code, text = run(capsys, "jobs", "show", job_id, *db)
    assert code == 0 and "  progress: 3/10 (30%) packing  (attempt 1, 2026-01-01" in text

    code, listed = run(capsys, "jobs", "ls", *db, "--json")
    assert code == 0 and listed["jobs"][0]["progress"]["message"] == "packing"
    code, table = run(capsys, "jobs", "ls", *db)
    header, row = table.splitlines()[:2]
    assert header.split()[-1] == "PROGRESS" and row.endswith("3/10 (30%) packing")


def test_ls_and_show_leave_progress_out_until_a_job_reports(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = running_with_progress(url, None)
    db = ["--database-url", url]
    code, table = run(capsys, "jobs", "ls", *db)
    assert code == 0 and "PROGRESS" not in table
    code, text = run(capsys, "jobs", "show", job_id, *db)
    assert code == 0 and "progress" not in text


def test_the_progress_text() -> None:
    assert progress_text(None) == "-"
    assert progress_text({"done": 0.5, "total": None, "message": None}) == "0.5"
    assert progress_text({"done": 10, "total": 10.0, "message": "done"}) == "10/10 (100%) done"
    cut = progress_text({"done": 1, "total": 4, "message": "x" * 50}, 10)
    assert cut == "1/4 (25%) " + "x" * 9 + "…"
