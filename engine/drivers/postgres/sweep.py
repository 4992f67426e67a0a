"""The claiming process vacuums the jobs table itself, between autovacuum's visits.

Every job leaves dead index entries behind (its claim's in the claim index, its settle's in the
running index), a claim walks the claim index from the end where they gather, and only VACUUM
deletes them; autovacuum visits once a minute, while a busy worker claims hundreds of thousands
of rows in that time. So this process reads the table's dead-row count from the statistics at
its first claim and after every `check_every` rows it claims since, and once the count reaches
`dead_rows` it runs VACUUM in the background, off the claim's path. Many workers need no
coordination beyond that: `SKIP_LOCKED` passes when another process (or autovacuum) is already
vacuuming, and the count comes from the server, so ten workers do not vacuum ten times as often.

The same check keeps the planner's statistics: a table filled faster than autovacuum's next
visit (a new deployment's first minute, a burst into a quiet queue) has none, and without them
the planner takes the claim for a few rows and sorts every live row to find 16 (8 ms a claim at
20,000 ready jobs instead of 0.3). So the sweep also runs ANALYZE once the rows changed since
the last one outnumber the rows it saw, or the table has doubled in pages since
(`stale_statistics`; the page count is exact at once, where another session's changes reach
the statistics only when it publishes them, up to seconds later).
"""

from __future__ import annotations

import asyncio
import logging
import time

from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres.connections import Connections

logger = logging.getLogger("mcp_jobs.postgres")


# Fewer changes (or pages) than this never make the statistics worth redoing: small tables plan
# alike whatever the planner believes.
ANALYZE_MIN_CHANGES = 1_000
ANALYZE_MIN_PAGES = 32


def stale_statistics(changed: int, analyzed_rows: float, pages: int, analyzed_pages: int) -> bool:
    """Whether the planner's picture of the table is off by half or more: more rows changed
    since the last ANALYZE than it saw (-1, never analyzed, counts as none seen), or twice the
    pages it saw."""
    by_changes = changed >= ANALYZE_MIN_CHANGES and changed >= analyzed_rows
    return by_changes or (pages >= ANALYZE_MIN_PAGES and pages >= 2 * analyzed_pages)


class Sweeper:
    """Keeps `db`'s jobs table vacuumed (see the module doc); `dead_rows` 0 leaves it to
    autovacuum alone."""

    def __init__(self, db: Connections, dead_rows: int) -> None:
        self._db = db
        self.dead_rows = dead_rows
        # A job leaves two dead rows (its claim's and its settle's): checking after an eighth of
        # the threshold in claimed rows reads the count about four times per vacuum.
        self.check_every = max(1, dead_rows // 8)
        self._claimed = self.check_every  # the first claim checks
        self._task: asyncio.Task[bool] | None = None
        # False once the server said this role may not vacuum the table: stop asking.
        self.enabled = dead_rows > 0
        self.checks = 0  # how many times it read the statistics
        self.analyzed = 0  # how many times it ran ANALYZE

    def claimed(self, rows: int) -> None:
        """Count rows this process claimed; start a check when enough have been."""
        if not self.enabled:
            return
        self._claimed += rows
        if self._claimed < self.check_every or self._task is not None:
            return
        self._claimed = 0
        self.checks += 1
        self._task = asyncio.get_running_loop().create_task(self._background())

    async def _background(self) -> bool:
        try:
            return await self.sweep()
        except DriverUnavailableError as exc:
            # The claim loop meets a broken server on its own path and reports it there.
            logger.debug("jobs table sweep skipped: %s", exc)
            return False
        except Exception:
            # Never the claim's business: say it, and leave the table to autovacuum.
            self.enabled = False
            logger.exception("jobs table sweep failed; autovacuum alone sweeps it from now on")
            return False
        finally:
            self._task = None

    async def sweep(self) -> bool:
        """Analyze the jobs table if its statistics are stale, and vacuum it if its dead rows
        reached the threshold; True when it vacuumed."""
        db = self._db
        async with db.conn() as conn:
            due = await conn.fetchrow(db.q["sweep_due"])
            if due is None:
                return False
            if not due["may_vacuum"]:
                self.enabled = False
                logger.info(
                    "this role does not own %s.jobs, so autovacuum alone sweeps it (connect "
                    "as the owner to let workers vacuum it between autovacuum's visits)",
                    db.schema,
                )
                return False
            if stale_statistics(
                due["changed"], due["analyzed_rows"], due["pages"], due["analyzed_pages"]
            ):
                started = time.perf_counter()
                await conn.execute(db.q["analyze"])
                self.analyzed += 1
                logger.debug(
                    "analyzed %s.jobs (%d rows changed since): %.0f ms",
                    db.schema,
                    due["changed"],
                    (time.perf_counter() - started) * 1000,
                )
            if due["dead"] < self.dead_rows:
                return False
            started = time.perf_counter()
            await conn.execute(db.q["sweep"])
        logger.debug(
            "vacuumed %s.jobs (%d dead rows): %.0f ms",
            db.schema,
            due["dead"],
            (time.perf_counter() - started) * 1000,
        )
        return True

    async def idle(self) -> None:
        """Return once no sweep is in flight."""
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """Stop a sweep in flight (the server cancels it; the next one redoes its work)."""
        self.enabled = False
        if self._task is not None:
            self._task.cancel()
        await self.idle()
