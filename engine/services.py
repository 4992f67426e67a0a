"""How a worker's loops beside its jobs (its presence beat and lease heartbeats, the cron
scheduler, the outbox relay, the pruner) meet a pass that fails: logged, and tried again at the
next. A failure never ends the worker, which would stop its jobs too (and, restarted, meet the
same failure again). Inside a worker's run, its outage record says it (engine/worker_outage.py):
once when the database goes away, not at every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from engine.errors import JobsError
from engine.worker_outage import noted_failure, noted_success

T = TypeVar("T")


async def attempt(what: str, log: logging.Logger, run: Callable[[], Awaitable[T]]) -> T | None:
    """`run()`'s answer, or None when it failed: a typed error (the database away, say) as a
    warning, anything else with its traceback, since it is a defect to report."""
    try:
        answer = await run()
    except JobsError as exc:
        if not noted_failure(what, exc):
            log.warning("%s failed, retrying: %s", what, exc)
        return None
    except Exception:
        log.exception("%s failed unexpectedly, retrying", what)
        return None
    noted_success(what)
    return answer
