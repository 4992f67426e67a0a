"""A NATS URL's option the driver does not take, or a value it refuses, is refused before any
connection with the URL meant as its fix: the connect() argument without that option (the
export of MCP_JOBS_DATABASE_URL, fixed by the NATS driver's own check, changed nothing)."""

from __future__ import annotations

import pytest

from engine import connect
from engine.driver_errors import DatabaseUrlInvalidError


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        (
            # A misspelt option is the one it names (dropped, it left the default replicas).
            "nats://127.0.0.1:1/jobs?replica=3&storage=memory",
            "nats://127.0.0.1:1/jobs?replicas=3&storage=memory",
        ),
        ("nats://127.0.0.1:1/jobs?replicas=9", "nats://127.0.0.1:1/jobs"),
        ("nats://127.0.0.1:1/jobs?storage=disk&replicas=3", "nats://127.0.0.1:1/jobs?replicas=3"),
    ],
)
async def test_a_refused_nats_option_is_dropped_in_the_fix(url: str, meant: str) -> None:
    with pytest.raises(DatabaseUrlInvalidError) as caught:
        await connect(url)
    assert not caught.value.retryable
    assert caught.value.fix == f"jobs = await connect({meant!r})"
