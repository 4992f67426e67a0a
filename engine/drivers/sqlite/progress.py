"""Progress on SQLite (engine/progress.py): the job row's `progress` column, JSON text.

Runs inside the executor's one transaction. Fenced as an ack is: only the token that holds the
job running writes; a stale holder's report changes nothing.
"""

from __future__ import annotations

from engine.drivers.sqlite.library import sqlite3
from schemas.progress import Progress

SAVE = """
UPDATE mcp_jobs_jobs SET progress = :progress
WHERE id = :id AND token = :token AND state = 'running'
"""


def save(conn: sqlite3.Connection, job_id: str, token: str, progress: Progress) -> bool:
    params = {"id": job_id, "token": token, "progress": progress.model_dump_json()}
    return conn.execute(SAVE, params).rowcount == 1
