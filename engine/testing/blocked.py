"""`wait_all_tasks_blocked()` for tests: anyio's, without its periodic looks.

anyio's asyncio version looks whether every other task is blocked, and if not sleeps 100 ms of
real time and looks again. A real-time timer that wakes in step with those looks (the SQLite
driver's 50 ms poll for other processes' commits: two wake-ups a look, each re-aligned by the
look that fails) is then runnable at every look, and the wait never ends.

Here the first look is anyio's, and so is the 100 ms pause after a look that fails (some tests
lean on it: it lets a reply on its way from a server arrive). After the pause it looks at every
turn of the event loop until one finds every task blocked: a task woken by any timer is runnable
for a turn or two and then waits again, and the next turn sees it waiting. No timer can fall in
step with that.

The question asked is anyio's: every other task of this event loop is waiting on something
unfinished (a timer, I/O, a thread, an event). A task that stays runnable for `within` seconds
fails the wait with a TimeoutError naming it, rather than hanging the test.
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel

WITHIN_S = 10.0
# anyio's pause after a look that finds a task runnable.
PAUSE_S = 0.1


async def wait_all_tasks_blocked(within: float = WITHIN_S) -> None:
    """Return once a look finds every other task blocked: at once, or after a pause at the
    first turn of the event loop that does."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): its own wait is exact, not a periodic look
        with anyio.fail_after(within):
            await anyio.wait_all_tasks_blocked()
        return
    this_task = asyncio.current_task()
    deadline = loop.time() + within
    await anyio.lowlevel.checkpoint()
    paused = False
    while True:
        runnable = [t for t in asyncio.all_tasks(loop) if t is not this_task and _runnable(t)]
        if not runnable:
            return
        if loop.time() >= deadline:
            raise TimeoutError(
                f"tasks still runnable after {within} s: " + "; ".join(map(_describe, runnable))
            )
        if paused:
            await anyio.lowlevel.checkpoint()
        else:
            await anyio.sleep(min(PAUSE_S, max(0.0, deadline - loop.time())))
            paused = True


def _runnable(task: asyncio.Task[object]) -> bool:
    # What anyio reads too: the future a task is suspended on, None while it runs or is queued.
    waiter: asyncio.Future[object] | None = task._fut_waiter  # type: ignore[attr-defined]
    return waiter is None or waiter.done()


def _describe(task: asyncio.Task[object]) -> str:
    """The task's name and where it stands: its innermost coroutine frame."""
    where = ""
    coro: object = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None)
        if frame is not None:
            where = f" at {frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        coro = getattr(coro, "cr_await", None)
    return f"{task.get_name()}{where}"
