"""Whether this system knows a job name or a queue.

A job name is known when a job is declared under it (here, or published by a worker) or a job
row holds it; a queue when it is the queue of such a job, holds rows (this tenant's, under a
pin), or a live worker serves it. A filter or a pause naming neither is most often a typo: the
answer says so and lists the known ones, rather than an empty list that looks healthy. A name
a worker can run is narrower: one a live worker published (`run_by_live_workers`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from engine.descriptors import judged
from engine.errors import REGISTRY, JobsError, JobUnknownError
from mcp_jobs.errors import ErrorCodeUnknownError, QueueUnknownError
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.workers import live_workers

# How many of the newest job rows lend their names to a JOB_UNKNOWN's "meant" and listing.
STORED_SCAN = 200


async def known_queues(scope: Scope) -> list[str]:
    """Every queue this system knows (see the module docstring), sorted."""
    tenant = scope.tenant(None)
    names = {d.queue for d in await scope.jobs.describe()}
    names.update(s.queue for s in await scope.jobs.stats(None, tenant_id=tenant))
    for worker in await live_workers(scope):
        names.update(worker.queues or ())
    return sorted(names)


async def run_by_live_workers(scope: Scope) -> set[str]:
    """The job names some live worker runs: those a worker published within the live window.
    What this process registered says nothing of the workers, so it does not count here."""
    store = scope.jobs.descriptors
    if store is None:
        return set()
    now = scope.jobs.clock.now_ms()
    return {d.name for d in await store.published_descriptors() if not judged(d, now).stale}


async def unknown_queues(scope: Scope, queues: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(the asked queues this system does not know, the known ones); nothing asked: ([], [])."""
    if not queues:
        return [], []
    known = await known_queues(scope)
    return [q for q in queues if q not in known], known


async def unknown_filter(
    scope: Scope,
    name: str | None,
    queue: str | None,
    tenant: str | None,
    *,
    paused: Sequence[str] = (),
) -> JobsError | None:
    """JOB_UNKNOWN or QUEUE_UNKNOWN for a job name or queue that is neither declared nor stored
    (nor served), listing the known ones; None when both are known. `paused`: names known
    besides (a resume's pauses in force), meant as the others are but listed apart from them,
    since a pause declares no job and serves no queue."""
    if name is not None:
        known = [d.name for d in await scope.jobs.describe()]
        if name not in known and name not in paused:
            stored = await scope.jobs.list(name=name, tenant_id=tenant, limit=1)
            if not stored.jobs:
                held = await stored_names(scope, tenant)
                return JobUnknownError(
                    name,
                    known,
                    paused=_apart(paused, known),
                    stored=sorted(held - set(known) - set(paused)),
                )
    if queue is not None:
        unknown, known = await unknown_queues(scope, [queue])
        if unknown and queue not in paused:
            return QueueUnknownError(queue, known, paused=_apart(paused, known))
    return None


async def stored_names(scope: Scope, tenant: str | None) -> set[str]:
    """The job names the newest STORED_SCAN rows hold: what a name that slipped most likely
    meant when this face registers none (no --app), at the cost of one page."""
    page = await scope.jobs.list(tenant_id=tenant, limit=STORED_SCAN)
    return {record.name for record in page.jobs}


def _apart(paused: Sequence[str], known: Sequence[str]) -> list[str]:
    """The paused names that are not also known otherwise (those are listed as known)."""
    return sorted(set(paused) - set(known))


async def unknown_error_code(
    scope: Scope,
    action: str,
    error_code: str,
    held: Callable[[], Awaitable[Sequence[str]]],
) -> ErrorCodeUnknownError | None:
    """ERROR_CODE_UNKNOWN for a code that matched nothing and that neither the jobs the action
    matches hold (`held`, read only then) nor the engine writes: a typo (`JOB_FAILD`) answered
    "0 matched" looks like nothing to retry. A code the engine writes is known though no job
    holds it now. (A job's own JobsError subclass registers its code when its module loads.)"""
    if error_code in REGISTRY:
        return None
    stored = sorted(set(await held()))
    if error_code in stored:
        return None
    return ErrorCodeUnknownError(error_code, stored, sorted(REGISTRY), action)
