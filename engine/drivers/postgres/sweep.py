"""The claiming process vacuums the jobs table itself, between autovacuum's visits.

Every job leaves dead index entries behind: its claim ends the row's entry in the claim index,
its settle the entry in the running index. A claim walks the claim index from its oldest end,
where those entries gather, and only VACUUM deletes them (a scan can mark an entry dead, but
still reads the page to skip it). Autovacuum looks at a database once a minute
(`autovacuum_naptime`), and a worker draining thousands of jobs a second claims hundreds of
thousands of rows in that minute: in a drain of 200,000 jobs the claim of 16 rows read 1,549
index pages by the end and took 2.5 ms instead of 0.4 ms (auto_explain).

So this process reads the table's dead-row count from the statistics (one cheap query) at its
first claim and after every `check_every` rows it claims since, and once the count reaches
`dead_rows` it runs VACUUM in the background, off the claim's path. Many workers need no
coordination beyond that: `SKIP_LOCKED` passes when another process (or autovacuum) is already
vacuuming the table, and once one has vacuumed, the others read a low count. The count comes
from the server, not from this process's claims, so ten workers do not vacuum ten times as
often.

The threshold is a trade on a small machine: a vacuum reads every index whole, and its CPU is
taken from the worker and the claims beside it. With a threshold of 20,000 dead rows (and an
ANALYZE at the first claim, since dropped) a drain of 20,000 jobs ran 10% slower than with no
sweeping; at 50,000 it vacuums none in such a drain, and in drains of 200,000 jobs it did best:
5,044 jobs/s against 4,812 at 20,000 and 3,861 with no sweeping (in-process drains, alternated).
It vacuums about every 25,000 jobs then, which at about 120 entries an index page bounds the walk
at the claim index's head near 200 pages (an estimate from the page counts above).
"""

from __future__ import annotations

import asyncio
import logging
import time

from engine.drivers.postgres.core import PgCore
from engine.errors import DriverUnavailableError

logger = logging.getLogger("mcp_jobs.postgres")


class Sweeper:
    """Keeps `core`'s jobs table vacuumed (see the module doc); `dead_rows` 0 leaves it to
    autovacuum alone."""

    def __init__(self, core: PgCore, dead_rows: int) -> None:
        self._core = core
        self.dead_rows = dead_rows
        # A job leaves two dead rows (its claim's and its settle's): checking after an eighth of
        # the threshold in claimed rows reads the count about four times per vacuum.
        self.check_every = max(1, dead_rows // 8)
        self._claimed = self.check_every  # the first claim checks
        self._task: asyncio.Task[bool] | None = None
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
        """Vacuum the jobs table if its dead rows reached the threshold; True when it did."""
        core = self._core
        async with core.conn() as conn:
            due = await conn.fetchrow(core.q["sweep_due"])
            if due is None:
                return False
            if not due["may_vacuum"]:
                self.enabled = False
                logger.info(
                    "this role does not own %s.jobs, so autovacuum alone sweeps it (connect "
                    "as the owner to let workers vacuum it between autovacuum's visits)",
                    core.schema,
                )
                return False
            if due["dead"] < self.dead_rows:
                return False
            started = time.perf_counter()
            await conn.execute(core.q["sweep"])
        logger.debug(
            "vacuumed %s.jobs (%d dead rows): %.0f ms",
            core.schema,
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
