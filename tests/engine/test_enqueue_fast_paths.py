"""The enqueue path's shortcuts decide exactly what the general code would: the storable rule
for flat inputs, the text bound for ASCII, the input's JSON dump, and the shared columns of a
batch whose items start in different states."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_serializer

from engine import JobContext, JobRegistry, job
from engine.bounds import text
from engine.drivers.postgres.enqueue import _batch_json
from engine.enqueue_items import Enqueue, EnqueueItems
from engine.errors import InvalidArgumentError
from engine.storable import Unstorable, find_unstorable
from schemas.jobs import EnqueueRequest


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ({"n": 1, "ratio": float("nan")}, Unstorable("$.ratio", "nan is not a JSON number")),
        ({"n": 1, "ratio": float("-inf")}, Unstorable("$.ratio", "-inf is not a JSON number")),
        ({"text": "a\x00b"}, Unstorable("$.text", "a string holding a NUL character (\\u0000)")),
        (
            {"text": "a\ud800b"},
            Unstorable("$.text", "a string holding a lone surrogate (not valid Unicode)"),
        ),
        ({"a\x00": 1}, Unstorable("$.a\x00", "a string holding a NUL character (\\u0000)")),
        ({1: "one"}, Unstorable("$", "a key of type int (keys must be str)")),
        ({"when": object()}, Unstorable("$.when", "a object, which is not a JSON value")),
        (
            {"deep": {"text": "\x00"}},
            Unstorable("$.deep.text", "a string holding a NUL character (\\u0000)"),
        ),
    ],
)
def test_a_flat_input_breaking_the_rule_is_found(value: dict[Any, Any], found: Unstorable) -> None:
    bad = find_unstorable(value)
    assert bad is not None and (bad.path, bad.reason) == found[:2]


def test_a_flat_input_of_plain_values_is_storable() -> None:
    value = {"n": 1, "x": 0.5, "ok": True, "none": None, "text": "abc", "word": "é", "list": [1]}
    assert find_unstorable(value) is None


@pytest.mark.parametrize("value", ["x" * 200, "é" * 100, "k:42"])
def test_text_within_its_bound_is_accepted(value: str) -> None:
    assert text("key", value, 200) is value


@pytest.mark.parametrize("value", ["", "x" * 201, "é" * 101, "a\x00b", "a\ud800b", 5])
def test_text_out_of_its_bound_is_refused(value: object) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        text("key", value, 200)
    assert raised.value.code == "INVALID_ARGUMENT"


class Renamed(BaseModel):
    user_id: int = Field(serialization_alias="userId")
    when: float

    @field_serializer("when")
    def _when(self, value: float) -> str:
        return f"t={value}"


class Dumped(BaseModel):
    n: int

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().model_dump(**kwargs), "dumped_by": "override"}


def _items() -> tuple[EnqueueItems, JobRegistry]:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: str(i.user_id), registry=registry)
    async def renamed(input: Renamed, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=lambda i: str(i.n), registry=registry)
    async def dumped(input: Dumped, ctx: JobContext) -> None:
        return None

    return EnqueueItems(registry, None, 1 << 20), registry


@pytest.mark.parametrize(
    ("name", "value"),
    [("renamed", Renamed(user_id=7, when=1.5)), ("dumped", Dumped(n=3))],
)
def test_the_stored_input_is_the_models_json_dump(name: str, value: BaseModel) -> None:
    items, _ = _items()
    request = items.request(Enqueue(name, value), None, 0, None, "id", "run")
    assert request.input == value.model_dump(mode="json")
    assert request == EnqueueRequest(
        id="id",
        run_id="run",
        name=name,
        queue="default",
        idempotency_key=request.idempotency_key,
        input=value.model_dump(mode="json"),
        run_at=0,
        max_attempts=request.max_attempts,
    )


def _request(job_id: str, run_at: int, key: str) -> EnqueueRequest:
    return EnqueueRequest(job_id, job_id + "r", "send", "default", key, {"n": 1}, run_at, 3)


def test_a_batch_shares_columns_per_starting_state() -> None:
    now = 1_000
    batch = [_request("a", now, "1"), _request("b", now + 5, "2"), _request("c", now, "3")]
    rows_doc, shared_doc = _batch_json(batch, now)
    rows, shared = json.loads(rows_doc), json.loads(shared_doc)
    states = {row[0]: shared[row[4]][3] for row in rows}
    run_ats = {row[0]: shared[row[4]][4] for row in rows}
    assert states == {"a": "ready", "b": "delayed", "c": "ready"}
    assert run_ats == {"a": now, "b": now + 5, "c": now}
    assert len(shared) == 2
