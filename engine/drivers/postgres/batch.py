"""The set-wise writes over PostgreSQL: `ack_many` and `save_steps_many` as one statement each,
and the batched step read. engine/settle.py groups concurrent callers' items into these calls.

A statement the server refuses for what one item carries (a data error) is sent again in halves
(`flush_apart`), so one item's bad value fails only that item: its batch-mates commit. While
the server cannot be reached, a write is held and retried (`Retrier.resilient`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from engine.clock import Clock
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.faults import data_error, describe_refusal
from engine.errors import JobOutputInvalidError, JobsError, JobSlotLostError
from engine.settle import GroupCommit
from engine.storable import find_unstorable
from schemas.steps import StepRecord

W = TypeVar("W")
Outcomes = list[JobsError | None]


async def flush_apart(
    batch: Sequence[W],
    write: Callable[[Sequence[W]], Awaitable[Outcomes]],
    refusal: Callable[[BaseException], BaseException | None],
    refused: Callable[[W, BaseException], JobsError],
) -> Outcomes:
    """`write(batch)`; when it raises an error in which `refusal` finds a refusal of what the
    statement carried (None: anything else, which propagates), the batch is written again in
    halves until each refused item stands alone, and that item's outcome is `refused(item,
    refusal)`. `write` must commit all of a batch or none of it (one statement)."""
    try:
        return await write(batch)
    except Exception as exc:
        found = refusal(exc)
        if found is None:
            raise
        if len(batch) == 1:
            return [refused(batch[0], found)]
    middle = len(batch) // 2
    # One half after the other: what a half committed stays settled if a later one fails.
    first = await flush_apart(batch[:middle], write, refusal, refused)
    return first + await flush_apart(batch[middle:], write, refusal, refused)


def _refused_output(
    job_id: str, origin: str, output: Any, refusal: BaseException
) -> JobOutputInvalidError:
    """The error for one write the server (or the encoder) refused on its own: where its output
    breaks the engine's rule, or else the reason. Terminal: sent again, it fails again."""
    bad = find_unstorable(output)
    path, reason = (bad.path, bad.reason) if bad is not None else ("$", describe_refusal(refusal))
    error = JobOutputInvalidError(job_id, origin, path, reason)
    error.__cause__ = refusal
    return error


def _refused_ack(write: AckWrite, refusal: BaseException) -> JobsError:
    return _refused_output(write.job_id, "the job", write.output, refusal)


def _refused_step(write: StepWrite, refusal: BaseException) -> JobsError:
    return _refused_output(write.job_id, f'step "{write.step.name}"', write.step.output, refusal)


def _json_array(elements: Sequence[str]) -> str:
    return "[" + ",".join(elements) + "]"


def _encoded(
    writes: Sequence[W],
    encode: Callable[[W], str],
    refused: Callable[[W, BaseException], JobsError],
) -> tuple[list[tuple[W, str]], dict[int, JobsError]]:
    """Each write as an element of its statement's JSON array; one that cannot be encoded fails
    on its own (its index → error) and stays out of the statement."""
    encoded: list[tuple[W, str]] = []
    failed: dict[int, JobsError] = {}
    for index, write in enumerate(writes):
        try:
            encoded.append((write, encode(write)))
        except (TypeError, ValueError) as exc:
            failed[index] = refused(write, exc)
    return encoded, failed


def _merged(count: int, failed: dict[int, JobsError], written: Outcomes) -> Outcomes:
    """The outcomes of `count` writes: the encoding failures in their places, the rest in order."""
    if not failed:
        return written
    rest = iter(written)
    return [failed[i] if i in failed else next(rest) for i in range(count)]


class SetWrites:
    """`ack_many`, `save_steps_many` and the batched `load_steps` over `db`."""

    def __init__(self, db: Connections, clock: Clock) -> None:
        self.db = db
        self.clock = clock
        self._loads: GroupCommit[str, list[StepRecord]] = GroupCommit(
            self._load_many, kind="postgres"
        )

    async def ack_many(self, writes: Sequence[AckWrite]) -> Outcomes:
        encoded, failed = _encoded(writes, _ack_row, _refused_ack)
        if not encoded:
            return _merged(len(writes), failed, [])
        written = await flush_apart(
            encoded, self._ack_statement, data_error, lambda e, r: _refused_ack(e[0], r)
        )
        return _merged(len(writes), failed, written)

    async def _ack_statement(self, batch: Sequence[tuple[AckWrite, str]]) -> Outcomes:
        acks = _json_array([row for _, row in batch])
        q = self.db.q

        async def once(first: bool) -> set[tuple[str, str]]:
            async with self.db.conn() as conn:
                now = self.clock.now_ms()
                channel = self.db.changes_channel if self.db.changes_followed else None
                found = await conn.fetch(q["ack_many"], acks, now, channel)
                done = {(row["id"], row["token"]) for row in found}
                if not first and len(done) < len(batch):
                    # The try whose connection broke may have committed some of these.
                    ids = [write.job_id for write, _ in batch]
                    tokens = [write.token for write, _ in batch]
                    settled = await conn.fetch(q["settled_many"], ids, tokens)
                    done |= {(row["id"], row["token"]) for row in settled if row["state"] == "done"}
            return done

        done = await self.db.retry.resilient(once)
        return [
            None if (w.job_id, w.token) in done else JobSlotLostError(w.job_id) for w, _ in batch
        ]

    async def save_steps_many(self, writes: Sequence[StepWrite]) -> Outcomes:
        encoded, failed = _encoded(writes, _step_row, _refused_step)
        if not encoded:
            return _merged(len(writes), failed, [])
        written = await flush_apart(
            encoded, self._step_statement, data_error, lambda e, r: _refused_step(e[0], r)
        )
        return _merged(len(writes), failed, written)

    async def _step_statement(self, batch: Sequence[tuple[StepWrite, str]]) -> Outcomes:
        steps = _json_array([row for _, row in batch])
        q = self.db.q

        async def once(first: bool) -> set[tuple[str, str]]:
            # An upsert of the same values: safe to repeat after a broken connection.
            async with self.db.conn() as conn:
                found = await conn.fetch(q["save_steps"], steps)
            return {(row["run_id"], row["name"]) for row in found}

        written = await self.db.retry.resilient(once)
        return [
            None if (w.step.run_id, w.step.name) in written else JobSlotLostError(w.job_id)
            for w, _ in batch
        ]

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        # Batched like the writes: every job starting at once reads its steps in one statement.
        return await self._loads.submit(run_id, run_id)

    async def _load_many(self, run_ids: Sequence[str]) -> list[list[StepRecord]]:
        wanted = list(run_ids)
        found = await self.db.idempotent(lambda c: c.fetch(self.db.q["load_steps_many"], wanted))
        by_run: dict[str, list[StepRecord]] = {run_id: [] for run_id in wanted}
        for row in found:
            by_run[row["run_id"]].append(rows.step(row))
        return [by_run[run_id] for run_id in wanted]

    async def idle(self) -> None:
        """Return once no step read is in flight (a closing driver lets the last one end)."""
        await self._loads.idle()


def _ack_row(write: AckWrite) -> str:
    # A null output keeps the row's.
    return rows.json_text({"id": write.job_id, "token": write.token, "output": write.output})


def _step_row(write: StepWrite) -> str:
    step = write.step
    return rows.json_text(
        {
            "held_id": write.job_id,
            "token": write.token,
            "run_id": step.run_id,
            "name": step.name,
            "job_id": step.job_id,
            "status": step.status,
            "output": step.output,
            "error": step.error,
            "started_at": step.started_at,
            "finished_at": step.finished_at,
            "attempts": step.attempts,
        }
    )
