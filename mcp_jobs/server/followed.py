"""What a subscription can follow, and the cheap reading that says whether it changed.

A fingerprint leaves out what moves with the clock alone (a queue's oldest-ready age, a
descriptor's staleness): a subscriber is told when the stored state changed, not every time
the server looks.
"""

from __future__ import annotations

import json

from mcp_jobs import operations
from mcp_jobs.errors import SubscriptionUnsupportedError
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState

RUN_PREFIX = "jobs://runs/"
STATS = "jobs://stats"
BACKFILLS = "jobs://backfills"
DESCRIPTORS = "jobs://descriptors"
SUBSCRIBABLE = (f"{RUN_PREFIX}{{job_id}}", STATS, BACKFILLS, DESCRIPTORS)
# What grows while nothing is written (ages, and a busy queue's done window): a reading changes
# with them, the stats do not.
_CLOCK_FIELDS = {"oldest_ready_ms", "oldest_due_suspended_ms", "settled_window_ms"}


def run_id_of(uri: str) -> str | None:
    """The job id of a `jobs://runs/{job_id}` URI, None for any other."""
    if not uri.startswith(RUN_PREFIX):
        return None
    job_id = uri[len(RUN_PREFIX) :]
    return job_id if job_id and "/" not in job_id else None


def check(uri: str) -> None:
    """Refuse a URI no change notification is sent for (SUBSCRIPTION_UNSUPPORTED)."""
    if uri not in (STATS, BACKFILLS, DESCRIPTORS) and run_id_of(uri) is None:
        raise SubscriptionUnsupportedError(uri, SUBSCRIBABLE)


async def fingerprint(state: AppState, uri: str) -> str:
    """A reading of `uri` that differs exactly when what it shows was written. Engine errors
    propagate (a run that does not exist, in this server's tenant, is JOB_NOT_FOUND)."""
    tenant = state.settings.tenant
    job_id = run_id_of(uri)
    if job_id is not None:
        # The record alone: every transition rewrites it (state, attempt, updated_at).
        return (await state.jobs.get(job_id, tenant_id=tenant)).model_dump_json()
    if uri == STATS:
        stats = await state.jobs.stats(tenant_id=tenant)
        return json.dumps([s.model_dump(exclude=_CLOCK_FIELDS) for s in stats], sort_keys=True)
    if uri == BACKFILLS:
        scope = request_scope(state, uri)
        return (await operations.list_backfills(scope)).model_dump_json()
    return await descriptor_list(state)


async def descriptor_list(state: AppState) -> str:
    """The published descriptors' names and versions: what the resource list is made of (a
    worker's periodic republish of the same versions is no change)."""
    store = state.jobs.descriptors
    if store is None:
        return "[]"
    published = await store.published_descriptors()
    return json.dumps([[d.name, d.version] for d in published])
