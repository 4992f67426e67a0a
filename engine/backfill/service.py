"""`Backfills`: dry run, write, and list — what the CLI, the MCP server and app code call.

svc = Backfills(jobs)                     # environment from MCP_JOBS_ENV, else development
plan = await svc.dry_run("normalize_emails")    # counts and samples; writes nothing anywhere
start = await svc.write("normalize_emails")     # enqueues the durable pass
states = await svc.list(pending_only=True)
page = await svc.runs_page("normalize_emails", limit=20)   # its ledger, newest first, paged

The ledger is kept forever (it is the record of what ran), so no read here loads it whole:
`list` and `pending` read, per declared backfill, its newest run and its newest completed one
(one index descent each on a SQL driver); `runs_page` pages one backfill's rows.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from engine import bounds
from engine.backfill.app_calls import app_call
from engine.backfill.declare import BackfillDefinition
from engine.backfill.errors import (
    BackfillMigrationPendingError,
    BackfillPendingError,
    BackfillRunningError,
)
from engine.backfill.gate import (
    check_environment,
    check_environment_case,
    check_requires,
    resolve_environment,
    write_verdict,
)
from engine.backfill.ledger import (
    DEFAULT_RUNS_PAGE,
    MAX_RUNS_PAGE,
    RunsPage,
    as_settled,
    parse_runs_cursor,
    runs_cursor,
)
from engine.backfill.pass_job import PASS_JOB, PassInput, install_pass
from engine.backfill.pending import pending_given
from engine.backfill.registry import BackfillRegistry, default_backfills
from engine.declare import JobDefinition
from engine.drivers.base import BACKFILL_LEDGER, require
from engine.errors import InvalidArgumentError, JobNotFoundError, JobsError
from engine.fix_lines import CommandContext, fixes_written
from engine.ids import new_id
from engine.run_job import error_line
from schemas.backfill import BackfillPlan, BackfillRun, BackfillStart, BackfillState
from schemas.jobs import JobRecord
from schemas.states import BACKFILL_STATUSES, LIVE_STATES, BackfillStatus

if TYPE_CHECKING:
    from engine.client import Jobs

# How many keys of the first batch a dry run shows.
SAMPLE_KEYS = 10
LIVE_PASS_PAGE = 1000  # pass jobs read per page when looking for the live ones


class Backfills:
    """The backfills of one registry, operated through one jobs client in one environment."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        registry: BackfillRegistry | None = None,
        environment: str | None = None,
    ) -> None:
        if registry is not None and not isinstance(registry, BackfillRegistry):
            raise InvalidArgumentError("registry", registry, "a BackfillRegistry() or None")
        self.jobs = jobs
        self.ledger = require(jobs.driver, BACKFILL_LEDGER)
        self.registry = registry if registry is not None else default_backfills
        self.environment = resolve_environment(environment, declared=self.registry)
        self._environment_given = environment is not None
        # The worker runs passes from `jobs.registry`, so the pass must be declared there: once
        # a backfill is, so that a worker whose app declares none does not serve their queue.
        self.registry.when_declared(jobs.registry, self._install_pass)

    @property
    def fix_context(self) -> CommandContext | None:
        """Its client's (`Jobs.fix_context`): an error leaving a method here carries the
        client's database and app in its `mcp-jobs …` fix, as the client's own do."""
        return self.jobs.fix_context

    def _install_pass(self) -> JobDefinition[Any]:
        return install_pass(self.jobs.registry, self.registry)

    def _here(self) -> str:
        """This service's environment, refused when it spells a declared one in another case:
        checked on each call, as the app may declare its backfills after this was built."""
        check_environment_case(self.environment, self.registry, explicit=self._environment_given)
        return self.environment

    # --- reads ---------------------------------------------------------------------------------

    @fixes_written
    async def live_passes(self) -> dict[str, JobRecord]:
        """The live pass job of each backfill name that has one."""
        live: dict[str, JobRecord] = {}
        cursor: str | None = None
        while True:
            page = await self.jobs.list(
                state=LIVE_STATES, name=PASS_JOB, limit=LIVE_PASS_PAGE, cursor=cursor
            )
            for record in page.jobs:
                name = record.input.get("name")
                if isinstance(name, str):
                    live.setdefault(name, record)
            # A page may hold only rows that cannot be read (`page.damaged`); the cursor still
            # moves past them, and a live pass may lie beyond.
            if page.next_cursor is None or not (page.jobs or page.damaged):
                return live
            cursor = page.next_cursor

    @fixes_written
    async def runs(self, name: str | None = None) -> builtins.list[BackfillRun]:
        """Ledger rows in this environment, newest first (every run, forced reruns included).
        Unpaged: it costs the whole ledger, so reads that run often use `runs_page`."""
        name = bounds.optional_text("name", name, bounds.MAX_NAME_BYTES)
        return await self.ledger.backfill_runs(name, self._here())

    @fixes_written
    async def runs_page(
        self, name: str, *, limit: int = DEFAULT_RUNS_PAGE, cursor: str | None = None
    ) -> RunsPage:
        """One backfill's ledger rows in this environment, newest first: `limit` (1 to
        MAX_RUNS_PAGE) of them, older than `cursor` (a previous page's `runs_cursor`) when
        given, and the cursor for the rest. Declared or not: the ledger is the record of what
        ran. INVALID_ARGUMENT for a limit out of bounds, CURSOR_INVALID for a cursor that is
        not one."""
        name = bounds.text("name", name, bounds.MAX_NAME_BYTES)
        limit = bounds.whole("limit", limit, 1, MAX_RUNS_PAGE)
        before = parse_runs_cursor(cursor, name, "cursor") if cursor is not None else None
        found = await self.ledger.backfill_runs(name, self._here(), before=before, limit=limit + 1)
        page = found[:limit]
        more = len(found) > limit and bool(page)
        cursor = runs_cursor(page[-1]) if more else None
        return RunsPage(runs=[await self._as_seen(run) for run in page], runs_cursor=cursor)

    async def _as_seen(self, run: BackfillRun, live: JobRecord | None = None) -> BackfillRun:
        """`run` as its pass job says it ended (`ledger.as_settled`): its job read only for a
        `running` row that `live` (the live pass of its name, when known) does not hold."""
        if run.status != "running" or run.job_id is None:
            return run
        if live is not None and live.id == run.job_id:
            return run
        try:
            job = await self.jobs.get(run.job_id)
        except JobNotFoundError as gone:
            # Its pass job settled without the pass writing the row, and was pruned since: no
            # pass runs it now, and read as written it stayed `running` for good.
            return run.model_copy(
                update={"status": "failed", "error": error_line(gone.to_payload())}
            )
        except JobsError:  # unreadable: the row as written
            return run
        return as_settled(run, job)

    @fixes_written
    @fixes_written
    async def newest_run(
        self, name: str, status: BackfillStatus | None = None
    ) -> BackfillRun | None:
        """This backfill's newest ledger row here (of `status` when given): one row read."""
        name = bounds.text("name", name, bounds.MAX_NAME_BYTES)
        if status is not None and (type(status) is not str or status not in BACKFILL_STATUSES):
            expected = f"one of {', '.join(BACKFILL_STATUSES)}, or None"
            raise InvalidArgumentError("status", status, expected)
        found = await self.ledger.backfill_runs(name, self.environment, status=status, limit=1)
        return found[0] if found else None

    async def _last_runs(
        self, definition: BackfillDefinition
    ) -> tuple[BackfillRun | None, BackfillRun | None]:
        """(the newest run here, the newest completed run here): at most two rows read."""
        last = await self.newest_run(definition.name)
        if last is None or last.status == "completed":
            return last, last
        return last, await self.newest_run(definition.name, "completed")

    @fixes_written
    async def pending(self) -> builtins.list[BackfillPendingError]:
        """Declared here and not completed here, as findings with the line that runs each.
        Reads one ledger row per backfill declared for this environment."""
        found: builtins.list[BackfillPendingError] = []
        self._here()
        for definition in self.registry:
            if not definition.applies_to(self.environment):
                continue
            completed = await self.newest_run(definition.name, "completed")
            if pending_given(definition, self.environment, completed):
                found.append(BackfillPendingError(definition.name, self.environment))
        return found

    # --- dry run -------------------------------------------------------------------------------

    @fixes_written
    async def dry_run(self, name: str, *, force: bool = False) -> BackfillPlan:
        """Count the rows, size the batches, sample the first batch's keys, and say what a write
        would answer. Calls only the declaration's `requires`, `count` and `read`; writes
        nothing to the app's data, the jobs tables or the ledger.

        Raises BACKFILL_UNKNOWN, BACKFILL_MIGRATION_PENDING (nothing can be counted before the
        precondition holds) and BACKFILL_DECLARATION_INVALID (a count, read or key that the pass
        could not use). The other refusals come back as `blocked_by`.
        """
        definition = self.registry.require(bounds.text("name", name, bounds.MAX_NAME_BYTES))
        force = bounds.flag("force", force)
        self._here()
        try:
            await _requires(definition)
        except BackfillMigrationPendingError:
            check_environment(definition, self.environment)  # what a write would say first
            raise
        rows, sample_keys = await self._probe(definition)
        verdict = await self._verdict(definition, force=force)
        return BackfillPlan(
            name=definition.name,
            environment=self.environment,
            checksum=definition.checksum,
            rows_remaining=rows,
            batch_size=definition.batch_size,
            batches=definition.batches_for(rows),
            sample_keys=sample_keys,
            would_run=verdict is None,
            blocked_by=verdict.to_payload() if verdict is not None else None,
            force=force,
        )

    @staticmethod
    async def _probe(definition: BackfillDefinition) -> tuple[int, builtins.list[Any]]:
        """(the rows to do, the first batch's sample keys): `count`, `read` and `key` called as
        the pass calls them, so a value the pass could not use is refused before it starts."""
        name, limit = definition.name, min(definition.batch_size, SAMPLE_KEYS)
        with app_call(name, "count", definition.count, ""):
            rows = await definition.count_rows()
        with app_call(name, "read", definition.read, f"None, {limit}"):
            sample = await definition.read_batch(None, limit)
        with app_call(name, "key", definition.key, None):
            return rows, [definition.key_of(row) for row in sample[:SAMPLE_KEYS]]

    async def _verdict(self, definition: BackfillDefinition, *, force: bool) -> JobsError | None:
        completed = await self.newest_run(definition.name, "completed")
        live = (await self.live_passes()).get(definition.name)
        return write_verdict(
            definition,
            self.environment,
            completed=completed,
            live_job_id=live.id if live is not None else None,
            force=force,
        )

    # --- write ---------------------------------------------------------------------------------

    @fixes_written
    async def check_write(self, name: str, force: bool = False) -> None:
        """Raise what `write` would answer now, and start nothing."""
        definition = self.registry.require(bounds.text("name", name, bounds.MAX_NAME_BYTES))
        await self._check(definition, bounds.flag("force", force))

    async def _check(self, definition: BackfillDefinition, force: bool) -> None:
        check_environment(definition, self._here())
        await _requires(definition)
        # What the dry run checks, so no pass starts that would only fail in the worker.
        await self._probe(definition)
        verdict = await self._verdict(definition, force=force)
        if verdict is not None:
            raise verdict

    @fixes_written
    async def write(
        self,
        name: str,
        force: bool = False,
        actor: str | None = None,
        traceparent: str | None = None,
    ) -> BackfillStart:
        """Enqueue the pass as a durable job, after the gate: BACKFILL_UNKNOWN,
        BACKFILL_ENVIRONMENT, BACKFILL_MIGRATION_PENDING, BACKFILL_DECLARATION_INVALID (what the
        dry run refuses of count, read and key), BACKFILL_RUNNING, BACKFILL_APPLIED (unless
        `force`). The pass writes its own ledger row, `run_id`, when a worker starts it.
        `traceparent` parents the pass (else the current span's, as `Jobs.enqueue`).
        """
        definition = self.registry.require(bounds.text("name", name, bounds.MAX_NAME_BYTES))
        force = bounds.flag("force", force)
        actor = bounds.optional_actor("actor", actor)
        await self._check(definition, force)
        run_id = new_id()
        result = await self.jobs.enqueue(
            self._install_pass(),
            PassInput(
                name=definition.name, run_id=run_id, environment=self.environment, force=force
            ),
            enqueued_by=actor,
            traceparent=traceparent,
        )
        if result.deduped:
            # Another write won the race since the check above; its pass holds the name.
            raise BackfillRunningError(definition.name, result.id)
        return BackfillStart(
            name=definition.name,
            environment=self.environment,
            job_id=result.id,
            run_id=run_id,
            deduped=False,
        )

    # --- list ----------------------------------------------------------------------------------

    @fixes_written
    async def list(self, pending_only: bool = False) -> builtins.list[BackfillState]:
        """Every declared backfill with its ledger state here, by name; `pending_only` keeps
        the ones declared for this environment and not completed in it."""
        pending_only = bounds.flag("pending_only", pending_only)
        self._here()
        live = await self.live_passes()
        states: builtins.list[BackfillState] = []
        for definition in self.registry:
            last, completed = await self._last_runs(definition)
            pending = pending_given(definition, self.environment, completed)
            if pending_only and not pending:
                continue
            holder = live.get(definition.name)
            last = await self._as_seen(last, holder) if last is not None else None
            states.append(self._state(definition, last, pending, holder))
        return states

    @fixes_written
    async def state(self, name: str) -> BackfillState:
        """One declared backfill's state here, as `list` shows it. BACKFILL_UNKNOWN otherwise."""
        definition = self.registry.require(bounds.text("name", name, bounds.MAX_NAME_BYTES))
        self._here()
        last, completed = await self._last_runs(definition)
        pending = pending_given(definition, self.environment, completed)
        live = (await self.live_passes()).get(definition.name)
        last = await self._as_seen(last, live) if last is not None else None
        return self._state(definition, last, pending, live)

    @staticmethod
    def _state(
        definition: BackfillDefinition,
        last: BackfillRun | None,
        pending: bool,
        live: JobRecord | None,
    ) -> BackfillState:
        return BackfillState(
            name=definition.name,
            description=definition.description,
            environments=builtins.list(definition.environments),
            batch_size=definition.batch_size,
            rate=definition.rate,
            checksum=definition.checksum,
            pending=pending,
            last_run=last,
            live_job_id=live.id if live is not None else None,
        )


async def _requires(definition: BackfillDefinition) -> None:
    """`check_requires`, with what the app's `requires()` raises answered as its own failure."""
    with app_call(definition.name, "requires", definition.requires, ""):
        await check_requires(definition)


__all__ = ["SAMPLE_KEYS", "Backfills"]
