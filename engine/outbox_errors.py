"""The refusals of staging into the transactional outbox (engine.outbox): no transaction, one of
another kind, or one on another database than the jobs'."""

from __future__ import annotations

from engine.errors import NOTHING_NEAR, InvalidArgumentError, JobsError, type_name


class OutboxWrongDatabaseError(JobsError):
    """The connection given to stage() reaches another database than the jobs': a row staged
    there would never be published, and one transaction cannot span two databases. Each
    driver says how it told the two apart and how to connect to the jobs' database."""

    code = "OUTBOX_WRONG_DATABASE"
    title = "outbox staging was given a connection to another database"

    def __init__(self, jobs_db: str, tx_db: str, fix: str) -> None:
        super().__init__(
            f"stage() was given a connection to {tx_db}, but the jobs live in {jobs_db}; a row "
            "staged there would never be published, and a commit is atomic per database only",
            fix,
            details={"jobs_database": jobs_db, "tx_database": tx_db},
        )


class OutboxNoTxError(JobsError):
    code = "OUTBOX_NO_TX"
    title = "outbox staging needs an open application transaction"

    def __init__(
        self,
        driver: str,
        fix: str = "async with conn.transaction(): await jobs.stage(conn, name, input)",
    ) -> None:
        """`fix`: how this driver's transaction is opened and ended around the stage (the
        default is asyncpg's; the memory, Redis and NATS drivers stage through their own)."""
        super().__init__(
            f"{driver}: stage() was given a connection that is not inside a transaction, so the "
            "job could exist without the write it belongs to",
            fix,
        )


class OutboxTxKindError(InvalidArgumentError):
    """INVALID_ARGUMENT for stage() handed no transaction of the kind its driver stages through
    (another library's connection, a pool, a string): said as such, since OUTBOX_NO_TX's fix
    (open a transaction on it) cannot mend it. `takes`: that kind in words; `fix`: how to get
    one."""

    def __init__(self, driver: str, given: object, takes: str, fix: str) -> None:
        kind = type_name(given)
        JobsError.__init__(
            self,
            f"{driver}: stage() was given a value of type {kind}, but this driver stages through "
            f"{takes}",
            fix,
            details={"argument": "tx", "expected": takes, "given_type": kind},
        )
        self.argument = "tx"
        self.value = given
        self.expected = takes
        self.nearest = NOTHING_NEAR
        self.fix_said = False
