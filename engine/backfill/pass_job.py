"""The pass: one generic durable job that sweeps one backfill, one step per batch.

Each batch (read after the cursor, handle, record) is a `ctx.step.run` step, so its result — the
cursor it reached — is persisted before the next batch starts. A crash, a lost lease or a retry
replays the completed batches from their stored results without calling `read` or `handle`
again, and carries on from the last stored cursor (rules 6 and 13).

The pass is the ONLY writer of its run's ledger row: it creates the row when its first step body
runs, updates it after every batch, and settles it `completed` or `failed`. A copy that lost its
lease is stopped by the fenced step write before it reaches the ledger, and never marks the row.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict

from engine.backfill.declare import BackfillDefinition
from engine.backfill.errors import BackfillDeclarationInvalidError, BackfillStalledError
from engine.backfill.gate import check_pass_environment, check_requires
from engine.backfill.ledger import Progress
from engine.backfill.rate import Pacer
from engine.backfill.registry import BackfillRegistry, default_backfills
from engine.context import JobContext
from engine.declare import JobDefinition, JobRegistry, default_registry, job
from engine.drivers.base import Driver
from engine.errors import JobCancelledError, JobsError, JobSlotLostError
from engine.internal_jobs import PASS_JOB
from engine.retry import Retry
from engine.run_job import error_line, failure_text
from schemas.states import BackfillStatus

logger = logging.getLogger("mcp_jobs.backfill")

PASS_QUEUE = "backfills"
# A handler failure is usually the app's database being briefly unhappy: a few spaced retries
# resume from the cursor, then the pass dead-letters with the handler's error for a human.
PASS_RETRY = Retry(attempts=5, backoff="exponential", base_delay=30.0, max_delay=1800.0)


def pass_key(name: str) -> str:
    """The pass's idempotency key: one live pass per backfill name."""
    return f"backfill:{name}"


