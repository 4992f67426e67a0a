"""Setting right a dedupe field that names no live job.

The driver keeps a field of the dedupe hash on live jobs alone (rule 2), so one naming a job
the live set lacks was written by another program. The scripts that read a holder answer such a
field as `stale` and write nothing (scripts.LIVE_HOLDER_FN); `mend` then looks for the field's
live job by a walk of the live set (a chunk a round trip, as a list of live jobs reads), sets
the field to it, or removes the field when there is none, and the caller runs its script again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError

from engine.drivers.redis.codec import stored_dedupe_field
from engine.drivers.redis.scripts import MEND_DEDUPE_SCRIPT
from engine.drivers.redis.store import Store


class DedupeContended(RedisError):
    """A dedupe field another program keeps writing: the driver's guard answers it as the store
    being unavailable (retryable), as a NATS key changed under every compare-and-set is."""


_CHUNK = 500
_IDENTITY = ("name", "tenant_id", "idempotency_key")


async def live_job_of(store: Store, field: str) -> str | None:
    """The live job whose dedupe field is `field`, found without the dedupe hash."""
    client = store.client
    async for chunk in _chunks(client.sscan_iter(store.keys.live, count=_CHUNK)):
        pipe = client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.hmget(store.keys.job(job_id), *_IDENTITY)
        for job_id, stored in zip(chunk, await pipe.execute(), strict=True):
            if None not in stored and stored_dedupe_field(*stored) == field:
                return str(job_id)
    return None


async def mend(store: Store, field: str, stale: str) -> None:
    """Set `field` (naming `stale`, no live job) to its live job, or remove it."""
    found = await live_job_of(store, field)
    await MEND_DEDUPE_SCRIPT(store.client, [store.keys.prefix, field, stale, found or ""])


async def mended(store: Store, run: Callable[[], Awaitable[Any]], fields: int = 1) -> Any:
    """`run`'s answer (a script's), mending each stale dedupe field it names and running again.
    Each mend sets right one of the `fields` the script reads; one named stale again after as
    many mends is being written by another program meanwhile (`DedupeContended`)."""
    for _ in range(fields + 1):
        answer = await run()
        if not (isinstance(answer, list) and answer and answer[0] == "stale"):
            return answer
        await mend(store, answer[1], answer[2])
    raise DedupeContended(
        f"the dedupe field {answer[1]} names job {answer[2]}, which is not live, again after "
        f"{fields + 1} mends: another program writes the dedupe hash {store.keys.dedupe}; "
        "nothing of the call was written"
    )


async def _chunks(ids: Any) -> Any:
    chunk: list[str] = []
    async for job_id in ids:
        chunk.append(job_id)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
