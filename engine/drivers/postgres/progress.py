"""Progress on PostgreSQL (engine/progress.py): the job row's `progress` column, jsonb.

Fenced as an ack is: only the token that holds the job running writes; a stale holder's report
changes nothing. Safe to run again through a broken connection (`Connections.idempotent`): the
second run writes the same value under the same fence.
"""

from __future__ import annotations

from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.rows import json_text
from schemas.progress import Progress

SAVE = """
UPDATE {schema}.jobs SET progress = $3::jsonb
 WHERE id = $1 AND lease_token = $2 AND state = 'running'
RETURNING 1
"""


async def save(db: Connections, job_id: str, token: str, progress: Progress) -> bool:
    sql = SAVE.format(schema=db.schema)
    value = json_text(progress.model_dump(mode="json"))
    found = await db.idempotent(lambda c: c.fetchval(sql, job_id, token, value))
    return found is not None
