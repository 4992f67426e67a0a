"""An input the NATS driver accepts runs: the bound it names keeps room in the job's one KV
value for the job's steps and output as well as for the settles after them. An input at the
bound used to leave no room at all, so the job's first step of one byte failed it for good
(JOB_OUTPUT_INVALID, with a fix, "return a smaller value", that could not help)."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Worker, job
from engine.errors import InvalidArgumentError

pytest.importorskip("nats", reason="the nats extra is not installed")

# Past what one NATS value holds at the default max_payload (1 MiB), within the engine's bound.
PAST_THE_BOUND = 1_040_000
# What the job's steps and output add: small, as most are.
STEP_BYTES = 1_000


class Big(BaseModel):
    p: str
    n: int = 0


async def test_an_input_at_the_bound_runs_its_steps_and_settles(
    jobs: Jobs, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def big(input: Big, ctx: JobContext) -> str:
        for n in range(3):
            await ctx.step.run(f"s{n}", lambda: "s" * STEP_BYTES)
        return "o" * STEP_BYTES

    with anyio.fail_after(30), pytest.raises(InvalidArgumentError) as caught:
        await jobs.enqueue(big, {"p": "P" * PAST_THE_BOUND})
    bound = (caught.value.details or {})["bound"]
    assert isinstance(bound, int)
    filler = len('{"p":"","n":1}')
    result = await jobs.enqueue(big, {"p": "P" * (bound - filler), "n": 1})
    with anyio.fail_after(60):
        await Worker(jobs).run_until_idle()
    record = await jobs.get(result.id)
    assert (record.state, record.last_error) == ("done", None)
