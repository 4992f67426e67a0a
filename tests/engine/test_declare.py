"""Declarations are refused at the decorator when they could never be safe (rule 1)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Retry, job
from engine.declare import JobDefinition
from engine.errors import JobsError
from engine.retry import MAX_ATTEMPTS


class Welcome(BaseModel):
    user_id: int


def test_a_job_without_an_idempotency_key_is_refused(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as raised:

        @job(registry=registry)
        async def send(input: Welcome, ctx: JobContext) -> None:
            return None

    assert raised.value.code == "IDEMPOTENCY_REQUIRED"
    assert len(registry) == 0


def test_a_second_job_under_one_name_is_refused(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"u:{i.user_id}", name="send", registry=registry)
    async def first(input: Welcome, ctx: JobContext) -> None:
        return None

    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: f"u:{i.user_id}", name="send", registry=registry)
        async def second(input: Welcome, ctx: JobContext) -> None:
            return None

    assert raised.value.code == "JOB_NAME_TAKEN"
    assert registry.require("send").fn is first.fn


def test_a_look_alike_object_never_registers(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"u:{i.user_id}", registry=JobRegistry())
    async def real(input: Welcome, ctx: JobContext) -> None:
        return None

    fake = JobDefinition(**{**real.__dict__, "origin": object()})
    with pytest.raises(JobsError) as raised:
        registry.add(fake)
    assert raised.value.code == "JOB_DECLARATION_INVALID"
    assert registry.get("real") is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"retry": Retry(attempts=0)}, "retry.attempts"),
        ({"retry": Retry(base_delay=-1)}, "retry.base_delay"),
        ({"queue": ""}, "queue"),
        # Each was taken: 2**31 attempts had describe build a list of 2**31 delays (minutes at
        # every start); an unknown backoff ran as exponential and broke describe_jobs; a retry
        # that is no Retry, or a base_delay of text, was an AttributeError or TypeError; "" as
        # the name was read as "use the function's name".
        ({"retry": Retry(attempts=2**31)}, "retry.attempts"),
        ({"retry": Retry(attempts=1_001)}, "retry.attempts"),
        ({"retry": Retry(backoff="cubic")}, "retry.backoff"),  # type: ignore[arg-type]
        ({"retry": Retry(base_delay="1")}, "retry.base_delay"),  # type: ignore[arg-type]
        ({"retry": Retry(max_delay=None)}, "retry.max_delay"),  # type: ignore[arg-type]
        ({"retry": 3}, "retry"),
        ({"name": ""}, "name"),
        # A description that is no text broke every describe_jobs answer (INTERNAL).
        ({"description": 5}, "description"),
        ({"description": "a\x00b"}, "description"),
    ],
)
def test_impossible_values_are_refused(
    registry: JobRegistry, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", registry=registry, **kwargs)  # type: ignore[arg-type]
        async def bad(input: Welcome, ctx: JobContext) -> None:
            return None

    assert raised.value.code == "JOB_DECLARATION_INVALID"
    assert raised.value.details is not None and raised.value.details["field"] == field


def test_the_input_must_be_a_pydantic_model(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", registry=registry)
        async def untyped(input: dict, ctx: JobContext) -> None:  # type: ignore[type-arg]
            return None

    assert raised.value.code == "JOB_DECLARATION_INVALID"


def test_describe_publishes_the_contract_and_never_the_key(registry: JobRegistry) -> None:
    @job(
        idempotency_key=lambda i: f"secret-user:{i.user_id}",
        queue="emails",
        retry=Retry(attempts=3, base_delay=10),
        timeout=30,
        concurrency=4,
        tenant_required=True,
        registry=registry,
    )
    async def send_welcome(input: Welcome, ctx: JobContext) -> None:
        """Send the welcome email."""

    d = send_welcome.describe()
    assert (d.name, d.queue, d.timeout_ms, d.concurrency) == ("send_welcome", "emails", 30_000, 4)
    assert d.tenant_required and d.idempotent
    assert d.description == "Send the welcome email."
    assert d.retry.delays_ms == [10_000, 20_000]
    assert d.input_schema["properties"]["user_id"]["type"] == "integer"
    assert "secret-user" not in d.model_dump_json()


def test_a_definition_is_described_once(registry: JobRegistry) -> None:
    # queue_stats and describe_jobs describe every job on each call: the input's JSON schema is
    # generated once per definition, not per call.
    @job(idempotency_key=lambda i: f"u:{i.user_id}", registry=registry)
    async def send(input: Welcome, ctx: JobContext) -> None:
        return None

    first = send.describe()
    assert send.describe() is first
    assert first.input_schema["properties"]["user_id"]["type"] == "integer"


def test_the_most_attempts_a_job_may_declare_is_described_at_once(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: "k", registry=registry, retry=Retry(attempts=MAX_ATTEMPTS))
    async def patient(input: Welcome, ctx: JobContext) -> None:
        return None

    delays = patient.describe().retry.delays_ms
    assert len(delays) == MAX_ATTEMPTS - 1 and delays[-1] == 3_600_000
