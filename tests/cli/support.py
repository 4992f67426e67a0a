"""Running `mcp-jobs` in-process for the CLI tests."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from mcp_jobs.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """The exit code, and what it printed: parsed JSON with `--json`, else the text."""
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if "--json" in argv else out


class _Item(BaseModel):
    n: int


def stored_job(url: str, name: str, queue: str) -> None:
    """One ready job `name` on `queue` in the database at `url`, enqueued by a registry of its
    own: the CLI run after it has no --app that declares it (a store a worker elsewhere fills)."""

    async def enqueue() -> None:
        registry = JobRegistry()

        async def body(i: _Item, ctx: JobContext) -> None: ...

        declared = job(registry=registry, name=name, queue=queue, idempotency_key=_key)(body)
        jobs = await connect(url, registry=registry, migrate=True)
        try:
            await jobs.enqueue(declared, _Item(n=1))
        finally:
            await jobs.close()

    anyio.run(enqueue)


def _key(item: _Item) -> str:
    return str(item.n)
