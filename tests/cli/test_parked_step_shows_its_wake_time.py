"""`jobs show` of a job parked in a step: the step's line says when it wakes (its stored
`wake_at`), where it printed `(…)` although the time is known; a step still running keeps `…`."""

from __future__ import annotations

import io
from typing import Any

import pytest

from mcp_jobs.cli.render import print_text

STARTED = 1_796_000_000_000  # 2026-11-30 00:53:20 UTC
WAKES = STARTED + 3_600_000


def _shown(steps: list[dict[str, Any]]) -> list[str]:
    envelope = {
        "ok": True,
        "job": {
            "id": "01" + "0" * 30,
            "name": "send_welcome",
            "queue": "emails",
            "tenant_id": None,
            "state": "suspended",
            "attempt": 0,
            "max_attempts": 3,
            "input": {},
        },
        "steps": steps,
    }
    out = io.StringIO()
    print_text("inspect_job", envelope, out)
    return [line.strip() for line in out.getvalue().splitlines() if "step " in line]


@pytest.mark.parametrize(
    ("status", "output"),
    [
        ("sleeping", {"wake_at": WAKES}),
        ("waiting", {"event": "paid", "key": "7", "timeout_at": WAKES, "wake_at": WAKES}),
    ],
)
def test_a_parked_step_says_when_it_wakes(status: str, output: dict[str, Any]) -> None:
    step = {"name": "cool-off", "status": status, "output": output, "started_at": STARTED}
    assert _shown([step]) == [f"step cool-off: {status} (until 2026-11-30 01:53:20 UTC)"]


def test_a_running_step_keeps_its_ellipsis() -> None:
    step = {"name": "send", "status": "running", "output": None, "started_at": STARTED}
    assert _shown([step]) == ["step send: running (…)"]
