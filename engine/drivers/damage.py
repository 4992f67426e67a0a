"""A stored row the driver cannot read back: another program wrote it, or its bytes are damaged.

Raised where a row is decoded, which knows the job but not the store; each driver's error
boundary, which knows the store and its fix, makes it STORE_DAMAGED (terminal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from engine import rules
from engine.driver_errors import StoreDamagedError
from schemas.jobs import DamagedJob, JobRecord, NackOptions
from schemas.pauses import PAUSE_KINDS, Pause, PauseKind
from schemas.scheduler import TaskFailure

R = TypeVar("R")
T = TypeVar("T")
logger = logging.getLogger(__name__)

# What decoding a stored value raises when it is not what the driver wrote: a JSON decode error
# and pydantic's ValidationError are ValueErrors, a missing field a KeyError, a wrong type a
# TypeError.
UNDECODABLE = (ValueError, KeyError, TypeError)

# The columns of a job's row that a damaged row's fix prints as stored: those a value of the
# wrong shape can sit in (JSON), and the counts the record bounds (schemas.jobs).
JOB_JSON_COLUMNS = ("input", "output", "last_error", "progress")
JOB_COUNT_COLUMNS = ("attempt", "max_attempts")


class UndecodableRow(Exception):
    """`kind`: which row of the job cannot be read, its own or one of its steps' or events'
    (`name` says which). A step read by its run alone (a replay on a store that keys steps by
    run) names the run, `job_id` empty; so does a backfill run's row in the ledger. An inbound
    event (`name`: its id) is named alone: the job that waits for it meets the error."""

    def __init__(
        self,
        job_id: str,
        exc: BaseException,
        kind: Literal["job", "step", "event", "backfill", "inbound"] = "job",
        name: str = "",
        *,
        run_id: str = "",
    ) -> None:
        owner = f"job {job_id}" if job_id else f"run {run_id}"
        if kind == "backfill":
            where = f"backfill run {run_id}"
        elif kind == "inbound":
            where = f"inbound event {name}"
        else:
            where = owner if kind == "job" else f"{owner}, {kind} {name!r}"
        super().__init__(f"{where}: {reason(exc)}")
        self.job_id = job_id
        self.run_id = run_id
        self.kind = kind
        self.name = name

    @property
    def what(self) -> str:
        """The row's kind in words: "the {what}'s row"."""
        return {"inbound": "inbound event", "backfill": "backfill run"}.get(self.kind, self.kind)


def read_or_name(
    row: R,
    decode: Callable[[R], JobRecord],
    describe: Callable[[UndecodableRow], StoreDamagedError],
) -> JobRecord | DamagedJob:
    """A list's row as its record, or, when it cannot be read, named with the error the driver's
    boundary would raise for it (`describe`): one damaged row does not fail the whole page."""
    try:
        return decode(row)
    except UndecodableRow as exc:
        return named(exc.job_id, describe(exc))


def named(job_id: str, error: StoreDamagedError) -> DamagedJob:
    return DamagedJob(id=job_id, cause=error.cause, fix=error.fix)


def burial(damage: StoreDamagedError, now: int) -> tuple[NackOptions, rules.NackOutcome]:
    """How a claim settles a row it took but cannot read: dead at once, its error the damage.
    Trying it again cannot mend it, and left running it would come back at every lease's end.
    The outcome is what the nack rule decides from the options alone (state, finish, event):
    the row's attempt and times stay as stored, like the rest of it, for the fix to show."""
    options = NackOptions(error=damage.to_payload(), dead_letter=True)
    return options, rules.nack_transition(options, now, 0, 0)


def log_burial(driver: str, state: str, damage: StoreDamagedError) -> None:
    """What a claim that buried a row logs: the operator learns of it without listing."""
    logger.error(
        "%s: claimed a job that cannot be read; it is %s now (STORE_DAMAGED): %s",
        driver,
        state,
        damage.cause,
    )


# Rows already logged by `readable` (bounded: cleared when full), so a read that runs every
# second (a wait's poll, each worker's metrics) logs a damaged row once, not at every read.
_LOGGED: set[str] = set()
_LOGGED_MOST = 1000


def readable(
    rows: Iterable[R],
    decode: Callable[[R], T],
    where: Callable[[R], str],
) -> list[T]:
    """The rows that decode, in order; each that does not is left where it is and logged once,
    named by `where`. For rows a read may pass over: a worker's presence (its next beat rewrites
    the row, an expired one is deleted) and an outbox claim (the row comes back at its lease's
    end, as a row that failed to publish does; the relay goes on with the others)."""
    found: list[T] = []
    for row in rows:
        try:
            found.append(decode(row))
        except UNDECODABLE as exc:
            _log_once(where(row), exc)
    return found


def or_none(decode: Callable[[], T], named: str) -> T | None:
    """`decode()`, or None when the stored value it reads is not what the driver wrote, logged
    once as `named`. For a value whose absence is safe to act on: a task's last occurrence
    (the occurrence keys dedupe one fired again), a lease (taken over), a pause's details."""
    try:
        return decode()
    except UNDECODABLE as exc:
        _log_once(named, exc)
        return None


def stored_failure(raw: str | bytes | None, task: str) -> TaskFailure | None:
    """A task's stored failure (JSON), or None: none stored, or a value of another shape (the
    task then reads as not failing, and its next failed round writes it anew)."""
    if raw is None:
        return None
    return or_none(lambda: TaskFailure.model_validate_json(raw), f"the failure of task {task!r}")


_CAPS = TypeAdapter(dict[str, int])


def stored_caps(raw: str | bytes | None, worker: str) -> dict[str, int] | None:
    """A worker's stored caps (JSON), or None: none stored, or a value of another shape (the
    worker then reads as one with no caps, and its next beat writes them anew)."""
    if raw is None:
        return None
    return or_none(lambda: _CAPS.validate_json(raw), f"the caps of worker {worker!r}")


def pause_as_stored(kind: object, name: object, details: Callable[[], object]) -> Pause:
    """A stored pause: what it holds is its key (`kind`, `name`), as every claim reads it; who
    set it, when and why are `details()`, a mapping. Details another program wrote are left out
    (`paused_at` None), so the pause still shows and resuming it lifts it. A key of no kind
    this build writes raises (it holds nothing: `readable` passes it over)."""
    if kind not in PAUSE_KINDS or not isinstance(name, str):
        raise ValueError(f"no pause kind {kind!r} or name {name!r}")
    held: PauseKind = kind

    def told() -> Pause:
        stored = details()
        if not isinstance(stored, Mapping):
            raise TypeError(f"details of type {type(stored).__name__}")
        return Pause.model_validate({**stored, "kind": held, "name": name})

    found = or_none(told, f"the details of pause {kind} {name!r}")
    return found or Pause(kind=held, name=name, paused_at=None)


def _log_once(named: str, exc: BaseException) -> None:
    if named not in _LOGGED:
        if len(_LOGGED) >= _LOGGED_MOST:
            _LOGGED.clear()
        _LOGGED.add(named)
        logger.error("%s cannot be read, left as stored: %s", named, reason(exc))


def reason(exc: BaseException) -> str:
    """Why a stored value could not be read, on one line: `TypeName: what is wrong`."""
    return f"{type(exc).__name__}: {_reason_text(exc)[:200]}" if str(exc) else repr(exc)


def _reason_text(exc: BaseException) -> str:
    """Pydantic's errors as `field: message` (its own text spans lines and ends each with a
    link to its docs), anything else its first line."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or exc.title}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
    lines = str(exc).splitlines()
    return lines[0] if lines else ""
