"""Steps live in their job's document, so a step write is fenced by the same compare-and-set
that checks the holder's token: a stale holder cannot write over a run that moved on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engine.drivers.base import StepWrite
from engine.drivers.nats.claims import held
from engine.drivers.nats.codec import JobDoc
from engine.drivers.nats.connection import SETTLE_ROOM, TooLarge
from engine.drivers.nats.store import Store
from engine.errors import JobsError
from schemas.steps import StepRecord


async def load_steps(store: Store, run_id: str) -> list[StepRecord]:
    key = store.replica.job_of_run(run_id)
    if key is None:
        await store.replica.sync()
        key = store.replica.job_of_run(run_id)
    if key is None:
        return []
    got = await store.fresh_doc(key.removeprefix("job."))
    if got is None:
        return []
    return sorted(got[1].run_steps(run_id), key=lambda s: s.started_at)


async def save_steps_many(store: Store, writes: Sequence[StepWrite]) -> list[JobsError | None]:
    by_job: dict[str, list[int]] = {}
    for index, write in enumerate(writes):
        by_job.setdefault(write.job_id, []).append(index)
    outcomes: list[JobsError | None] = [None] * len(writes)

    async def save(job_id: str, indexes: list[int]) -> None:
        mine = [writes[i] for i in indexes]

        def put(doc: JobDoc | None) -> JobDoc:
            current = held(doc, job_id, mine[0].token)
            for write in mine:
                current = current.with_step(write.step)
            return current

        try:
            await store.change_doc(job_id, put, room=SETTLE_ROOM)
        except JobsError as exc:
            for i in indexes:
                outcomes[i] = exc
        except TooLarge as exc:
            # The job's value cannot hold these steps: refused as any output the store refuses.
            for i in indexes:
                outcomes[i] = exc.output_refused(job_id, f'step "{writes[i].step.name}"')

    await asyncio.gather(*(save(job, idx) for job, idx in by_job.items()))
    return outcomes
