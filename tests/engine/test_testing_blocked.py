"""The tests' wait for every task to block (engine/testing/blocked.py), on asyncio."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from engine.testing.blocked import wait_all_tasks_blocked

ROOT = Path(__file__).resolve().parents[2]


async def poll_every(period_s: float) -> None:
    """A real-time poller shaped like the SQLite driver's: a turn of the loop (its inline read)
    after every sleep."""
    await anyio.lowlevel.checkpoint()
    while True:
        await anyio.sleep(period_s)
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("period_ms", [50, 100])
async def test_a_poller_started_beside_the_wait_does_not_hold_it_up(period_ms: int) -> None:
    # The first look finds the poller just started. anyio's own wait then looks again 100 ms of
    # real time later, just as the poller wakes, and again, and again: at 100 ms it never ended.
    async with anyio.create_task_group() as tg:
        tg.start_soon(poll_every, period_ms / 1000)
        with anyio.fail_after(1):
            await wait_all_tasks_blocked()
        tg.cancel_scope.cancel()


async def test_it_returns_only_once_every_other_task_waits() -> None:
    turns: list[int] = []
    parked = anyio.Event()

    async def busy_then_park() -> None:
        for turn in range(50):
            turns.append(turn)
            await anyio.lowlevel.checkpoint()
        await parked.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(busy_then_park)
        await wait_all_tasks_blocked()
        assert len(turns) == 50
        parked.set()


async def test_a_task_that_never_waits_fails_the_wait_naming_it() -> None:
    async def spin() -> None:
        while True:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(spin, name="the-spinner")
        with pytest.raises(TimeoutError, match="the-spinner"):
            await wait_all_tasks_blocked(within=0.2)
        tg.cancel_scope.cancel()


def test_tests_use_this_wait_and_not_anyios() -> None:
    anyios = re.compile(r"anyio\.wait_all_tasks_blocked|from anyio import[^\n]*wait_all_tasks")
    own = ROOT / "engine" / "testing" / "blocked.py"
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "engine" / "testing").rglob("*.py")]
    using = [
        str(path.relative_to(ROOT))
        for path in files
        if path != own and path != Path(__file__).resolve()
        if anyios.search(path.read_text(encoding="utf-8"))
    ]
    assert using == [], "use engine.testing.blocked.wait_all_tasks_blocked (see its docstring)"
