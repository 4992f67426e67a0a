"""Every test in this folder runs on uvloop, the loop `mcp-jobs worker` takes when installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import uvloop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Any]:
    return {"uvloop": uvloop.new_event_loop}
