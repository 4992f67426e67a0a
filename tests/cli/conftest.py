"""What the CLI tests share: a working directory of its own with an empty jobs database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SQLite jobs database in a fresh working directory, with no MCP_JOBS_* setting around."""
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TENANT"):
        monkeypatch.delenv(name, raising=False)
    yield f"sqlite:///{tmp_path}/jobs.db"