class PassInput(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    # The ledger run this pass writes; chosen by the write that enqueued it.
    run_id: str
    # The environment the write was gated for, which the ledger row records.
    environment: str
    force: bool = False


class _Sweep:
    """One attempt of one pass: replays stored batches, runs the rest, keeps the ledger."""

    def __init__(
        self, definition: BackfillDefinition, input: PassInput, ctx: JobContext, driver: Driver
    ) -> None:
        self.definition = definition
        self.input = input
        self.ctx = ctx
        self.driver = driver
        self.pacer = Pacer(definition.rate, ctx.clock)
        self.progress: Progress | None = None
        # False while this attempt is only replaying stored steps; set by the first step body
        # that really runs, which is when the ledger row is (re)marked running.
        self.live = False
        self.step_ran = False

    def _now(self) -> int:
        return self.ctx.clock.now_ms()

    async def save(
        self, status: BackfillStatus, *, finished_at: int | None = None, error: str | None = None
    ) -> None:
        assert self.progress is not None
        await self.driver.backfill_save(
            self.progress.row(
                status,
                checksum=self.definition.checksum,
                finished_at=finished_at,
                error=error,
            )
        )

    async def _go_live(self) -> None:
        self.step_ran = True
        if not self.live:
            self.live = True
            await self.save("running")

    # --- step bodies: run once per run, never on replay -----------------------------------------

    async def _start(self) -> dict[str, Any]:
        await check_requires(self.definition)
        total = await self.definition.count_rows()
        started = self._now()
        self.progress = Progress(
            run_id=self.input.run_id,
            name=self.definition.name,
            environment=self.input.environment,
            job_id=self.ctx.job_id,
            started_at=started,
            rows_total=total,
        )
        await self._go_live()
        return {"started_at": started, "rows_total": total}

    async def _batch(self, after: Any) -> dict[str, Any]:
        await self._go_live()
        assert self.progress is not None
        at = self._now()
        definition = self.definition
        rows = await definition.read_batch(after, definition.batch_size)
        if not rows:
            return {"at": at, "rows": 0, "cursor": after, "rows_done": self.progress.rows_processed}
        first = definition.key_of(rows[0])
        last = definition.key_of(rows[-1])
        if last is None or last == after:
            # A read that ignores its cursor would hand the same rows over forever.
            raise BackfillDeclarationInvalidError(
                definition.name,
                "read(after, limit)",
                f"a batch ending at the cursor {after!r} it was given",
                "the rows with key > after, in key order (keyset paging)",
            )
        await definition.handle(rows)
        done = self.progress.rows_processed + len(rows)
        total = self.progress.rows_total
        return {
            "at": at,
            "rows": len(rows),
            "first": first,
            "cursor": last,
            "rows_done": done,
            "rows_remaining": None if total is None else max(0, total - done),
        }

    async def _finish(self) -> dict[str, Any]:
        await self._go_live()
        assert self.progress is not None
        remaining = await self.definition.count_rows()
        if remaining > 0:
            raise BackfillStalledError(
                self.definition.name, remaining, self.progress.rows_processed
            )
        return {"finished_at": self._now()}

    # --- the attempt ---------------------------------------------------------------------------

    async def _step(self, name: str, fn: Any, *args: Any) -> tuple[dict[str, Any], bool]:
        """Run (or replay) one step; also say whether its body ran in this attempt."""
        self.step_ran = False
        output: dict[str, Any] = await self.ctx.step.run(name, fn, *args)
        return output, self.step_ran

    async def run(self) -> dict[str, Any]:
        step = self.ctx.step
        # Every attempt, on whichever worker takes it: the gate ran where the write was made.
        check_pass_environment(self.definition, self.input.environment)
        begun, _ = await self._step("start", self._start)
        if self.progress is None:  # replayed: rebuild the position from the stored result
            self.progress = Progress(
                run_id=self.input.run_id,
                name=self.definition.name,
                environment=self.input.environment,
                job_id=self.ctx.job_id,
                started_at=int(begun["started_at"]),
                rows_total=begun["rows_total"],
            )
        previous_start: int | None = None
        number = 0
        while True:
            number += 1
            await self.pacer.wait(previous_start)
            out, ran = await self._step(f"batch-{number}", self._batch, self.progress.cursor)
            previous_start = int(out["at"])
            self.progress = self.progress.advanced(int(out["rows"]), out["cursor"])
            if ran:
                await self.save("running")  # progress readable while the pass runs
            if out["rows"] == 0:
                break
        done = await step.run("finish", self._finish)
        await self.save("completed", finished_at=int(done["finished_at"]))
        return {
            "backfill": self.definition.name,
            "run_id": self.input.run_id,
            "environment": self.input.environment,
            "rows_processed": self.progress.rows_processed,
            "batches": self.progress.batches,
            "cursor": self.progress.cursor,
        }

    async def fail(self, exc: Exception) -> None:
        """Leave the row `failed` with the cursor where the pass stopped. The next attempt, if
        the retry policy allows one, marks it running again as soon as it does any work."""
        if self.progress is None:
            now = self._now()
            self.progress = Progress(
                run_id=self.input.run_id,
                name=self.definition.name,
                environment=self.input.environment,
                job_id=self.ctx.job_id,
                started_at=now,
            )
        try:
            await self.save("failed", finished_at=self._now(), error=failure_text(exc))
        except JobsError as ledger_exc:
            # The pass's own error is the one to report; the row catches up on the next attempt.
            logger.warning("backfill %s: ledger not updated: %s", self.definition.name, ledger_exc)

    async def interrupted(self) -> None:
        """The body was cancelled. Only an operator's cancel settles the run, so only then is the
        row marked: a drain hands the job back and a lost lease means another worker carries on,
        and in both the row stays `running` for the pass that continues it."""
        try:
            record = await self.driver.get(self.ctx.job_id)
            if record.state == "cancelled" and self.progress is not None:
                await self.save(
                    "failed",
                    finished_at=self._now(),
                    error=error_line(JobCancelledError(self.ctx.job_id).to_payload()),
                )
        except JobsError as exc:
            logger.warning("backfill %s: ledger not updated: %s", self.definition.name, exc)


class BackfillPass:
    """The pass job's body, bound to the registry it finds declarations in."""

    def __init__(self, backfills: BackfillRegistry) -> None:
        self.backfills = backfills

    async def run(self, input: PassInput, ctx: JobContext) -> dict[str, Any]:
        """Sweep one declared backfill in durable batches and record the run in the ledger."""
        definition = self.backfills.require(input.name)
        if ctx.driver is None:
            raise RuntimeError("the backfill pass needs JobContext.driver (set by run_job)")
        sweep = _Sweep(definition, input, ctx, ctx.driver)
        try:
            return await sweep.run()
        except JobSlotLostError:
            raise  # another worker holds the run now; its row is not ours to mark
        except Exception as exc:
            await sweep.fail(exc)
            raise
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await sweep.interrupted()
            raise


def install_pass(registry: JobRegistry, backfills: BackfillRegistry) -> JobDefinition[Any]:
    """Register the pass job in `registry`, bound to `backfills`, unless it already is."""
    existing = registry.get(PASS_JOB)
    if existing is not None:
        bound = getattr(existing.fn, "__self__", None)
        if isinstance(bound, BackfillPass) and bound.backfills is backfills:
            return existing
    runner = BackfillPass(backfills)
    return job(
        name=PASS_JOB,
        queue=PASS_QUEUE,
        idempotency_key=lambda i: pass_key(i.name),
        retry=PASS_RETRY,
        registry=registry,
    )(runner.run)


# A worker that imports an app's backfills runs their passes with the default registries.
install_pass(default_registry, default_backfills)


__all__ = [
    "PASS_JOB",
    "PASS_QUEUE",
    "PASS_RETRY",
    "BackfillPass",
    "PassInput",
    "install_pass",
    "pass_key",
]
