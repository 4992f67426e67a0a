"""The errors of reaching and using a database: unreachable, closed, full, damaged, a URL no
driver takes, a capability or privilege missing. Part of the one error tree (engine.errors)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import JobsError, listed_names


class DriverUnavailableError(JobsError):
    code = "DRIVER_UNAVAILABLE"
    title = "the database could not be reached"
    retry = "transient"

    def __init__(self, driver: str, cause: str, fix: str = "mcp-jobs db migrate") -> None:
        super().__init__(f"{driver}: {cause}", fix, details={"driver": driver})


class DriverExtraMissingError(JobsError):
    """A URL whose driver needs an optional extra this Python lacks (redis-py, nats-py).
    Terminal: no wait installs it, so an agent or a retry loop must not try again."""

    code = "DRIVER_EXTRA_MISSING"
    title = "the database URL's driver needs an optional extra that is not installed"

    def __init__(self, driver: str, package: str, reason: str, fix: str) -> None:
        super().__init__(
            f"{driver}: {package} is not installed ({reason})",
            fix,
            details={"driver": driver, "package": package},
        )


class DriverClosedError(JobsError):
    """A call on a driver after its `close()`. A closed driver does not reopen (a connection
    opened behind the caller's back would outlive the `Jobs` that owns it), and waiting does not
    mend it, so nothing (a settle, a worker's claim) tries it again."""

    code = "DRIVER_CLOSED"
    title = "the driver was closed"

    def __init__(self, driver: str, fix: str = "jobs = await connect(url)") -> None:
        super().__init__(
            f"{driver}: this driver was closed (Jobs.close() ran); a closed driver does not reopen",
            fix,
            details={"driver": driver},
        )


class StoreDamagedError(JobsError):
    """Data the driver stored cannot be read as it wrote it: a damaged file or page, or a key of
    ours that another program overwrote. Terminal: waiting does not mend it, so nothing (a
    settle, an agent) tries it again; the fix looks at the damage."""

    code = "STORE_DAMAGED"
    title = "the stored data is damaged or was overwritten"

    def __init__(self, driver: str, cause: str, fix: str) -> None:
        super().__init__(f"{driver}: {cause}", fix, details={"driver": driver})


class DatabaseUrlInvalidError(JobsError):
    code = "DATABASE_URL_INVALID"
    title = "the database URL cannot be used"

    def __init__(
        self,
        url: str,
        reason: str | None = None,
        *,
        schemes: Sequence[str] = (),
        fix: str = "export MCP_JOBS_DATABASE_URL=sqlite:///.mcp-jobs/jobs.db",
        answered: bool = False,
        scheme: str | None = None,
    ) -> None:
        """`answered`: what the URL names was reached and refused it (a database, role or
        password the server lacks; a file where the SQLite path needs a directory), which may
        change without the URL changing. `scheme`: the one to name where the URL does not
        write it with `://` (`sqlite:jobs.db`)."""
        self.answered = answered
        # The URL itself is never echoed: it may carry a password.
        head = scheme or (url.split("://", 1)[0] if "://" in url else "")
        scheme = head if head.isascii() and head.replace("+", "").isalnum() else "(no scheme)"
        if reason is None:
            # `schemes`: the drivers registered when the URL was refused (engine.drivers.DRIVERS).
            known = ", ".join(f"{s}://" for s in sorted(schemes)) or "none"
            reason = f'"{scheme[:40]}" is not a registered driver scheme (registered: {known})'
        super().__init__(
            f"the database URL ({scheme[:40]}) cannot be used: {reason}",
            fix,
            details={"scheme": scheme[:40]},
        )


class DriverCapabilityMissingError(JobsError):
    code = "DRIVER_CAPABILITY_MISSING"
    title = "the database driver does not offer what this feature needs"

    def __init__(self, driver: str, capability: str, missing: Sequence[str]) -> None:
        super().__init__(
            f"the {driver} driver does not offer the {capability} capability (it lacks "
            f"{listed_names(missing)}), which this feature needs",
            "export MCP_JOBS_DATABASE_URL=sqlite:///.mcp-jobs/jobs.db",
            details={"driver": driver, "capability": capability, "missing": list(missing)},
        )


class StorageFullError(JobsError):
    code = "STORAGE_FULL"
    title = "the database has no room left to write"
    retry = "transient"

    def __init__(self, driver: str, where: str, detail: str, fix: str | None = None) -> None:
        """`fix`: how to see the space left, when `df -h where` cannot (a server elsewhere)."""
        super().__init__(
            f"{driver}: the disk or volume holding {where} is full ({detail}); nothing of the "
            "refused write was stored",
            f"df -h {where}" if fix is None else fix,
            details={"driver": driver, "where": where},
        )


class SchemaPrivilegeMissingError(JobsError):
    """A migration the database role may not run: it lacks the right to create the schema or to
    alter its tables (a role with read/write grants only, whose schema its owner migrates).
    Terminal: the same role is refused the same way; the fix migrates as a role that may."""

    code = "SCHEMA_PRIVILEGE_MISSING"
    title = "this database role may not install or upgrade the schema"

    def __init__(self, driver: str, cause: str, fix: str) -> None:
        super().__init__(f"{driver}: {cause}", fix, details={"driver": driver})
