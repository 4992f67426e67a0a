"""Whether a live worker serves a queue, and the notice an answer carries when none does.

An answer that depends on a worker (an enqueue, a wait, a backfill write) is silent about why it
does not move unless it says so: with no live worker on the queue, it carries `NO_LIVE_WORKERS`
with the command that starts one. Presence rows record each worker's queues (None: every
queue), so this is judged per queue, over the workers seen in `LIVE_WORKER_WINDOW_MS`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from engine.metrics import LIVE_WORKER_WINDOW_MS
from mcp_jobs.fix_context import PRIVATE_STORE_FIX, is_remote
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from schemas.stats import WorkerInfo

NO_LIVE_WORKERS = "NO_LIVE_WORKERS"


async def live_workers(scope: Scope) -> list[WorkerInfo]:
    now = scope.jobs.clock.now_ms()
    return await scope.jobs.driver.live_workers(now - LIVE_WORKER_WINDOW_MS)


async def adopt_published_apps(scope: Scope) -> None:
    """A server started without --app writes its worker lines with the modules the workers
    published with their job descriptors, so a line still names the code that runs the jobs."""
    if scope.fixes.apps:
        return
    apps: dict[str, None] = {}
    paths: dict[str, None] = {}
    for descriptor in await scope.jobs.describe():
        if descriptor.source == "published":
            apps.update(dict.fromkeys(descriptor.apps or ()))
            paths.update(dict.fromkeys(descriptor.app_paths or ()))
    if not apps:
        return
    # Where the worker imported them from, for a line run in any directory (as --app's own).
    given = dict(scope.fixes.assignments)
    if paths and "PYTHONPATH" not in given and not is_remote(scope.settings, scope.fixes.face):
        given["PYTHONPATH"] = os.pathsep.join(paths)
    scope._fixes = replace(scope.fixes, apps=tuple(apps), assignments=tuple(given.items()))


def serves(worker: WorkerInfo, queue: str) -> bool:
    return worker.queues is None or queue in worker.queues


def worker_command(scope: Scope, queue: str | None = None, *more: str) -> str:
    """The qualified line that starts a worker (on `queue` when given, with `more` flags); on
    a `memory://` store, which no other process reaches, what to run instead."""
    if scope.fixes.private_store:
        return PRIVATE_STORE_FIX
    words = ["worker"] if queue is None else ["worker", "--queues", queue]
    return scope.fixes.worker(*words, *more)


def app_unknown(scope: Scope) -> str:
    """What a cause adds when the worker line holds the app placeholder."""
    if scope.fixes.apps:
        return ""
    return (
        "; no --app was given here, so the module that declares the jobs is unknown: put it "
        "in place of <module>"
    )


async def no_worker_notice(
    scope: Scope, queue: str, what: str, job_ids: Sequence[str] = ()
) -> Finding | None:
    """NO_LIVE_WORKERS for `queue`, or None when a live worker serves it. `what` names what
    waits ("job 01H…", "the pass of normalize_emails"); `job_ids`, the jobs it names."""
    workers = await live_workers(scope)
    if not any(serves(w, queue) for w in workers):
        await adopt_published_apps(scope)
    if any(serves(w, queue) for w in workers):
        return None
    others = f" ({len(workers)} live worker(s) serve other queues)" if workers else ""
    return Finding(
        code=NO_LIVE_WORKERS,
        severity="warning",
        queue=queue,
        cause=f"no live worker serves queue {queue}{others}: none has checked in for it during "
        f"the last {LIVE_WORKER_WINDOW_MS // 1000} s, so {what} waits until one starts"
        + app_unknown(scope),
        fix=worker_command(scope, queue),
        job_ids=list(job_ids),
    )


__all__ = [
    "NO_LIVE_WORKERS",
    "adopt_published_apps",
    "app_unknown",
    "live_workers",
    "no_worker_notice",
    "serves",
    "worker_command",
]
