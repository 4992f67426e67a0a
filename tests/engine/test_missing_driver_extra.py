"""A redis:// or nats:// URL on a Python without the driver's extra is DRIVER_EXTRA_MISSING, not
retryable (waiting installs nothing), and its fix is the install line of this Python."""

from __future__ import annotations

import sys

import pytest

from engine import connect
from engine.errors import JobsError


@pytest.mark.parametrize(
    ("url", "hidden", "extra"),
    [
        ("redis://127.0.0.1:6379/0", ("redis", "redis.asyncio"), "redis"),
        ("nats://127.0.0.1:4222", ("nats", "nats.js"), "nats"),
    ],
)
async def test_a_driver_without_its_extra_is_a_terminal_error_naming_the_install(
    url: str, hidden: tuple[str, ...], extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)
    for loaded in [m for m in sys.modules if m.startswith(f"engine.drivers.{extra}")]:
        monkeypatch.delitem(sys.modules, loaded)
    with pytest.raises(JobsError) as refused:
        await connect(url)
    assert (refused.value.code, refused.value.retryable) == ("DRIVER_EXTRA_MISSING", False)
    assert refused.value.fix.endswith(f"-m pip install 'mcp-jobs[{extra}]'")
