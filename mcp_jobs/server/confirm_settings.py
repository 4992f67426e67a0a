"""The write-confirmation settings of `mcp-jobs serve`: `--confirm-writes on|off` (else
MCP_JOBS_CONFIRM_WRITES) and `--confirm-ttl-seconds` (else MCP_JOBS_CONFIRM_TTL_SECONDS)."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import replace

from engine.switches import WORDS, switch, switch_meant
from mcp_jobs.config import Settings, seconds_in
from mcp_jobs.errors import ConfirmSettingInvalidError

CONFIRM_WRITES_ENV = "MCP_JOBS_CONFIRM_WRITES"
CONFIRM_TTL_ENV = "MCP_JOBS_CONFIRM_TTL_SECONDS"
# A confirm token outliving a day would no longer be a confirmation of what is there now.
MAX_TTL_SECONDS = 24 * 3600.0

logger = logging.getLogger("mcp_jobs.server")


def confirm_settings(settings: Settings, flag: str | None, ttl: str | None = None) -> Settings:
    """`settings` with the confirmation flags applied: a flag wins over its variable. `ttl`,
    like the variable, is text as typed (seconds, or a duration: "10m"), echoed so if refused."""
    value = flag if flag is not None else os.environ.get(CONFIRM_WRITES_ENV) or "on"
    confirm = switch(value)
    if confirm is None:
        # A slip (`of`) is fixed as the switch it names (engine.switches), else on: asking.
        raise ConfirmSettingInvalidError(
            CONFIRM_WRITES_ENV, value, WORDS, f"export {CONFIRM_WRITES_ENV}={switch_meant(value)}"
        )
    if ttl is None:
        name, shown = CONFIRM_TTL_ENV, os.environ.get(CONFIRM_TTL_ENV) or ""
    else:
        name, shown = "--confirm-ttl-seconds", ttl
    if ttl is None and not shown:
        seconds: float | None = settings.confirm_ttl_seconds
    else:
        seconds = seconds_in(shown.strip())
    ttl_s = math.nan if seconds is None else seconds
    if not 1 <= ttl_s <= MAX_TTL_SECONDS:  # NaN fails too
        expected = f"a number of seconds from 1 to {int(MAX_TTL_SECONDS)}, or a duration (10m, 1d)"
        nearest = f"{min(max(ttl_s, 1), MAX_TTL_SECONDS):g}" if math.isfinite(ttl_s) else "600"
        raise ConfirmSettingInvalidError(
            name,
            shown,
            expected,
            f"export {CONFIRM_TTL_ENV}={nearest}",
            flag=name if name.startswith("--") else None,
            nearest=nearest,
        )
    return replace(settings, confirm_writes=confirm, confirm_ttl_seconds=ttl_s)


def log_confirm_setting(settings: Settings) -> None:
    """Said once at start: a server that writes unasked says so where its operator looks."""
    if settings.read_only:
        return
    if settings.confirm_writes:
        logger.info(
            "writes through MCP ask the person to confirm (elicitation, or a dry run's token "
            "valid %g s)",
            settings.confirm_ttl_seconds,
        )
    else:
        logger.warning(
            "write confirmation is OFF (--confirm-writes off / %s=off): run_backfill and "
            "prune_history write without asking anyone",
            CONFIRM_WRITES_ENV,
        )
