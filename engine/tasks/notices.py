"""What the scheduler's log says about its tasks, each thing once rather than every round: a
failure when it starts or changes (its traceback then, and a fix that acts on this worker's
own database), what an outage cost (occurrences skipped or being caught up, counted up to a
bound), an occurrence `skip` abandoned after its round failed, and a task's state lost."""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.errors import JobsError
from engine.fix_lines import PROGRAM, CommandContext, assignments_ahead, command_words, with_flags
from engine.tasks.declare import TaskDefinition
from engine.tasks.errors import TaskEnqueueFailedError

logger = logging.getLogger("mcp_jobs.scheduler")

# How far an outage's missed occurrences are counted for its warning (each one counted is a
# step of the cron walk): past it, the warning says "more than".
OUTAGE_COUNT_BOUND = 100


def logged_fix(fix: str, context: CommandContext | None) -> str | None:
    """`fix` as the worker's log may print it: an `mcp-jobs …` command with the client's
    context written in (engine/fix_lines.py, as an error leaving the Python API carries it), or
    None when that context is unknown (a face's worker: the bare command would open another
    database); any other line as it is."""
    if context is not None:
        return with_flags(fix, context.flags())
    words = command_words(fix)
    head = assignments_ahead(words) if words is not None else 0
    if words is not None and head < len(words) and words[head] == PROGRAM:
        return None
    return fix


def occurrences(count: int, bound: int) -> str:
    if count > bound:
        return f"more than {bound:,} occurrences"
    return "1 occurrence" if count == 1 else f"{count:,} occurrences"


def _identity(error: JobsError) -> tuple[str, str | None]:
    """What makes a failure the same one round after round: its code, and the type of what the
    app's code raised under it."""
    cause = error.__cause__
    return error.code, None if cause is None else type(cause).__name__


class TaskNotices:
    """The scheduler's log lines about its tasks; `context` answers the fix context of the
    client the scheduler fires through (read at each line: a face may set it)."""

    def __init__(self, context: Callable[[], CommandContext | None]) -> None:
        self.context = context
        # Task → the identity of its failure, so a task failing every round logs it once.
        self._failing: dict[str, tuple[str, str | None]] = {}
        # Task → (the occurrence its failed round did not fire, the error's code).
        self._unfired: dict[str, tuple[int, str]] = {}
        # Tasks (catch_up='all') whose catch-up was announced and is not over.
        self._behind: set[str] = set()

    # --- failures ---------------------------------------------------------------------------

    def unfired(self, task: str, occurrence_ms: int, error: JobsError) -> None:
        """`task`'s round failed before it fired `occurrence_ms`."""
        self._unfired[task] = (occurrence_ms, error.code)

    def failed(self, task: str, error: JobsError) -> None:
        """Log a task's failure when it starts or changes, with the traceback of what the app's
        `enqueue` raised."""
        identity = _identity(error)
        if self._failing.get(task) == identity:
            logger.debug("task %s still does not fire: %s", task, error)
            return
        self._failing[task] = identity
        fix = logged_fix(error.fix, self.context())
        shown = f"fix: {fix}" if fix is not None else "describe and diagnose show its fix"
        # The app's own exception is worth its traceback; a typed error says it all.
        raised = isinstance(error, TaskEnqueueFailedError)
        logger.error(
            "task %s did not fire: %s (%s); tried again every round, logged again when the "
            "error changes",
            task,
            error,
            shown,
            exc_info=error if raised else None,
        )

    def fired(self, task: str) -> None:
        self._unfired.pop(task, None)
        if self._failing.pop(task, None) is not None:
            logger.warning("task %s fires again", task)

    # --- outages ----------------------------------------------------------------------------

    def skipped(self, definition: TaskDefinition, after: int, latest: int) -> None:
        """`latest` fired under catch_up='skip' after the occurrence `after`: say what was
        skipped between them, if anything (an outage, or rounds that failed)."""
        schedule = definition.schedule
        missed = schedule.between(after, latest - 1, OUTAGE_COUNT_BOUND + 1)
        if not missed:
            return
        last = missed[-1]
        if len(missed) > OUTAGE_COUNT_BOUND:  # not all counted: the last is found walking back
            last = schedule.latest(after, latest - 1) or last
        failed = self._unfired.get(definition.name)
        among = ""
        if failed is not None and after < failed[0] < latest:
            among = f"; among them {schedule.local_iso(failed[0])}, whose round failed with "
            among += f"{failed[1]}, is abandoned"
        logger.warning(
            "task %s: skipped %s from %s to %s under catch_up='skip' (its latest, %s, fired)%s",
            definition.name,
            occurrences(len(missed), OUTAGE_COUNT_BOUND),
            schedule.local_iso(missed[0]),
            schedule.local_iso(last),
            schedule.local_iso(latest),
            among,
        )

    def state_lost(self, definition: TaskDefinition, start: int, now: int, *, known: bool) -> None:
        """`definition`'s state reads as none though it fired before: say where it fires on
        from, `start` (`known`: up to there this scheduler knows what fired; else now, what
        fired before not known here)."""
        schedule = definition.schedule
        if known:
            then = f"it fires on from {schedule.local_iso(start)}, up to which this scheduler "
            then += "knows what fired (what came due after that is skipped or caught up, and "
            then += "said so)"
        else:
            then = "which of its occurrences fired before now is not known here, so it fires "
            then += f"on from now ({schedule.local_iso(now)}), none of them counted as skipped "
            then += "nor fired again"
        logger.warning(
            "task %s: its stored state reads as none though it fired before (the store was "
            "reset, as a Redis restarted without persistence is, or another program removed or "
            "overwrote it): %s; its next firing writes the state anew",
            definition.name,
            then,
        )

    def catching_up(self, definition: TaskDefinition, after: int, now: int, due: list[int]) -> None:
        """Under catch_up='all', announce a catch-up once, when more than one occurrence is due
        (`due`: at most `max_catch_up` + 1 of them, oldest first)."""
        name = definition.name
        if len(due) < 2:
            self._behind.discard(name)
            return
        if name in self._behind:
            return
        self._behind.add(name)
        limit = definition.max_catch_up
        if len(due) <= limit:  # every missed occurrence is in `due`
            count, bound = len(due), limit
        else:
            bound = max(OUTAGE_COUNT_BOUND, limit)
            more = bound > limit
            count = len(definition.schedule.between(after, now, bound + 1)) if more else len(due)
        logger.warning(
            "task %s: catching up %s from %s under catch_up='all', oldest first, at most %d a "
            "round",
            name,
            occurrences(count, bound),
            definition.schedule.local_iso(due[0]),
            limit,
        )
