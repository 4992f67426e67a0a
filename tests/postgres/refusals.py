"""Making the server itself refuse statements on the jobs table with a chosen SQLSTATE: what the
rollback tests share."""

from __future__ import annotations

import asyncpg

ROLLED_BACK = ["40001", "40P01", "55P03"]  # serialization failure, deadlock, lock timeout
RETRY_DEADLINE_MS = 10_000  # the driver's default
SETTLE_RETRY_MS = 300_000  # the driver's default


async def refuse(
    sql: asyncpg.Connection[asyncpg.Record],
    event: str,
    sqlstate: str,
    times: int,
    *,
    table: str = "jobs",
    after: int = 0,
) -> None:
    """After the next `after` statements that `event` the table (of schema mcp_jobs), the
    `times` after them are refused with `sqlstate` by the server itself (a sequence counts
    them: it is not rolled back with the statement)."""
    await sql.execute(
        f"""
        CREATE SEQUENCE public.refusals;
        CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE n bigint := nextval('public.refusals');
        BEGIN
          IF n > {after} AND n <= {after + times} THEN
            RAISE EXCEPTION 'refused by the test' USING ERRCODE = '{sqlstate}';
          END IF;
          RETURN NULL;
        END $$;
        CREATE TRIGGER refuse BEFORE {event} ON mcp_jobs.{table}
          FOR EACH STATEMENT EXECUTE FUNCTION public.refuse();
        """
    )


async def refused_so_far(sql: asyncpg.Connection[asyncpg.Record]) -> int:
    """How many statements reached the trigger: the refused ones and those let through."""
    return int(await sql.fetchval("SELECT last_value FROM public.refusals"))
