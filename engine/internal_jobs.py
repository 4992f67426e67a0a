"""The jobs the engine declares for its own use, which no caller enqueues or reruns by name.

Today that is a backfill's pass (`backfill.pass`). `Backfills.write` starts it after the gate:
the dry run, the person's confirmation, the environment and the OAuth scope. Enqueued by name
(`enqueue_job`, `jobs.enqueue("backfill.pass", …)`), it would skip all of them and write any
environment's ledger. Rerun from a step, it would rewrite its run's ledger row in place and lose
that run's record. So both are refused here (JOB_INTERNAL, whose fix is the backfill's dry run).
The engine enqueues the pass by its definition, never by its name. A plain retry of a failed or
dead pass is allowed: it resumes the same run from its cursor.

Kept apart from `engine.backfill`, which registers the pass when it is imported: the enqueue path
checks names without loading the backfill machinery.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine import bounds
from engine.bounds import MAX_NAME_BYTES
from engine.errors import InvalidArgumentError, JobsError
from engine.shell_words import shell_word
from schemas.errors import NextCall
from schemas.jobs import JobRecord

# The pass job's name (engine/backfill/pass_job.py declares it under this name).
PASS_JOB = "backfill.pass"
INTERNAL_JOBS = frozenset({PASS_JOB})
# The module each internal job's body is defined in: the one place `@job` takes its name.
_HOMES = {PASS_JOB: "engine.backfill.pass_job"}
# Every declared backfill, pending or not (engine/backfill/errors.py's ALL_COMMAND).
BACKFILLS_COMMAND = "mcp-jobs backfill --json"


def dry_run_command(name: str, *, force: bool = False) -> str:
    """The CLI line that rehearses backfill `name` (its forced write, with `force`): it re-checks
    `requires()` and writes nothing."""
    return f"mcp-jobs backfill {shell_word(name)}{' --force' if force else ''} --json"


def _backfill_named(input: object) -> str | None:
    """The backfill a pass's input names, when it names one that a command line can carry."""
    name = input.get("name") if isinstance(input, Mapping) else getattr(input, "name", None)
    try:
        return bounds.text("name", name, MAX_NAME_BYTES)
    except InvalidArgumentError:
        return None


class JobInternalError(JobsError):
    code = "JOB_INTERNAL"
    title = "this job is started by the engine, never enqueued or rerun by name"

    def __init__(self, job: str, backfill: str | None, job_id: str | None = None) -> None:
        what = (
            f"job {job_id} is a pass of a backfill: a rerun from a step would rewrite its "
            "ledger row in place, losing that run's record, with no dry run or confirmation "
            "(a failed or dead pass resumes with a plain retry)"
            if job_id is not None
            else f'job "{job}" is the pass of a backfill: enqueued by name it would skip the '
            "dry run, the confirmation, the environment gate and the backfills:write scope"
        )
        target = f'backfill "{backfill}"' if backfill is not None else "a backfill"
        cause = f"{what}; start {target} with its dry run, then its write"
        if backfill is not None:
            fix = dry_run_command(backfill)
            call = NextCall(tool="run_backfill", arguments={"name": backfill})
        else:
            fix, call = BACKFILLS_COMMAND, NextCall(tool="list_backfills", arguments={})
        details: dict[str, Any] = {"job": job, "backfill": backfill}
        if job_id is not None:
            details["job_id"] = job_id
        super().__init__(cause, fix, next_call=call, details=details)


def is_internal(name: object) -> bool:
    # A str first: a caller's unhashable value is refused as an argument elsewhere, not here.
    return isinstance(name, str) and name in INTERNAL_JOBS


def reserved_for(name: str, body: object) -> str | None:
    """None when `@job` may declare `name` with `body` (the engine's own module declares its
    internal jobs); else what a job's name must be, for JOB_DECLARATION_INVALID."""
    if name not in INTERNAL_JOBS or getattr(body, "__module__", None) == _HOMES[name]:
        return None
    return (
        f"a name the engine does not keep for its own jobs ({', '.join(sorted(INTERNAL_JOBS))}: "
        "a backfill's pass, started by its write, never by name)"
    )


def enqueueable(names: Iterable[str]) -> list[str]:
    """`names` less the internal jobs, sorted, once each: what a JOB_UNKNOWN offers instead."""
    return sorted(set(names) - INTERNAL_JOBS)


def refuse_by_name(job: object, input: object) -> None:
    """JOB_INTERNAL for an enqueue or a describe that names an internal job."""
    if isinstance(job, str) and job in INTERNAL_JOBS:
        raise JobInternalError(job, _backfill_named(input))


def refuse_rerun(record: JobRecord) -> None:
    """JOB_INTERNAL for a rerun (from a step) of an internal job."""
    if record.name in INTERNAL_JOBS:
        raise JobInternalError(record.name, _backfill_named(record.input), record.id)


__all__ = [
    "BACKFILLS_COMMAND",
    "INTERNAL_JOBS",
    "PASS_JOB",
    "JobInternalError",
    "dry_run_command",
    "is_internal",
    "refuse_by_name",
    "refuse_rerun",
    "reserved_for",
]
