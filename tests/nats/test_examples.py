"""The example shop and the demo on NATS: the checkout is a create-only key written before its job
is staged (an order taken twice stages nothing), and `mcp-jobs demo` runs unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import ManualClock
from tests.support.example_shop import check_checkout, check_demo


async def test_a_checkout_stages_once_and_a_taken_order_stages_nothing(
    database_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SHOP_DB", f"{tmp_path}/shop.db")
    await check_checkout(database_url, clock)


@pytest.mark.slow
def test_the_demo_runs_on_nats(database_url: str, tmp_path: Path) -> None:
    check_demo(database_url, tmp_path)
