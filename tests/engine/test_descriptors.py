"""Publishing job descriptors from a worker (engine/descriptors.py): on its presence beat, every
PUBLISH_EVERY_BEATS beats; not at all on a driver without the capability; the published schema's
errors in pydantic's shape. The stores themselves: engine/testing/kit/test_descriptors.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.backfill.pass_job import install_pass
from engine.backfill.registry import BackfillRegistry
from engine.descriptors import (
    PUBLISH_EVERY_BEATS,
    STALE_AFTER_MS,
    app_modules,
    encode,
    forgettable,
    to_publish,
    validate_input,
    vouch_for,
)
from engine.drivers.base import DESCRIPTORS, capabilities
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError
from engine.metrics import LIVE_WORKER_WINDOW_MS
from engine.testing.kit.test_descriptors import declare
from engine.worker_presence import PRESENCE_MS
from schemas.descriptor import JobDescriptor
from schemas.stats import WorkerInfo
from tests.mcp.support import declare_weird


class Watched(MemoryDriver):
    """The memory driver, telling the test when a presence beat or a publish happened."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.publishes: list[int] = []
        self.beat = asyncio.Event()

    async def worker_seen(self, info: WorkerInfo) -> None:
        await super().worker_seen(info)
        self.beat.set()

    async def publish_descriptors(
        self, worker_id: str, descriptors: Sequence[JobDescriptor], now: int
    ) -> None:
        await super().publish_descriptors(worker_id, descriptors, now)
        self.publishes.append(now)


class Hidden:
    """`inner` without the descriptor store's methods: a driver that keeps no descriptors."""

    NAMES = ("publish_descriptors", "published_descriptors", "forget_descriptors")

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in self.NAMES:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_live_worker_republishes_well_inside_the_live_worker_window() -> None:
    assert STALE_AFTER_MS == LIVE_WORKER_WINDOW_MS
    assert PUBLISH_EVERY_BEATS * PRESENCE_MS + PRESENCE_MS <= STALE_AFTER_MS


