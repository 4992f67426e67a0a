"""The pass: one generic durable job that sweeps one backfill, one step per batch.

Each batch (read after the cursor, handle, record) is a `ctx.step.run` step, so its result — the
cursor it reached — is persisted before the next batch starts. A crash, a lost lease or a retry
replays the completed batches from their stored results without calling `read` or `handle`
again, and carries on from the last stored cursor (rules 6 and 13).

The pass is the ONLY writer of its run's ledger row: it creates the row when its first step body
runs, updates it after every batch, and settles it `completed` or `failed` — `failed` only once
no attempt will follow; an attempt that fails and will be retried leaves the row `running` with
its error. A copy that lost its lease is stopped by the fenced step write before it reaches the
ledger, and never marks the row; an operator's cancel settles it, with the rows really handled.

The pass job is registered only in a process that declares a backfill, so a worker of an app
with none does not serve the backfills queue. A pass whose backfill this worker does not declare
(an older deploy beside a newer one) is handed back like a job name no worker here knows (rule
7): parked, no attempt burned, for a worker that declares it — for a day at most, then it fails.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

import anyio
from pydantic import BaseModel, ConfigDict

from engine.backfill.declare import BackfillDefinition
from engine.backfill.errors import (
    BackfillDeclarationInvalidError,
    BackfillStalledError,
    BackfillUnknownError,
)
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
from engine.run_job import UNKNOWN_NAME_PARK_MS, Permanent, error_line, failure_text
from engine.steps import StepSuspension
from schemas.events import EventRecord
from schemas.states import BackfillStatus

logger = logging.getLogger("mcp_jobs.backfill")

PASS_QUEUE = "backfills"
# A handler failure is usually the app's database being briefly unhappy: a few spaced retries
# resume from the cursor, then the pass dead-letters with the handler's error for a human.
PASS_RETRY = Retry(attempts=5, backoff="exponential", base_delay=30.0, max_delay=1800.0)
# How long workers that do not declare a pass's backfill may hand it back before it fails. A
# rolling deploy is over long before; a pass no deploy can run is then a failure to read.
UNDECLARED_PATIENCE_MS = 24 * 3600 * 1000
# The events a pass leaves in its job's history (inspect_job).
NOT_DECLARED_EVENT = "backfill_not_declared"
DEFINITION_CHANGED_EVENT = "backfill_definition_changed"
# The step that keeps when a worker first handed the pass back for want of its declaration.
NOT_DECLARED_STEP = "not-declared-here"


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


def _settles(exc: Exception, ctx: JobContext) -> bool:
    """Whether the worker settles the pass on this failure (failed or dead) rather than retry
    it: what `engine.run_job` decides for a body's failure, from the same facts."""
    terminal = isinstance(exc, Permanent) or (isinstance(exc, JobsError) and not exc.retryable)
    return terminal or ctx.attempt >= ctx.max_attempts


