"""engine.run_job.new_cancel_scope: after the first, scopes are made without anyio's backend
look-up, and are still anyio's own: a cancel stops what runs in one, a shield inside holds."""

from __future__ import annotations

import anyio

from engine.run_job import new_cancel_scope


async def test_a_scope_made_without_the_look_up_is_anyios_own() -> None:
    first, second = new_cancel_scope(), new_cancel_scope()
    assert type(first) is type(second) is type(anyio.CancelScope())
    reached: list[str] = []
    with second:
        with anyio.CancelScope(shield=True):
            second.cancel()
            await anyio.lowlevel.checkpoint()
            reached.append("shielded")
        await anyio.lowlevel.checkpoint()
        reached.append("after the shield")
    assert second.cancel_called and reached == ["shielded"]
