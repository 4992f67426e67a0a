"""The pause rule: which waiting jobs a claim leaves alone, and the checks `Jobs.pause` applies.

A job is held while its queue or its name is paused (schemas.pauses). Held jobs stay as they
are — `ready` keeps counting in depth and age, as a shed job does (rule 7) — and running jobs
finish: a pause stops new attempts only, including the take-over of an expired lease, since that
would start the job again. The memory driver calls `is_held`; the SQL drivers encode it as an
anti-join on their pauses table, pinned by the kit (engine/testing/kit/test_pauses.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from engine import bounds
from engine.bounds import MAX_NAME_BYTES, MAX_QUEUE_BYTES
from engine.errors import LEFT_OUT, InvalidArgumentError
from schemas.jobs import JobRecord
from schemas.pauses import Pause, PauseKind

# A pause's reason, in bytes of UTF-8: a line for an operator, not a document.
MAX_REASON_BYTES = 1000

PauseKey = tuple[PauseKind, str]


class Paused(NamedTuple):
    """What `Jobs.pause` answers: the pause in force, and whether it was there before the call
    (then nothing changed: the first pause keeps its actor, time and reason)."""

    pause: Pause
    already_paused: bool


def key_of(pause: Pause) -> PauseKey:
    return (pause.kind, pause.name)


def is_held(job: JobRecord, paused: Collection[PauseKey]) -> bool:
    """Whether a pause in `paused` holds `job` back from a claim: its queue or its name."""
    return ("queue", job.queue) in paused or ("job", job.name) in paused


def target(queue: object, job: object) -> PauseKey:
    """The one thing a pause call names, within bounds: exactly one of `queue` and `job`."""
    if (queue is None) == (job is None):
        if queue is None:
            raise InvalidArgumentError(
                "queue", None, "a queue's name, or else a job name as job", missing=True
            )
        # The job's pause (or resume) is the narrower write: the queue is what is left out.
        raise InvalidArgumentError(
            "queue",
            queue,
            "left out when job is given: a pause names one, and the job's is the narrower",
            nearest=LEFT_OUT,
        )
    if queue is not None:
        return ("queue", bounds.text("queue", queue, MAX_QUEUE_BYTES))
    return ("job", bounds.text("job", job, MAX_NAME_BYTES))


def written(
    queue: object, job: object, actor: object, reason: object
) -> tuple[PauseKey, str | None, str | None]:
    """A new pause's target, actor and reason, each within bounds. The pause writes its name
    anew (`queues ls`, findings, resume lines): the declaration's rule, so none names what no
    job can be in ('*', '-x', a line break). Resume and the lists read what is stored as is."""
    kind, name = target(queue, job)
    name = bounds.queue_name(kind, name) if kind == "queue" else bounds.job_name(kind, name)
    return (
        (kind, name),
        bounds.optional_actor("actor", actor),
        bounds.optional_line("reason", reason, MAX_REASON_BYTES),
    )