async def _record(ctx: JobContext, driver: Driver, kind: str, data: dict[str, Any]) -> None:
    """An event in the pass job's history: where inspect_job shows what happened to it."""
    event = EventRecord(
        job_id=ctx.job_id, at=ctx.clock.now_ms(), kind=kind, tenant_id=ctx.tenant_id, data=data
    )
    try:
        await driver.record_event(event)
    except JobsError as exc:
        logger.warning("pass %s: event %s not recorded: %s", ctx.job_id, kind, exc)


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
        # The run's checksum: the declaration's when the run started, kept when a later attempt
        # runs under another (a deploy between attempts), so the row names where it began.
        self.checksum = definition.checksum
        # False while this attempt is only replaying stored steps; set by the first step body
        # that really runs, which is when the ledger row is (re)marked running.
        self.live = False
        self.step_ran = False
        # (rows, cursor) of a batch whose `handle` returned but whose step is not recorded yet:
        # a cancel that refuses that write still counts those rows as handled.
        self.unrecorded: tuple[int, Any] | None = None

    def _now(self) -> int:
        return self.ctx.clock.now_ms()

    async def save(
        self, status: BackfillStatus, *, finished_at: int | None = None, error: str | None = None
    ) -> None:
        assert self.progress is not None
        await self.driver.backfill_save(
            self.progress.row(status, checksum=self.checksum, finished_at=finished_at, error=error)
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
        return {"started_at": started, "rows_total": total, "checksum": self.checksum}

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
        self.unrecorded = (len(rows), last)
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
        self.unrecorded = None
        return output, self.step_ran

    async def _resumed(self, begun: dict[str, Any]) -> None:
        """The run began in an earlier attempt: its position and checksum come from there."""
        self.progress = Progress(
            run_id=self.input.run_id,
            name=self.definition.name,
            environment=self.input.environment,
            job_id=self.ctx.job_id,
            started_at=int(begun["started_at"]),
            rows_total=begun["rows_total"],
        )
        started = begun.get("checksum")  # absent from a run begun before it was stored
        if not isinstance(started, str) or started == self.definition.checksum:
            return
        self.checksum = started
        logger.warning(
            "backfill %s: run %s began under definition %s and resumes under %s (the "
            "declaration changed between its attempts); its ledger row keeps %s",
            self.definition.name,
            self.input.run_id,
            started,
            self.definition.checksum,
            started,
        )
        data = {
            "backfill": self.definition.name,
            "run_id": self.input.run_id,
            "started_checksum": started,
            "checksum": self.definition.checksum,
        }
        await _record(self.ctx, self.driver, DEFINITION_CHANGED_EVENT, data)

    async def _stop_if_cancelled(self) -> None:
        """Raise JOB_CANCELLED when an operator cancelled the pass: checked before each batch, so
        none starts after the cancel (the heartbeat would only stop it a beat later)."""
        try:
            record = await self.driver.get(self.ctx.job_id)
        except JobsError as exc:  # the batch's own step write is refused if it was cancelled
            logger.warning("backfill %s: cancel not checked: %s", self.definition.name, exc)
            return
        if record.state == "cancelled":
            raise JobCancelledError(self.ctx.job_id)

    async def run(self) -> dict[str, Any]:
        step = self.ctx.step
        # Every attempt, on whichever worker takes it: the gate ran where the write was made.
        check_pass_environment(self.definition, self.input.environment)
        begun, _ = await self._step("start", self._start)
        if self.progress is None:  # replayed: rebuild the position from the stored result
            await self._resumed(begun)
        assert self.progress is not None
        previous_start: int | None = None
        number = 0
        while True:
            number += 1
            await self.pacer.wait(previous_start)
            if self.live:  # replayed batches start nothing; a live one must not after a cancel
                await self._stop_if_cancelled()
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

    def _position(self) -> Progress:
        """Where the pass stopped: the rows handled, a batch not yet recorded among them."""
        if self.progress is None:
            self.progress = Progress(
                run_id=self.input.run_id,
                name=self.definition.name,
                environment=self.input.environment,
                job_id=self.ctx.job_id,
                started_at=self._now(),
            )
        if self.unrecorded is not None:
            rows, cursor = self.unrecorded
            self.progress, self.unrecorded = self.progress.advanced(rows, cursor), None
        return self.progress

    async def fail(self, exc: Exception) -> None:
        """Record the failure at the cursor where the pass stopped: `failed` when the worker
        settles the job on it, else `running` with the error, as the job is live and runs again
        (the next attempt clears the error once it does any work)."""
        self._position()
        try:
            if _settles(exc, self.ctx):
                await self.save("failed", finished_at=self._now(), error=failure_text(exc))
            else:
                await self.save("running", error=failure_text(exc))
        except JobsError as ledger_exc:
            # The pass's own error is the one to report; the row catches up on the next attempt.
            logger.warning("backfill %s: ledger not updated: %s", self.definition.name, ledger_exc)

    async def was_cancelled(self) -> bool:
        """Whether an operator cancelled the pass (a refused write says only that it is not
        ours any more: a lost lease means another worker carries on, and its row is its own)."""
        try:
            return (await self.driver.get(self.ctx.job_id)).state == "cancelled"
        except JobsError as exc:
            logger.warning("backfill %s: ledger not updated: %s", self.definition.name, exc)
            return False

    async def cancelled(self) -> None:
        """Settle the run an operator's cancel stopped: `failed` with JOB_CANCELLED, at the
        rows really handled."""
        position = self._position()
        try:
            await self.save(
                "failed",
                finished_at=self._now(),
                error=error_line(JobCancelledError(self.ctx.job_id).to_payload()),
            )
        except JobsError as exc:
            logger.warning("backfill %s: ledger not updated: %s", self.definition.name, exc)
            return
        logger.info(
            "backfill %s: pass %s cancelled by an operator; run %s settled at %d row(s)",
            self.definition.name,
            self.ctx.job_id,
            self.input.run_id,
            position.rows_processed,
        )

    async def interrupted(self) -> None:
        """The body was cancelled. Only an operator's cancel settles the run, so only then is the
        row marked: a drain hands the job back and a lost lease means another worker carries on,
        and in both the row stays `running` for the pass that continues it."""
        if await self.was_cancelled():
            await self.cancelled()


class BackfillPass:
    """The pass job's body, bound to the registry it finds declarations in."""

    def __init__(self, backfills: BackfillRegistry) -> None:
        self.backfills = backfills

    async def run(self, input: PassInput, ctx: JobContext) -> dict[str, Any]:
        """Sweep one declared backfill in durable batches and record the run in the ledger."""
        if ctx.driver is None:
            raise RuntimeError("the backfill pass needs JobContext.driver (set by run_job)")
        definition = self.backfills.get(input.name)
        if definition is None:
            await self.hand_back(input, ctx, ctx.driver)
        sweep = _Sweep(definition, input, ctx, ctx.driver)
        try:
            return await sweep.run()
        except JobCancelledError as cancel:  # seen before a batch: nothing more was started
            await sweep.cancelled()
            # Not ours to settle any more; the cause says why, for the worker's record of it.
            raise JobSlotLostError(ctx.job_id) from cancel
        except JobSlotLostError:
            # A step write refused: another worker holds the run now (its row is not ours to
            # mark), or an operator cancelled it (the row is settled here).
            if not await sweep.was_cancelled():
                raise
            await sweep.cancelled()
            raise JobSlotLostError(ctx.job_id) from JobCancelledError(ctx.job_id)
        except Exception as exc:
            await sweep.fail(exc)
            raise
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await sweep.interrupted()
            raise

    async def hand_back(self, input: PassInput, ctx: JobContext, driver: Driver) -> NoReturn:
        """This worker does not declare the pass's backfill (an older deploy beside the one that
        wrote it): park the pass, no attempt burned, for a worker that does — as run_job parks a
        job name it does not know. Past UNDECLARED_PATIENCE_MS since the first such hand-back,
        fail it (BACKFILL_UNKNOWN, terminal) and settle its ledger row."""
        unknown = BackfillUnknownError(input.name, self.backfills.names())
        now = ctx.clock.now_ms()

        async def first_handed_back() -> int:
            data = {"backfill": input.name, "run_id": input.run_id, "cause": unknown.cause}
            await _record(ctx, driver, NOT_DECLARED_EVENT, data)
            return now

        since = int(await ctx.step.run(NOT_DECLARED_STEP, first_handed_back))
        if now - since >= UNDECLARED_PATIENCE_MS:
            failed = BackfillUnknownError(
                input.name, self.backfills.names(), handed_back_ms=now - since
            )
            position = Progress(
                run_id=input.run_id,
                name=input.name,
                environment=input.environment,
                job_id=ctx.job_id,
                started_at=since,
            )
            # No declaration here to checksum: the row records the run id the write handed out.
            row = position.row("failed", checksum="", finished_at=now, error=failure_text(failed))
            await driver.backfill_save(row)
            raise failed
        logger.warning(
            "backfill %s: pass %s handed back, as this worker does not declare it (%s); a worker "
            "that does runs it",
            input.name,
            ctx.job_id,
            unknown.cause,
        )
        parked = f'backfill "{input.name}" is not declared here'
        raise StepSuspension(parked, now + UNKNOWN_NAME_PARK_MS)


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


# A worker that imports an app's backfills runs their passes with the default registries; one
# whose app declares none leaves the pass out, and so the backfills queue (its default queues
# are those of its jobs).
default_backfills.when_declared(
    default_registry, lambda: install_pass(default_registry, default_backfills)
)


__all__ = [
    "PASS_JOB",
    "PASS_QUEUE",
    "PASS_RETRY",
    "UNDECLARED_PATIENCE_MS",
    "BackfillPass",
    "PassInput",
    "install_pass",
    "pass_key",
]
