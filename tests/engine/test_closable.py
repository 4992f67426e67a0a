"""engine.drivers.closing.closable, on a class of its own: what it wraps and what it leaves."""

from __future__ import annotations

import pytest

from engine.driver_errors import DriverClosedError
from engine.drivers.closing import closable


@closable
class Toy:
    kind = "toy"

    def __init__(self) -> None:
        self.teardowns = 0

    async def read(self) -> str:
        return "read"

    async def _private(self) -> str:
        return "private"

    @staticmethod
    async def static() -> str:
        return "static"

    @classmethod
    async def made(cls) -> str:
        return cls.__name__

    def sync(self) -> str:
        return "sync"

    async def close(self) -> None:
        self.teardowns += 1


async def test_public_coroutines_refuse_once_closed_and_the_teardown_runs_once() -> None:
    toy = Toy()
    assert await toy.read() == "read"
    await toy.close()
    await toy.close()
    assert toy.teardowns == 1
    with pytest.raises(DriverClosedError) as raised:
        await toy.read()
    assert raised.value.cause.startswith("toy: this driver was closed")
    # Left as they are: what a driver runs for itself, and what has no instance to close.
    assert await toy._private() == "private"
    assert (await Toy.static(), await Toy.made(), toy.sync()) == ("static", "Toy", "sync")