async def test_a_worker_publishes_at_start_then_every_few_presence_beats(
    clock: ManualClock, registry: JobRegistry
) -> None:
    declare(registry)
    driver = Watched(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    worker = Worker(jobs, prune=False, scheduler=False, outbox_relay=False)

    async def next_beat() -> None:
        driver.beat = asyncio.Event()
        clock.advance(PRESENCE_MS)
        with anyio.fail_after(5):
            await driver.beat.wait()

    start = clock.now_ms()
    async with worker:
        with anyio.fail_after(5):
            await driver.beat.wait()
        assert driver.publishes == [start]
        for _ in range(PUBLISH_EVERY_BEATS - 1):
            await next_beat()
        assert driver.publishes == [start]  # between two publishes a beat writes nothing
        await next_beat()
        assert driver.publishes == [start, clock.now_ms()]
    (published,) = await driver.published_descriptors()
    assert (published.name, published.published_by) == ("charge", worker.id)
    # With no apps named, the modules declaring the jobs (what `--app` imports to get them).
    assert published.apps == ["engine.testing.kit.test_descriptors"]
    await jobs.close()


async def test_a_job_that_cannot_be_described_is_left_out_and_the_rest_published(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    declare(registry)
    declare_weird(registry)
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    await Worker(jobs).publish_descriptors()
    assert [d.name for d in await jobs.driver.published_descriptors()] == ["charge"]
    assert "job weird not published" in caplog.text


async def test_on_a_driver_without_descriptors_nothing_is_published_or_looked_up(
    clock: ManualClock, registry: JobRegistry
) -> None:
    declare(registry)
    inner = MemoryDriver(clock)
    hidden: Any = Hidden(inner)
    assert DESCRIPTORS.name not in capabilities(hidden)
    jobs = Jobs(hidden, registry=registry, clock=clock)
    await Worker(jobs).publish_descriptors()
    assert await inner.published_descriptors() == []
    producer = Jobs(hidden, registry=JobRegistry(), clock=clock)
    assert await producer.describe() == []
    for call in (producer.describe("charge"), producer.enqueue("charge", {"order_id": 1})):
        with pytest.raises(JobsError) as raised:
            await call
        assert raised.value.code == "JOB_UNKNOWN"


def test_schema_errors_come_in_pydantics_shape() -> None:
    registry = JobRegistry()
    declare(registry)
    (descriptor,) = [to_publish(d.describe(), []) for d in registry]
    closed = descriptor.model_copy(
        update={"input_schema": {**descriptor.input_schema, "additionalProperties": False}}
    )
    with pytest.raises(JobsError) as raised:
        validate_input(closed, {"order_id": 1, "priority": 5})
    assert raised.value.code == "JOB_INPUT_INVALID"
    assert raised.value.details is not None
    assert raised.value.details["errors"] == [
        {"loc": ["priority"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
    ]
    with pytest.raises(JobsError) as raised:
        validate_input(descriptor, ["not", "an", "object"])
    assert raised.value.details is not None
    assert raised.value.details["errors"][0]["type"] == "model_type"
    assert validate_input(descriptor, {"order_id": 3}) == {"order_id": 3}


def test_a_prune_forgets_a_descriptor_whose_input_schema_is_none() -> None:
    """DESCRIPTOR_INVALID's fix is a prune: it forgets a row that cannot be read, and one whose
    input schema no enqueue could be checked against (another program wrote it)."""
    registry = JobRegistry()
    declare(registry)
    (descriptor,) = [to_publish(d.describe(), []) for d in registry]
    fresh = descriptor.model_copy(update={"published_at": 10_000})
    assert not forgettable(fresh.name, encode(fresh), 5_000)
    broken = fresh.model_copy(update={"input_schema": {"type": "no-such-type"}})
    with pytest.raises(JobsError) as raised:
        validate_input(broken, {"order_id": 1})
    assert (raised.value.code, raised.value.fix) == ("DESCRIPTOR_INVALID", "mcp-jobs db prune")
    assert forgettable(broken.name, encode(broken), 5_000)
    assert forgettable(fresh.name, "[1]", 5_000)


_PRUNE_OWN_ROWS = """
import anyio, sys
from engine import JobRegistry, connect
from engine.descriptors import to_publish
from engine.tasks.published import describe_all
from engine.pruner import Pruner
from engine.testing.kit.test_descriptors import declare

async def main():
    registry = JobRegistry()
    declare(registry)
    jobs = await connect("sqlite:///" + sys.argv[1], registry=registry)
    store = jobs.driver
    await store.publish_descriptors("w1", describe_all(registry, []), jobs.clock.now_ms())
    stranger = JobRegistry()
    declare(stranger, queue="elsewhere")  # the same job as another program describes it
    await store.publish_descriptors(
        "w2", [to_publish(d.describe(), []) for d in stranger], jobs.clock.now_ms()
    )
    await Pruner(jobs).pass_once()
    await jobs.close()
    print("jsonschema" in sys.modules)

anyio.run(main)
"""


def test_a_workers_prune_pass_over_its_own_jobs_rows_imports_no_jsonschema(tmp_path: Any) -> None:
    # jsonschema is 3.6 MB of a process's memory: a worker's pruner takes the schemas pydantic
    # made for its own jobs as valid instead of checking them against the metaschema.
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", _PRUNE_OWN_ROWS, str(tmp_path / "jobs.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "False"


def test_a_schema_this_process_did_not_make_is_still_checked() -> None:
    registry = JobRegistry()
    declare(registry)
    vouch_for(registry)
    (descriptor,) = [to_publish(d.describe(), []) for d in registry]
    broken = descriptor.model_copy(
        update={"published_at": 10_000, "input_schema": {"type": "no-such-type"}}
    )
    assert forgettable(broken.name, encode(broken), 5_000)


def test_the_apps_published_are_the_applications_not_the_engine_s_own_jobs(
    registry: JobRegistry,
) -> None:
    # `--app engine.backfill.pass_job` in a fix line is noise: the engine registers it anyway.
    declare(registry)
    install_pass(registry, BackfillRegistry())
    assert app_modules(registry) == ["engine.testing.kit.test_descriptors"]
