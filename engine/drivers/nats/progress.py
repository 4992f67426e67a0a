"""Progress: written into the job's record by CAS while the token holds it running."""

from __future__ import annotations

from engine.drivers.nats.claims import held
from engine.drivers.nats.codec import JobDoc
from engine.drivers.nats.store import Store
from engine.errors import JobSlotLostError
from schemas.progress import Progress


async def save_progress(store: Store, job_id: str, token: str, progress: Progress) -> bool:
    def report(doc: JobDoc | None) -> JobDoc:
        current = held(doc, job_id, token)
        return current.with_record(current.record.model_copy(update={"progress": progress}), token)

    try:
        await store.change_doc(job_id, report)
    except JobSlotLostError:
        return False
    return True
