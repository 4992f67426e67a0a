"""An id cut short (an agent copying the first 20 digits): JOB_NOT_FOUND names the one job whose
id begins so, in the tenant asked, and the call mended with its whole id; text that begins
several ids, or only another tenant's, is left as it was."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, job
from engine.errors import JobNotFoundError


class Ping(BaseModel):
    n: int


@pytest.fixture
def pings(registry: JobRegistry) -> None:
    @job(name="ping", idempotency_key=lambda i: str(i.n), registry=registry)
    async def ping(data: Ping, ctx: JobContext) -> None: ...


@pytest.mark.usefixtures("pings")
async def test_the_one_job_an_id_cut_short_begins_is_named_and_the_call_mended(
    jobs: Jobs,
) -> None:
    one = (await jobs.enqueue("ping", {"n": 1})).id
    two = (await jobs.enqueue("ping", {"n": 2})).id
    cut = next(n for n in range(12, 32) if one[:n] != two[:n])
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.get(one[:cut])
    assert refused.value.meant_id == one
    assert f"the one job whose id begins {one[:cut]} is {one}" in refused.value.cause
    assert f'jobs.get("{one}")' in refused.value.fix
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.cancel(f" {one[:cut].upper()} ")  # blanks and capitals set aside too
    assert refused.value.meant_id == one
    assert (await jobs.get(one)).state == "ready"  # nothing done on a refusal


@pytest.mark.usefixtures("pings")
async def test_text_beginning_several_ids_or_none_is_left_as_it_was(jobs: Jobs) -> None:
    one = (await jobs.enqueue("ping", {"n": 1})).id
    two = (await jobs.enqueue("ping", {"n": 2})).id
    shared = next(n for n in range(32, 0, -1) if one[:n] == two[:n])
    if shared >= 8:  # made in one instant: the start both share names no one job
        with pytest.raises(JobNotFoundError) as refused:
            await jobs.get(one[:shared])
        assert refused.value.meant_id is None
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.get("f" * 20)  # begins no id
    assert refused.value.meant_id is None
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.get(one[:7])  # too short to look up
    assert refused.value.meant_id is None


async def test_another_tenants_job_is_not_found_by_its_start(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(name="ping", idempotency_key=lambda i: str(i.n), registry=registry)
    async def ping(data: Ping, ctx: JobContext) -> None: ...

    theirs = (await jobs.enqueue("ping", {"n": 1}, tenant_id="acme")).id
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.get(theirs[:24], tenant_id="globex")
    assert refused.value.meant_id is None and theirs not in refused.value.cause
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.get(theirs[:24], tenant_id="acme")
    assert refused.value.meant_id == theirs
