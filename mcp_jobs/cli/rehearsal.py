"""A bad value is refused while the database is away. A command whose database failed to answer
(a retryable error, exit 75) is run again on an empty in-memory store; if that run refuses one of
its values, the refusal is the answer (exit 1): told "try again later", a retry loop would run
the bad value for as long as the outage lasted, then get the refusal. The engine's checks run
as they always do, so no rule is written twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from engine.driver_errors import DriverUnavailableError
from engine.errors import InvalidArgumentError, JobsError
from mcp_jobs.errors import LimitExceededError

# The store a rehearsal runs on: empty, and gone with the process.
REHEARSAL_URL = "memory://"
# The commands rehearsed: those whose whole work is the engine's, on the jobs database. Not a
# drain (it runs jobs), nor a backfill (its checks call the app's own functions).
REHEARSED = frozenset(
    {
        "list_jobs",
        "inspect_job",
        "retry_job",
        "cancel_job",
        "enqueue_job",
        "describe_jobs",
        "queue_stats",
        "diagnose_queue",
        "retry_jobs",
        "cancel_jobs",
        "prune_history",
        "send_event",
        "pause_queue",
        "resume_queue",
        "list_pauses",
        "list_rate_limits",
    }
)
_REHEARSING: ContextVar[bool] = ContextVar("cli_rehearsing", default=False)


def rehearsing() -> bool:
    """Whether the command under way is a rehearsal (`open_jobs` then opens REHEARSAL_URL)."""
    return _REHEARSING.get()


async def input_refusal(
    kind: str, run: Callable[[], Awaitable[object]], failed: BaseException
) -> JobsError | None:
    """The refusal of one of the command's values, found by running it again on an empty store,
    when `failed` is its database not answering; else None. A cursor is not judged there: it
    names a page of the real store."""
    if kind not in REHEARSED or not isinstance(failed, DriverUnavailableError):
        return None
    token = _REHEARSING.set(True)
    try:
        await run()
    except (InvalidArgumentError, LimitExceededError) as refused:
        exact = type(refused) in (InvalidArgumentError, LimitExceededError)
        return refused if exact else None
    except Exception:  # any other answer is the empty store's, not the command's values
        return None
    finally:
        _REHEARSING.reset(token)
    return None
