"""A process `mcp-jobs worker` owns tunes Python's cyclic collector for a draining worker; the
library's Worker, which shares its process with an application, leaves it alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from engine import JobRegistry, Worker, connect
from engine.worker_process import YOUNG_THRESHOLD, tune_for_worker


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector_restored")
def test_the_worker_process_freezes_its_start_up_heap_and_collects_young_objects_less_often() -> (
    None
):
    gc.unfreeze()
    _, middle, old = gc.get_threshold()
    tune_for_worker()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)
    assert YOUNG_THRESHOLD > 700  # more than Python's default, or it tunes nothing


async def test_the_library_worker_leaves_the_collector_alone() -> None:
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    jobs = await connect("memory://", registry=JobRegistry())
    try:
        worker = Worker(jobs, queues="*")
        await worker.start()
        await worker.stop()
    finally:
        await jobs.close()
    assert (gc.get_threshold(), gc.get_freeze_count()) == (thresholds, frozen)
