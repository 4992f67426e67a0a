"""IDEMPOTENCY_KEY_MISSING raised through the Python API: its fix is the Python call the caller
made, with the key passed (`key=<key>`, a slot to fill with the key the app's code computes),
for each of enqueue, enqueue_many, stage and stage_many. MCP's enqueue_job fix (the tool call)
is its own test (tests/mcp/test_key_missing_fix.py)."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Enqueue, JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError
from engine.testing.kit.test_descriptors import declare


async def _fix(call: Any) -> str:
    with pytest.raises(JobsError) as raised:
        await call
    assert raised.value.code == "IDEMPOTENCY_KEY_MISSING"
    assert raised.value.next_call is None  # the slot is no key: shown, never run
    return raised.value.fix


@pytest.mark.drivers("memory", reason="the rule is the client's; memory stages without an app")
async def test_each_python_call_is_given_its_own_shape_with_the_key(
    jobs: Jobs, clock: ManualClock
) -> None:
    app = JobRegistry()
    declare(app)
    await Worker(Jobs(jobs.driver, registry=app, clock=clock)).publish_descriptors()
    assert isinstance(jobs.driver, MemoryDriver)
    tx = jobs.driver.transaction()
    item = {"order_id": 3}

    assert await _fix(jobs.enqueue("charge", item)) == (
        'await jobs.enqueue("charge", input, key=<key>)'
    )
    assert await _fix(jobs.enqueue_many([Enqueue("charge", item)])) == (
        'await jobs.enqueue_many([Enqueue("charge", input, key=<key>)])'
    )
    assert await _fix(jobs.stage(tx, "charge", item)) == (
        'await jobs.stage(tx, "charge", input, key=<key>)'
    )
    assert await _fix(jobs.stage_many(tx, [Enqueue("charge", item)])) == (
        'await jobs.stage_many(tx, [Enqueue("charge", input, key=<key>)])'
    )
    assert tx.staged == [] and (await jobs.list()).jobs == []
