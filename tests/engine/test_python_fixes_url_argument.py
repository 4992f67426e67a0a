"""A URL `connect()` was given that its driver refuses (`sqlite://jobs.db`, which names no
file) is mended in the argument, as one no driver takes is: exporting MCP_JOBS_DATABASE_URL
would change nothing, the argument outranks it. The mend is the file meant, with its slash."""

from __future__ import annotations

import pytest

from engine import connect
from engine.driver_errors import DatabaseUrlInvalidError

pytestmark = pytest.mark.drivers("sqlite", reason="the SQLite driver's own refusal")


async def test_a_url_the_driver_refuses_is_mended_in_the_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL", raising=False)
    with pytest.raises(DatabaseUrlInvalidError) as raised:
        await connect("sqlite://relative.db")
    # The URL meant, whose path the missing slash made a host: not the default file.
    assert raised.value.fix == "jobs = await connect('sqlite:///relative.db')"
    with pytest.raises(DatabaseUrlInvalidError) as optioned:
        await connect("sqlite://relative.db?mode=ro")
    assert optioned.value.fix == "jobs = await connect('sqlite:///relative.db')"
