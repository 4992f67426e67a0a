"""The claiming process vacuums the jobs table itself, between autovacuum's visits.

Every job leaves dead index entries behind (its claim's in the claim index, its settle's in the
running index), a claim walks the claim index from the end where they gather, and only VACUUM
deletes them; autovacuum visits once a minute, while a busy worker claims hundreds of thousands
of rows in that time. So this process reads the table's dead-row count from the statistics at
its first claim and after every `check_every` rows it claims since, and once the count reaches
`dead_rows` it runs VACUUM in the background, off the claim's path. Many workers need no
coordination beyond that: `SKIP_LOCKED` passes when another process (or autovacuum) is already
vacuuming, and the count comes from the server, so ten workers do not vacuum ten times as often.
"""

from __future__ import annotations

import asyncio
import logging
import time

from engine.drivers.postgres.connections import Connections
from engine.errors import DriverUnavailableError

logger = logging.getLogger("mcp_jobs.postgres")


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
