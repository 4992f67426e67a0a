"""A fix that builds a client again (DRIVER_CLOSED's `connect(url)`) is this client's own call:
its database, and its registry where it was given one, which the closed `jobs` still holds.
`connect(url)` was a slot, and a client built without the registry knew none of the jobs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from engine.errors import JobsError


class Ping(BaseModel):
    n: int


async def test_a_closed_clients_fix_builds_it_again_with_its_registry(tmp_path: Path) -> None:
    registry = JobRegistry()

    @job(name="ping", idempotency_key=lambda i: str(i.n), registry=registry)
    async def ping(data: Ping, ctx: JobContext) -> None: ...

    url = f"sqlite:///{tmp_path}/jobs.db"
    jobs = await connect(url, registry=registry, migrate=True)
    await jobs.close()
    with pytest.raises(JobsError) as refused:
        await jobs.enqueue("ping", {"n": 1})
    assert refused.value.code == "DRIVER_CLOSED"
    fix = refused.value.fix
    assert fix == f"jobs = await connect({url!r}, registry=jobs.registry)"
    scope = {"jobs": jobs, "connect": connect}
    await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)
    again = scope["jobs"]
    try:
        await again.enqueue("ping", {"n": 1})  # the registry came along: the job is known
        assert len((await again.list()).jobs) == 1
    finally:
        await again.close()


async def test_a_client_of_the_default_registry_is_built_again_without_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    jobs = await connect(url, migrate=True)
    await jobs.close()
    with pytest.raises(JobsError) as refused:
        await jobs.list()
    assert refused.value.fix == f"jobs = await connect({url!r})"
