"""What a worker publishes of its cron tasks (engine/tasks/published.py): each task on one of its
job rows, the one declared nearest the task, so the workers of one app agree on it; bounded (a
description is cut); none from a worker that runs no scheduler."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, job
from engine.tasks import task
from engine.tasks.published import DESCRIPTION_CHARS, describe_all


class At(BaseModel):
    at: int


def _job(registry: JobRegistry, name: str, module: str) -> None:
    async def body(input: At, ctx: JobContext) -> None:
        pass

    body.__module__ = module
    job(name=name, idempotency_key=lambda i: str(i.at), registry=registry)(body)


def _task(registry: JobRegistry, name: str, module: str, description: str | None = None) -> None:
    def enqueue(at: int) -> list[Any]:
        return []

    enqueue.__module__ = module
    task(name=name, cron="0 * * * *", tz="UTC", enqueue=enqueue, description=description,
         registry=registry)  # fmt: skip


def _carried(registry: JobRegistry, **kw: Any) -> dict[str, list[str]]:
    return {
        d.name: [t.name for t in d.tasks or []]
        for d in describe_all(registry, ["billing", "mail"], **kw)
    }


def test_each_task_rides_on_the_job_declared_nearest_it() -> None:
    registry = JobRegistry()
    _job(registry, "charge", "billing.jobs")
    _job(registry, "send_mail", "mail.jobs")
    _task(registry, "nightly-invoices", "billing.tasks")
    _task(registry, "digest", "mail.schedule")
    assert _carried(registry) == {"charge": ["nightly-invoices"], "send_mail": ["digest"]}
    # Another worker of the billing app alone puts its task on the same row.
    alone = JobRegistry()
    _job(alone, "charge", "billing.jobs")
    _task(alone, "nightly-invoices", "billing.tasks")
    assert _carried(alone) == {"charge": ["nightly-invoices"]}


def test_a_published_task_is_bounded() -> None:
    registry = JobRegistry()
    _job(registry, "charge", "billing.jobs")
    _task(registry, "nightly-invoices", "billing.tasks", description="y" * 16_000)
    (row,) = describe_all(registry, ["billing"])
    (published,) = row.tasks or []
    assert (published.cron, published.timezone, published.catch_up) == ("0 * * * *", "UTC", "skip")
    assert published.module == "billing.tasks"
    assert published.description is not None and len(published.description) == DESCRIPTION_CHARS
