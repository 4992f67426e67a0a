"""Enqueue: one script per batch, deduped over live rows (rules 2, 3) inside the script."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

from engine.drivers.redis.codec import (
    dedupe_field,
    dumps,
    job_state,
    record_fields,
)
from engine.drivers.redis.dedupe_index import mended
from engine.drivers.redis.scripts import ENQUEUE_SCRIPT
from engine.drivers.redis.store import Store
from engine.errors import JobDuplicateError
from engine.rules import new_record
from schemas.jobs import EnqueueRequest, EnqueueResult


class TaskClaim(NamedTuple):
    """A task's occurrences claimed by the script that enqueues their jobs (scripts.ENQUEUE):
    its last fired occurrence moves from `expected` (None: no state) to `occurrence_ms`."""

    task: str
    expected: int | None
    occurrence_ms: int


async def enqueue(
    store: Store,
    requests: Sequence[EnqueueRequest],
    now: int,
    outbox_ids: Sequence[str] | None = None,
    token: str = "",
) -> list[EnqueueResult]:
    """Insert `requests` atomically (or, with `outbox_ids`, those of the rows `token` still
    holds unpublished, marking them published). One result per request written."""
    results = await enqueue_claiming(store, requests, now, outbox_ids, token)
    assert results is not None  # only a claim is ever lost
    return results


async def enqueue_claiming(
    store: Store,
    requests: Sequence[EnqueueRequest],
    now: int,
    outbox_ids: Sequence[str] | None = None,
    token: str = "",
    claim: TaskClaim | None = None,
) -> list[EnqueueResult] | None:
    """As `enqueue`; with `claim`, the task's occurrences are claimed in the same script, and
    None (nothing written) answers a claim lost."""
    if not requests:
        return []
    items = []
    for n, request in enumerate(requests):
        record = new_record(request, now)
        fields = record_fields(record)
        fields["ver"] = "1"
        item: dict[str, object] = {
            "id": request.id,
            "dk": dedupe_field(request.name, request.tenant_id, request.idempotency_key),
            "oc": request.on_conflict,
            "q": request.queue,
            "nm": request.name,
            "rank": fields["rank"],
            "st": record.state,
            "f": [part for pair in fields.items() for part in pair],
        }
        if request.tenant_id is not None:
            item["tn"] = request.tenant_id
        if outbox_ids is not None:
            item["ob"] = outbox_ids[n]
        items.append(item)
    args = [store.keys.prefix, dumps(items), token, str(now)]
    if claim is not None:
        expected = "" if claim.expected is None else str(claim.expected)
        args += [claim.task, expected, str(claim.occurrence_ms)]
    answer = await mended(store, lambda: ENQUEUE_SCRIPT(store.client, args), len(items))
    if answer == 1:
        # Every request kept and new: the script says just that.
        store.wake.notify()
        return [EnqueueResult(r.id, r.run_id, False, r.initial_state(now)) for r in requests]
    if answer and answer[0] == "lost":
        return None
    if answer and answer[0] == "dup":
        request = requests[int(answer[1]) - 1]
        raise JobDuplicateError(
            request.name, request.idempotency_key, str(answer[2]), request.tenant_id
        )
    results: list[EnqueueResult] = []
    for entry in answer:
        request = requests[int(entry[0]) - 1]
        kind = entry[1]
        if kind == "new":
            results.append(
                EnqueueResult(request.id, request.run_id, False, request.initial_state(now))
            )
        elif kind == "held":
            results.append(
                EnqueueResult(str(entry[2]), json.loads(entry[3]), True, job_state(entry[4]))
            )
        else:
            earlier = requests[int(entry[2]) - 1]
            results.append(
                EnqueueResult(earlier.id, earlier.run_id, True, earlier.initial_state(now))
            )
    if any(not r.deduped for r in results):
        store.wake.notify()
    return results
