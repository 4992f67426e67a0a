"""The typed errors of cron tasks: declarations refused where they are written, and bad entries."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.errors import JobsError, short_repr
from engine.fix_lines import import_root
from engine.shell_words import shell_word
from engine.tasks.cron_syntax import CronSyntaxError
from engine.tasks.zones import EXAMPLE_ZONE, LIST_ZONES


class TaskCronInvalidError(JobsError):
    code = "TASK_CRON_INVALID"
    title = "a task's cron expression cannot be scheduled"

    def __init__(self, task: str, cron: object, reason: str | CronSyntaxError) -> None:
        """`reason`: a CronSyntaxError carries the expression to write instead (the given one
        corrected, or with a slot saying what its wrong field takes)."""
        problem = reason if isinstance(reason, CronSyntaxError) else CronSyntaxError(reason)
        written = json.dumps(problem.fix_cron, ensure_ascii=False)
        super().__init__(
            f'task "{task}" declares cron={cron!r}: {problem.reason}',
            f"task(name={json.dumps(task, ensure_ascii=False)}, cron={written}, ...)",
            details={
                "task": task,
                "cron": repr(cron),
                "field": problem.field,
                "token": problem.token,
                "mended": problem.mended,
            },
        )


class TaskTimezoneInvalidError(JobsError):
    code = "TASK_TIMEZONE_INVALID"
    title = "a task's time zone is not a tz database (IANA) zone name"

    def __init__(
        self,
        task: str,
        tz: object,
        suggestions: Sequence[str],
        *,
        mended: str | None = None,
    ) -> None:
        """`mended`: the one zone `tz` plainly stands for (written in another case, with blanks
        around it or for `_`); the fix is then the declaration with it, as the cron's is."""
        hint = f" (did you mean {', '.join(suggestions)}?)" if suggestions else ""
        fix = LIST_ZONES
        if mended is not None:
            written = json.dumps(task, ensure_ascii=False)
            fix = f"task(name={written}, tz={json.dumps(mended)}, ...)"
        super().__init__(
            f'task "{task}" declares tz={tz!r}, which is not a zone of the tz database (IANA)'
            f"{hint}; use a zone's exact name, e.g. "
            f'tz="{suggestions[0] if suggestions else EXAMPLE_ZONE}", or "UTC"',
            fix,
            details={
                "task": task,
                "tz": repr(tz),
                "example": EXAMPLE_ZONE,
                "suggestions": list(suggestions),
                "mended": mended,
            },
        )


class TaskCatchUpInvalidError(JobsError):
    code = "TASK_CATCH_UP_INVALID"
    title = "a task's catch-up policy could never fire, or fire without bound"

    def __init__(self, task: str, field: str, value: object, expected: str) -> None:
        if field == "max_catch_up":
            cause = (
                f'task "{task}" declares max_catch_up={value!r}, {_why_not(value)}; it must be '
                + expected
            )
            fix = f'task(name="{task}", max_catch_up=10, ...)'
        else:
            cause = f'task "{task}" declares {field}={value!r}; it must be {expected}'
            fix = f'task(name="{task}", catch_up="skip", ...)'
        super().__init__(cause, fix, details={"task": task, "field": field, "value": repr(value)})


def _why_not(value: object) -> str:
    """The reason a refused `max_catch_up` cannot be used, for the value given (only one holds)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "which is not a whole number (an int)"
    if value < 1:
        return "so no occurrence can ever fire"
    return "so one catch-up round could fire a burst of that many jobs"


class TaskDeclarationInvalidError(JobsError):
    code = "TASK_DECLARATION_INVALID"
    title = "a task declaration has a value that can never work"

    def __init__(
        self,
        task: str,
        field: str,
        value: object,
        expected: str,
        mended: str | None = None,
    ) -> None:
        """`mended`: the field's value mended, as code; without it the fix holds a slot saying
        what to write. A refused name is mended in place: the call has one `name=`."""
        written = mended if mended is not None else f"<{expected}>"
        if field == "name":
            cause = f"a task declares name={short_repr(value)}; a task's name must be {expected}"
            fix = f"task(name={written}, ...)"
        else:
            declared = f"{field}={short_repr(value)}"
            cause = f'task "{task}" declares {declared}; {field} must be {expected}'
            fix = f"task(name={json.dumps(task, ensure_ascii=False)}, {field}={written}, ...)"
        super().__init__(
            cause,
            fix,
            details={"task": task, "field": field, "value": repr(value)},
        )


class TaskNameTakenError(JobsError):
    code = "TASK_NAME_TAKEN"
    title = "two tasks were declared under one name"

    def __init__(self, task: str, first: str, second: str) -> None:
        super().__init__(
            f'task name "{task}" is declared by {first} and again by {second}; its durable '
            "state (last fired occurrence) and its idempotency keys would be shared",
            f'task(name="{task}_2", ...)',
            details={"task": task, "first": first, "second": second},
        )


class TaskUnknownError(JobsError):
    code = "TASK_UNKNOWN"
    title = "no task is registered under this name"

    def __init__(self, task: str, known: Sequence[str]) -> None:
        names = ", ".join(sorted(known)) if known else "none"
        super().__init__(
            f'no task named "{task}" is registered here (registered: {names})',
            "await engine.describe_tasks(jobs)",
            details={"task": task, "known": sorted(known)},
        )


class TaskEntryInvalidError(JobsError):
    code = "TASK_ENTRY_INVALID"
    title = "a task's enqueue function returned something that is not a list of entries"

    def __init__(self, task: str, occurrence_ms: int, value: object) -> None:
        super().__init__(
            f'task "{task}" enqueue({occurrence_ms}) returned {value!r}; it must return a list '
            "of (job, input) or (job, input, tenant_id) tuples (or engine.Enqueue items)",
            f'task(name="{task}", enqueue=lambda at: [("job_name", {{"field": "value"}})], ...)',
            details={"task": task, "occurrence_ms": occurrence_ms},
        )


class TaskEnqueueFailedError(JobsError):
    code = "TASK_ENQUEUE_FAILED"
    title = "a task's enqueue function raised"
    retry = "transient"

    def __init__(
        self,
        task: str,
        occurrence_ms: int,
        error: BaseException,
        declared_by: str,
        catch_up: str = "all",  # the task's policy: "all" or "skip"
    ) -> None:
        module, _, qualname = declared_by.partition(":")
        if module and qualname.isidentifier():
            # Reproduce it outside the scheduler: the same call, the same occurrence.
            fix = f'python3 -c "from {module} import {qualname} as f; print(f({occurrence_ms}))"'
        else:
            fix = f'python3 -c "import {module or declared_by}"'
        root = import_root(module or declared_by)
        if root is not None:
            fix = f"PYTHONPATH={shell_word(root)} {fix}"
        if catch_up == "skip":
            # `skip` fires only the latest due occurrence: a newer one due by then replaces it.
            fate = (
                "the occurrence was not fired; the next round tries it again only if no newer "
                "occurrence is due by then (catch_up='skip' fires the latest and abandons this "
                "one, logged)"
            )
        else:
            fate = "the occurrence was not fired and is tried again next round"
        super().__init__(
            f'task "{task}" enqueue({occurrence_ms}) raised {type(error).__name__}: {error}; '
            + fate,
            fix,
            details={
                "task": task,
                "occurrence_ms": occurrence_ms,
                "error": type(error).__name__,
            },
        )
