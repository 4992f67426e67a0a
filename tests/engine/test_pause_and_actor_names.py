"""A pause's queue or job name, its reason, and the actor a caller names (who enqueued, cancelled,
retried or paused) are checked by the name rule (`engine.bounds.name`) where they are written:
a control character, a line or paragraph separator or a bidirectional override is refused as
INVALID_ARGUMENT (terminal) whose `nearest`, passed instead, is accepted; a paused queue or job
name may not start with '-', nor a queue be '*' (it names no queue: a worker reads it as every
queue, a pause held only a queue literally so named). A reason is one line of prose: a line
break mends to a space. A refused call changes nothing, and a pause stored before the rule is
still listed and resumed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, Worker, job
from engine.drivers.base import PAUSES, require
from engine.errors import LEFT_OUT, NOTHING_NEAR, InvalidArgumentError
from schemas.pauses import PauseKind
from tests.engine.test_name_text import BAD


class Order(BaseModel):
    order_id: int


def _declare(registry: JobRegistry) -> None:
    @job(
        name="ship", queue="orders", idempotency_key=lambda i: f"o:{i.order_id}", registry=registry
    )
    async def ship(input: Order, ctx: JobContext) -> None:
        return None


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("kind", ["queue", "job"])
async def test_a_pause_of_a_name_with_a_control_character_is_refused_and_its_mend_pauses(
    jobs: Jobs, kind: str, bad: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.pause(**{kind: bad})
    assert raised.value.argument == kind and raised.value.nearest == "ab"
    assert not raised.value.retryable
    assert await jobs.pauses() == []
    paused = await jobs.pause(**{kind: raised.value.nearest})
    assert (paused.pause.kind, paused.pause.name) == (kind, "ab")


@pytest.mark.parametrize(
    ("kind", "bad", "mended"),
    [("queue", "-x", "x"), ("job", "--ship", "ship"), ("queue", "*", None), ("queue", "-", None)],
)
async def test_a_pause_of_a_name_a_command_line_or_a_worker_misreads_is_refused(
    jobs: Jobs, kind: str, bad: str, mended: str | None
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.pause(**{kind: bad})
    assert raised.value.argument == kind
    assert raised.value.nearest == (NOTHING_NEAR if mended is None else mended)
    assert await jobs.pauses() == []


@pytest.mark.parametrize("bad", BAD)
async def test_a_pause_reason_or_actor_with_a_control_character_is_refused(
    jobs: Jobs, bad: str
) -> None:
    for argument in ("reason", "actor"):
        with pytest.raises(InvalidArgumentError) as raised:
            await jobs.pause(queue="orders", **{argument: bad})
        assert raised.value.argument == argument and not raised.value.retryable
        mended = raised.value.nearest
        assert isinstance(mended, str) and mended.replace(" ", "") == "ab"
        assert await jobs.pauses() == []
        paused = await jobs.pause(queue="orders", **{argument: mended})
        assert getattr(paused.pause, "paused_by" if argument == "actor" else "reason") == mended
        await jobs.resume(queue="orders")


@pytest.mark.parametrize(
    ("reason", "mended"),
    [
        ("smtp down\nsee INC-1", "smtp down see INC-1"),
        ("smtp down\r\n\tsee INC-1\n", "smtp down see INC-1"),
        ("\x1b[31mred\x1b[0m alert\u2028now", "red alert now"),
    ],
)
async def test_a_reason_is_one_line_a_break_mends_to_a_space(
    jobs: Jobs, reason: str, mended: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.pause(queue="orders", reason=reason)
    assert raised.value.nearest == mended


async def test_a_reason_of_breaks_alone_is_mended_by_leaving_it_out(jobs: Jobs) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.pause(queue="orders", reason="\n\x1b[0m\t")
    assert raised.value.nearest is LEFT_OUT


@pytest.mark.parametrize("bad", BAD)
async def test_an_actor_with_a_control_character_is_refused_by_enqueue_cancel_and_retry(
    jobs: Jobs, registry: JobRegistry, bad: str
) -> None:
    _declare(registry)
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.enqueue("ship", {"order_id": 1}, enqueued_by=bad)
    assert raised.value.argument == "enqueued_by" and raised.value.nearest == "ab"
    with pytest.raises(InvalidArgumentError):
        await jobs.enqueue_many([Enqueue("ship", {"order_id": 2})], enqueued_by=bad)
    assert (await jobs.list()).jobs == []

    made = await jobs.enqueue("ship", {"order_id": 1}, enqueued_by=raised.value.nearest)
    assert (await jobs.get(made.id)).enqueued_by == "ab"
    with pytest.raises(InvalidArgumentError) as cancel:
        await jobs.cancel(made.id, actor=bad)
    assert cancel.value.argument == "actor" and cancel.value.nearest == "ab"
    assert (await jobs.get(made.id)).state == "ready"
    await jobs.cancel(made.id, actor=cancel.value.nearest)
    with pytest.raises(InvalidArgumentError) as retry:
        await jobs.retry(made.id, include_cancelled=True, actor=bad)
    assert retry.value.argument == "actor" and retry.value.nearest == "ab"
    assert (await jobs.get(made.id)).state == "cancelled"
    await jobs.retry(made.id, include_cancelled=True, actor=retry.value.nearest)
    assert (await jobs.get(made.id)).state == "ready"


async def test_sane_names_reasons_and_actors_are_taken(jobs: Jobs, registry: JobRegistry) -> None:
    _declare(registry)
    # An actor or a reason is no command-line name: a leading '-' is its own.
    for actor in ("ops@acme.example", "mcp:cancel_job", "-1", "ünïcødé 名前"):
        made = await jobs.enqueue("ship", {"order_id": len(actor)}, enqueued_by=actor)
        await jobs.cancel(made.id, actor=actor)
        await jobs.retry(made.id, include_cancelled=True, actor=actor)
    paused = await jobs.pause(
        queue="billing:eu/west", actor="-ops", reason="- smtp down — see INC-1, ünïcødé"
    )
    assert paused.pause.reason == "- smtp down — see INC-1, ünïcødé"
    assert (await jobs.pause(job="mail.v2 名前")).pause.name == "mail.v2 名前"


async def test_a_pause_stored_before_the_rule_is_still_listed_and_resumed(
    jobs: Jobs, clock: Any
) -> None:
    """Written here past the client's checks, as a pause made before the rule was: reads (the
    list, a resume) never refuse it."""
    store = require(jobs.driver, PAUSES)
    stored: list[tuple[PauseKind, str]] = [
        ("queue", "ma\nil"),
        ("queue", "*"),
        ("queue", "-x"),
        ("job", "-ship\x1b[31m"),
    ]
    for kind, name in stored:
        await store.pause(kind, name, "ops\u202e", "smtp\ndown", clock.now_ms())
    listed = await jobs.pauses()
    assert sorted((p.kind, p.name) for p in listed) == sorted(stored)
    assert {(p.paused_by, p.reason) for p in listed} == {("ops\u202e", "smtp\ndown")}
    for kind, name in stored:
        lifted = await jobs.resume(**{kind: name})
        assert lifted is not None and lifted.name == name
    assert await jobs.pauses() == []


@pytest.mark.parametrize("bad", BAD)
async def test_an_event_kind_or_actor_with_a_control_character_is_refused_and_nothing_stored(
    jobs: Jobs, bad: str
) -> None:
    for kind, actor in ((bad, None), ("audit.note", bad)):
        with pytest.raises(InvalidArgumentError) as raised:
            await jobs.record_event(kind, actor=actor)
        assert raised.value.nearest == "ab" and not raised.value.retryable
    assert await jobs.driver.count_jobless_events(2**62) == 0
    await jobs.record_event("ab", actor="ab")
    assert await jobs.driver.count_jobless_events(2**62) == 1


@pytest.mark.parametrize("bad", BAD)
def test_a_worker_id_with_a_control_character_is_refused(jobs: Jobs, bad: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        Worker(jobs, worker_id=bad)
    assert raised.value.argument == "worker_id" and raised.value.nearest == "ab"
    assert Worker(jobs, worker_id=raised.value.nearest).id == "ab"
