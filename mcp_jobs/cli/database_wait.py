"""Serving while the database does not answer yet: `mcp-jobs serve` and `mcp-jobs dashboard`
start anyway, migrate once it answers, and say so; a worker waits for it before it starts."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from engine.client import Jobs
from engine.driver_errors import DatabaseUrlInvalidError
from engine.errors import JobsError

logger = logging.getLogger("mcp_jobs.cli")


@asynccontextmanager
async def migrated_or_retrying(
    jobs: Jobs,
    *,
    answers: str = "tools",
    first_wait_s: float = 1.0,
    longest_wait_s: float = 30.0,
) -> AsyncIterator[None]:
    """Migrate, then run the body. A database that does not answer yet (DRIVER_UNAVAILABLE,
    STORAGE_FULL), or whose server refuses the URL (a database or role it does not have yet,
    a password), does not stop the server: its `answers` (the tools, whose fix through MCP is the
    `database_report` tool, or the dashboard's pages) carry that error while the migration is
    tried again, backing off, until it succeeds. Any other failure still stops the start."""
    try:
        await jobs.driver.migrate()
    except JobsError as exc:
        if not worth_waiting(exc, refusals=True):
            raise
        if exc.retryable:
            logger.warning(
                "the database does not answer (%s: %s); serving anyway: %s answer that error "
                "until it does, and the schema is migrated then",
                exc.code,
                exc.cause,
                answers,
            )
        else:
            logger.warning(
                "the database server refuses the URL (%s: %s); serving anyway: %s answer that "
                "error, and the start is tried again: %s",
                exc.code,
                exc.cause,
                answers,
                exc.fix,
            )
    else:
        yield
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(_migrate_when_up, jobs, first_wait_s, longest_wait_s, answers)
        yield
        tg.cancel_scope.cancel()


def worth_waiting(exc: JobsError, *, refusals: bool) -> bool:
    """Whether trying `exc`'s start again may succeed with nothing here changed: the database
    does not answer yet, or (`refusals`) its server refused the URL and may be set up to accept
    it (CREATE DATABASE, CREATE ROLE). A worker stops at a refusal: no one reads its tools."""
    if exc.retryable:
        return True
    return refusals and isinstance(exc, DatabaseUrlInvalidError) and exc.answered


async def _migrate_when_up(jobs: Jobs, wait_s: float, longest_wait_s: float, answers: str) -> None:
    await anyio.sleep(wait_s)
    try:
        await until_migrated(
            jobs, first_wait_s=wait_s * 2, longest_wait_s=longest_wait_s, refusals=True
        )
    except JobsError as exc:
        logger.error("the database cannot be migrated: %s: %s", exc.code, exc.cause)
        return
    logger.info("the database answers again and is migrated: %s act on it", answers)


async def until_migrated(
    jobs: Jobs,
    *,
    first_wait_s: float = 1.0,
    longest_wait_s: float = 30.0,
    say: bool = False,
    refusals: bool = False,
) -> None:
    """Migrate, trying again, backing off, while the database does not answer (a retryable
    error; each wait logged when `say`) or, with `refusals`, while its server refuses the URL;
    any other failure is raised."""
    wait_s = first_wait_s
    while True:
        try:
            await jobs.driver.migrate()
            return
        except JobsError as exc:
            if not worth_waiting(exc, refusals=refusals):
                raise
            if say:
                logger.warning(
                    "the database does not answer (%s: %s); trying again in %g s (why: %s)",
                    exc.code,
                    exc.cause,
                    wait_s,
                    exc.fix,
                )
        await anyio.sleep(wait_s)
        wait_s = min(wait_s * 2, longest_wait_s)
