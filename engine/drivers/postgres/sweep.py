"""The claiming process vacuums and analyzes the jobs table itself, between autovacuum's visits.

Autovacuum looks at a database once a minute (`autovacuum_naptime`). A queue changes faster
than that, in two ways that cost every claim and every settle:

- Dead index entries. Every job leaves some: its claim ends the row's entry in the claim index,
  its settle the entry in the running index. A claim walks the claim index from its oldest end,
  where those entries gather, and only VACUUM deletes them (a scan can mark an entry dead, but
  still reads the page to skip it). A worker draining thousands of jobs a second claims hundreds
  of thousands of rows in autovacuum's minute: in a drain of 200,000 jobs the claim of 16 rows
  read 1,549 index pages by the end and took 2.5 ms instead of 0.4 ms (auto_explain).
- Planner statistics. A table filled faster than autovacuum's ANALYZE comes round is planned
  blind: on 20,000 freshly enqueued rows, a settle of 16 rows was planned as a bitmap scan of
  the running index, which no scan ever marks dead entries in, and by the end of the drain it
  visited 18,912 entries and 1,024 heap pages, 1.9 ms instead of 0.3 ms (auto_explain).

So this process reads the table's statistics (one cheap query) at its first claim and after
every `check_every` rows it claims since, and then, in the background and off the claim's path,
runs VACUUM once the dead rows reach `dead_rows` and ANALYZE once the statistics are stale. Many
workers need no coordination beyond that: `SKIP_LOCKED` passes when another process (or
autovacuum) is already at the table, and once one has vacuumed, the others read a low count.
The counts come from the server, not from this process's claims, so ten workers do not vacuum
ten times as often.
"""

from __future__ import annotations

import asyncio
import logging
import time

from engine.drivers.postgres.core import PgCore
from engine.errors import DriverUnavailableError

logger = logging.getLogger("mcp_jobs.postgres")


class Sweeper:
    """Keeps `core`'s jobs table vacuumed and analyzed (see the module doc); `dead_rows` 0
    leaves it to autovacuum alone."""

    def __init__(self, core: PgCore, dead_rows: int) -> None:
        self._core = core
        self.dead_rows = dead_rows
        # A job leaves two dead rows (its claim's and its settle's): checking after an eighth of
        # the threshold in claimed rows reads the count about four times per vacuum.
        self.check_every = max(1, dead_rows // 8)
        self._claimed = self.check_every  # the first claim checks
        self._task: asyncio.Task[str | None] | None = None
        # False once the server said this role may not vacuum the table: stop asking.
        self.enabled = dead_rows > 0
        self.checks = 0  # how many times it read the statistics

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

    async def _background(self) -> str | None:
        try:
            return await self.sweep()
        except DriverUnavailableError as exc:
            # The claim loop meets a broken server on its own path and reports it there.
            logger.debug("jobs table sweep skipped: %s", exc)
            return None
        except Exception:
            # Never the claim's business: say it, and leave the table to autovacuum.
            self.enabled = False
            logger.exception("jobs table sweep failed; autovacuum alone sweeps it from now on")
            return None
        finally:
            self._task = None

    async def sweep(self) -> str | None:
        """Vacuum and/or analyze the jobs table if it is due; the query run (its name in
        queries.sql), or None."""
        core = self._core
        async with core.conn() as conn:
            due = await conn.fetchrow(core.q["sweep_due"])
            if due is None:
                return None
            if not due["may_vacuum"]:
                self.enabled = False
                logger.info(
                    "this role does not own %s.jobs, so autovacuum alone sweeps it (connect "
                    "as the owner to let workers vacuum it between autovacuum's visits)",
                    core.schema,
                )
                return None
            if due["dead"] >= self.dead_rows:
                name = "sweep_analyze" if due["stale"] else "sweep"
            elif due["stale"]:
                name = "analyze"
            else:
                return None
            started = time.perf_counter()
            await conn.execute(core.q[name])
        logger.debug(
            "%s %s.jobs (%d dead rows): %.0f ms",
            name,
            core.schema,
            due["dead"],
            (time.perf_counter() - started) * 1000,
        )
        return name

    async def idle(self) -> None:
        """Return once no sweep is in flight."""
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """Stop a sweep in flight (the server cancels it; the next one redoes its work)."""
        self.enabled = False
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
