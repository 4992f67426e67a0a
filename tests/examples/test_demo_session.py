"""`mcp-jobs demo` shows MCP beyond tool calls (#23): the backfill write confirmed by the person
(elicitation, with the plan) and run as a task, and a run followed by subscription as it moves."""

from __future__ import annotations

import os
import re
import sys

import anyio
import pytest

DEMO_BOUND_S = 55  # a bound on the whole run, never a pause


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One demo run on the default (SQLite) database in a fresh directory."""
    cwd = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env["PYTHONUNBUFFERED"] = "1"

    async def run() -> tuple[int, str, str]:
        with anyio.fail_after(DEMO_BOUND_S):
            done = await anyio.run_process(
                [sys.executable, "-m", "mcp_jobs.cli", "demo"], cwd=cwd, env=env, check=False
            )
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    code, out, err = anyio.run(run)
    assert code == 0, out[-3000:] + err[-3000:]
    assert "demo finished: every step answered as expected." in out
    return out


@pytest.mark.slow
def test_the_session_speaks_the_revision_with_tasks_and_subscribe(demo_output: str) -> None:
    assert "connected: protocol 2025-11-25" in demo_output
    assert "null" not in demo_output


@pytest.mark.slow
def test_the_person_is_shown_the_plan_and_accepts(demo_output: str) -> None:
    asked = demo_output.split("? the server asks the person (elicitation/create):", 1)[1]
    question = " ".join(asked.split("! the person answers:", 1)[0].split())
    assert question.startswith("Confirm run_backfill (a write) in environment development")
    assert re.search(r"sweeps \d+ row\(s\) in \d+ batch\(es\) of 50", question), question
    answer = asked.split("! the person answers:", 1)[1].splitlines()[0]
    assert '"action": "accept"' in answer


@pytest.mark.slow
def test_the_backfill_write_runs_as_a_task_to_a_completed_result(demo_output: str) -> None:
    call = next(line for line in demo_output.splitlines() if "→ tools/call" in line)
    assert '"task": {"ttl":' in call and '"write": true' in call
    (task_id,) = set(re.findall(r'"taskId": "(run_backfill:[0-9a-f]+)"', demo_output))
    assert f'→ tasks/get {{"taskId": "{task_id}"}}' in demo_output
    after = demo_output.split(f'→ tasks/result {{"taskId": "{task_id}"}}', 1)[1]
    result, polled = after.split(f'→ tasks/get {{"taskId": "{task_id}"}}', 1)
    assert '"mode": "write"' in result and '"status": "completed"' in result
    assert '"settled": true' in result
    assert '"status": "completed"' in polled.split("\n\n", 1)[0]


@pytest.mark.slow
def test_a_subscription_reports_the_order_moving_until_done(demo_output: str) -> None:
    updates = re.findall(
        r"⇠ notifications/resources/updated (jobs://runs/\w+)\n\s+re-read: state (\w+), "
        r"(\d+) step\(s\)",
        demo_output,
    )
    assert updates, "no subscription update was printed"
    assert len({uri for uri, _, _ in updates}) == 1
    assert updates[-1][1:] == ("done", "4")
