"""Durable steps (rule 6): a hash per run, fenced on the holder's token, in first-save order."""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.base import StepWrite
from engine.drivers.damage import UNDECODABLE, UndecodableRow
from engine.drivers.redis.store import Store, Write
from engine.drivers.redis.transitions import held_by
from engine.errors import JobsError
from schemas.steps import StepRecord


async def ordered_steps(
    store: Store, run_id: str, job_id: str = ""
) -> list[tuple[int, int, StepRecord]]:
    """The run's steps as (started_at, first-save position, step), in that order. A value that
    is not a step is UndecodableRow naming `job_id` (the run where the caller knows no job)."""
    pipe = store.client.pipeline(transaction=False)
    pipe.hgetall(store.keys.steps(run_id))
    pipe.hgetall(store.keys.step_positions(run_id))
    records, positions = await pipe.execute()
    rows = [
        (step.started_at, int(positions.get(name, 0)), step)
        for name, step in ((n, _step(t, n, run_id, job_id)) for n, t in records.items())
    ]
    rows.sort(key=lambda t: (t[0], t[1]))
    return rows


def _step(text: str, name: str, run_id: str, job_id: str) -> StepRecord:
    try:
        return StepRecord.model_validate_json(text)
    except UNDECODABLE as exc:
        raise UndecodableRow(job_id, exc, "step", name, run_id=run_id) from exc


async def load_steps(store: Store, run_id: str, job_id: str = "") -> list[StepRecord]:
    return [t[2] for t in await ordered_steps(store, run_id, job_id)]


async def save_steps_many(store: Store, writes: Sequence[StepWrite]) -> list[JobsError | None]:
    keys = store.keys
    planned = []
    for write in writes:
        w = Write()
        w.guard_exists(keys.job(write.job_id))  # first: -1 answers a job no longer stored
        held_by(w, keys, write.job_id, write.token)
        run_id = write.step.run_id
        w.op(
            "!step",
            keys.steps(run_id),
            keys.step_positions(run_id),
            write.step.name,
            write.step.model_dump_json(),
        )
        w.op("!changed", keys.prefix)
        planned.append(w)
    results = await store.apply_many(planned)
    lost = [(w.job_id, r == -1) for w, r in zip(writes, results, strict=True) if r < 0]
    refused = iter(await store.lost.refusals(lost))
    return [next(refused) if result < 0 else None for result in results]
