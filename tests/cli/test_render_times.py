"""The CLI's text prints every time with its zone: the times are UTC, and a person at a terminal
in New York must not read them as local."""

from __future__ import annotations

import io
from typing import Any

import pytest

from mcp_jobs.cli.render import print_text

AT = 1_796_000_000_000  # 2026-11-30 00:53:20 UTC
LATER = AT + 90_061_000


def text(kind: str, envelope: dict[str, Any]) -> str:
    out = io.StringIO()
    print_text(kind, envelope, out)
    return out.getvalue()


def job(job_id: str, updated_at: int) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": "tick",
        "queue": "default",
        "tenant_id": None,
        "state": "delayed",
        "attempt": 1,
        "max_attempts": 3,
        "updated_at": updated_at,
        "input": {},
    }


def test_the_jobs_table_labels_its_times_utc_and_keeps_its_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    shown = text("list_jobs", {"jobs": [job("a" * 26, AT), job("b" * 26, LATER)]}).splitlines()
    assert "2026-11-30 00:53:20 UTC" in shown[1] and "2026-12-01 01:54:21 UTC" in shown[2]
    # UPDATED and the column after it start where their headers do, on every row.
    start = shown[0].index("UPDATED")
    assert all(line[start:].startswith("2026-") for line in shown[1:])


def test_a_job_shown_labels_its_due_and_event_times_utc() -> None:
    envelope = {
        "job": job("a" * 26, AT),
        "next_attempt_at": LATER,
        "lease": {"expired": True, "worker_id": "w1", "expires_at": AT},
        "events": [{"at": AT, "kind": "failed", "actor": None}],
    }
    shown = text("inspect_job", envelope)
    assert "  due: 2026-12-01 01:54:21 UTC\n" in shown
    assert "  event 2026-11-30 00:53:20 UTC failed\n" in shown
    assert "until 2026-11-30 00:53:20 UTC\n" in shown
