"""The enqueue's short cuts store and answer what the plain version did: each record field is
still the JSON text of its JSON-mode dump (byte for byte: scripts compare some of them as text),
pydantic is skipped for a fresh record, and an all-new batch is answered with a bare 1."""

from __future__ import annotations

import os
from typing import Any, cast

import pytest

from engine import Jobs, ManualClock
from engine.rules import claim_rank, new_record
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, JobRecord
from schemas.progress import Progress

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.asyncio import Redis

from engine.drivers.redis import RedisDriver
from engine.drivers.redis import enqueue as enqueue_module
from engine.drivers.redis.codec import RECORD_FIELDS, dumps, record_fields


def _request(n: int, now: int, key: int | None = None, **extra: Any) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{1000 + n:032x}",
        name='wörk "quoted"',
        queue="default",
        idempotency_key=f"k{n if key is None else key}\n☃",
        input={"n": n, "list": [1, 2.5, "é", None, True], "deep": {"x": {}}},
        run_at=now,
        max_attempts=3,
        **extra,
    )


def _plain(record: JobRecord) -> dict[str, str]:
    """What record_fields wrote before: dumps of every field of the JSON-mode dump."""
    dumped = record.model_dump(mode="json")
    fields = {name: dumps(dumped[name]) for name in RECORD_FIELDS}
    fields["q"] = record.queue
    fields["rank"] = str(claim_rank(record)[0])
    return fields


def _records() -> list[JobRecord]:
    fresh = new_record(_request(1, 1_700_000_000_000, tenant_id="t", priority=-3), 5)
    error = ErrorPayload(code="JOB_FAILED", title="t", cause="c", fix="f", retryable=True)
    progress = Progress(done=1, total=2, message="half", at=7, attempt=1)
    return [
        fresh,
        fresh.model_copy(update={"state": "running", "worker_id": "w☃", "cancel_requested": True}),
        fresh.model_copy(update={"output": {"a": [1, {"b": None}]}, "finished_at": 9}),
        fresh.model_copy(update={"output": [1, "two"], "last_error": error, "progress": progress}),
        fresh.model_copy(update={"output": "text", "rerun_of": "r"}),
        fresh.model_copy(update={"output": 2.5}),
    ]


@pytest.mark.parametrize("record", _records(), ids=lambda r: str(r.state))
def test_every_field_is_stored_as_its_json_mode_dump(record: JobRecord) -> None:
    assert record_fields(record) == _plain(record)


def test_a_fresh_record_is_encoded_without_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    record = _records()[0]
    expected = _plain(record)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("model_dump called for a record of plain values")

    monkeypatch.setattr(JobRecord, "model_dump", refuse)
    assert record_fields(record) == expected


async def test_an_all_new_batch_is_answered_with_one_and_a_dedupe_with_entries(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    answers: list[object] = []
    script = enqueue_module.ENQUEUE_SCRIPT

    async def spy(client: Any, args: list[str]) -> Any:
        answer = await script(client, args)
        answers.append(answer)
        return answer

    monkeypatch.setattr(enqueue_module, "ENQUEUE_SCRIPT", spy)
    now = clock.now_ms()
    first = await driver.enqueue([_request(1, now), _request(2, now + 60_000)])
    again = await driver.enqueue([_request(3, now, key=1), _request(4, now)])
    assert answers[0] == 1 and isinstance(answers[1], list)
    assert [(r.id, r.deduped, r.state) for r in first] == [
        (f"{1:032x}", False, "ready"),
        (f"{2:032x}", False, "delayed"),
    ]
    assert [(r.id, r.deduped) for r in again] == [(f"{1:032x}", True), (f"{4:032x}", False)]
    # What the hash holds is what the plain encoding wrote, and it reads back as the record.
    client = Redis.from_url(os.environ["MCP_JOBS_TEST_REDIS_URL"], decode_responses=True)
    try:
        stored = await client.hgetall(f"{driver.prefix}job:{1:032x}")
    finally:
        await client.aclose()
    record = new_record(_request(1, now), now)
    assert {k: stored[k] for k in (*RECORD_FIELDS, "q", "rank")} == _plain(record)
    assert await driver.get(record.id) == record
