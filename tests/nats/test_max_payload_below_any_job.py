"""A nats-server whose max_payload is below what one job's value needs (its record, and the
room each job keeps free for its steps, output and settles) holds no job at all. An enqueue
there was refused with "send an input of at most 0 bytes of JSON", a fix no input can follow;
it now says the server holds no job and names the max_payload to set, and followed once (a
server with that max_payload) the same enqueue goes in."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from engine.errors import InvalidArgumentError
from tests.nats.max_payload_server import Serve

pytest.importorskip("nats", reason="the nats extra is not installed")

# Below a job's INPUT_ROOM (128 KiB) alone.
SMALL = 64 * 1024


class Tiny(BaseModel):
    n: int


async def _enqueue(url: str) -> str:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def tiny(input: Tiny, ctx: JobContext) -> None:
        return None

    jobs = await connect(url, registry=registry)
    try:
        return (await jobs.enqueue(tiny, {"n": 1})).id
    finally:
        await jobs.close()


@pytest.mark.slow
async def test_a_server_too_small_for_any_job_names_only_the_max_payload(serve: Serve) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        await _enqueue(serve(SMALL))
    error = refused.value
    assert "at most 0 bytes" not in str(error), str(error)
    assert "send an input" not in error.fix, error.fix
    assert "holds no job" in str(error)
    details = error.details or {}
    wanted = details.get("max_payload")
    assert isinstance(wanted, int) and wanted > SMALL
    assert error.fix == f"set max_payload: {wanted} in nats-server's config and restart it"
    # Followed once: on a server with that max_payload the same enqueue goes in.
    assert await _enqueue(serve(wanted))
