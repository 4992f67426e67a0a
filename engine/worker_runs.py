"""The worker runs going on over each driver, so that closing the client stops them first.

`Jobs.close()` (engine/client.py) closes the driver. A worker still running on it would finish
its job with nowhere to settle it, and the job, left `running`, would run again once its lease
ran out, an attempt spent. So a run says here when it begins and ends, and a close first has
every run over its driver stop as `stop()` would (in-flight jobs finish until the drain
deadline, the rest go back unharmed) and waits for that.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio

# A run's stop for a close: returns once its drain is done.
Stop = Callable[[], Coroutine[Any, Any, None]]

# Per driver, by identity (a driver need not be hashable; a run holds its driver, so the id
# cannot be reused while it is here), the stops of the runs over it.
_RUNS: dict[int, list[Stop]] = {}


def began(driver: object, stop: Stop) -> None:
    _RUNS.setdefault(id(driver), []).append(stop)


def ended(driver: object, stop: Stop) -> None:
    runs = _RUNS.get(id(driver), [])
    if stop in runs:
        runs.remove(stop)
    if not runs:
        _RUNS.pop(id(driver), None)


async def stop_runs_over(driver: object) -> None:
    """Stop every worker run over `driver`, all at once, and wait until each has drained."""
    stops = list(_RUNS.get(id(driver), ()))
    if not stops:
        return
    async with anyio.create_task_group() as tg:
        for stop in stops:
            tg.start_soon(stop)
