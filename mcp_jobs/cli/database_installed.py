"""A command that reads or acts on stored jobs installs no store, as it creates no SQLite file
(cli/database_file.py): `jobs ls` with `?schema=mcp_job` for `mcp_jobs` installed a whole empty
schema and said "no jobs", as a misspelt Redis `?prefix=` or NATS bucket did. Refused, with the
command on the installed one it plainly stands for, else the `db migrate` that installs it."""

from __future__ import annotations

import difflib

from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers.installed import InstalledStore

# How alike an installed schema's name must be to the one asked for to be the one meant.
_ALIKE = 0.75
# The installed stores a refusal names, at most.
_SHOWN = 10


class NoSchemaError(DatabaseUrlInvalidError):
    """DATABASE_URL_INVALID for a URL whose store (a PostgreSQL schema, a Redis prefix, a NATS
    bucket: `what`) is not installed, from a command that only acts on what is stored.
    `near_url`: the URL of the installed one it plainly meant (cli/mend.py writes the command on
    it), else None: the fix installs this one."""

    def __init__(
        self,
        url: str,
        what: str,
        name: str,
        installed: list[str],
        near_url: str | None,
        near: str | None,
    ) -> None:
        self.near_url = near_url
        shown = ", ".join(installed[:_SHOWN]) + (", …" if len(installed) > _SHOWN else "")
        there = f"installed here: {shown}" if installed else "none is installed here"
        meant = f" (meant {near}?)" if near is not None else ""
        super().__init__(
            url,
            reason=f"no mcp-jobs {what} {name} on this server ({there}){meant}, and a "
            "command that reads or acts on stored jobs installs none (db migrate, a worker or "
            "serve does)",
            fix="mcp-jobs db migrate",  # written with the URL (FixContext)
            answered=True,  # the URL is well formed: the schema may yet be installed
        )


async def require_installed(driver: object, url: str) -> None:
    """Raise `NoSchemaError` when the store of `driver` (connected to `url`, not yet migrated)
    is not installed; a driver with no server store, or a server that does not answer this
    check (the command's own first call says why), passes."""
    if not isinstance(driver, InstalledStore):
        return
    try:
        absent = await driver.store_absent()
    except Exception:  # refused, away, a bad password: the command's own call says so
        return
    if absent is None:
        return
    near = difflib.get_close_matches(absent.name, absent.installed, n=1, cutoff=_ALIKE)
    meant = near[0] if near else None
    raise NoSchemaError(
        url,
        absent.what,
        absent.name,
        absent.installed,
        absent.naming(meant) if meant else None,
        meant,
    )
