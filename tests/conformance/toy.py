"""A toy fourth driver, plugged in from outside the engine: the memory driver under `toy://`.

Loaded as a pytest plugin (`-p tests.conformance.toy`), it registers its scheme in the plug-in
table and says how its application transaction is opened, as a third-party driver's test
suite would. No engine module knows it exists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from engine.clock import Clock
from engine.drivers import Driver, register_driver
from engine.drivers.memory import MemoryDriver
from engine.testing.plugin import AppTransaction

SCHEME = "toy"


class ToyDriver(MemoryDriver):
    kind = SCHEME


def open_toy(url: str, *, clock: Clock, **options: Any) -> Driver:
    return ToyDriver(clock)


register_driver(SCHEME, open_toy)


@asynccontextmanager
async def toy_transaction(driver: Driver, url: str) -> AsyncIterator[Any]:
    toy = cast(ToyDriver, driver)
    tx = toy.transaction()
    yield tx
    toy.commit(tx)


@pytest.fixture
def app_transaction() -> AppTransaction:
    return toy_transaction
