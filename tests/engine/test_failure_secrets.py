"""Credentials a job's failure text carries (a DSN's password, a bearer token) are masked once,
where the text is made storable: the stored `last_error` (cause and traceback), the worker's
events and its log line (and so the dashboard and `jobs show`) never hold them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import anyio
import pytest

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.logs import configure_logging
from engine.observe import WorkerEvent
from engine.redaction import scrubbed
from tests.support.worker_jobs import Item

SECRETS = ("s3cret", "abc.DEF-123", "hunter2", "tok3n")
SAID = (
    "connect failed postgresql://app:s3cret@db/x; "
    "Authorization: Bearer abc.DEF-123; dsn host=db password=hunter2 token=tok3n"
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("connect failed postgresql://app:s3cret@db/x", "connect failed postgresql://app:***@db/x"),
        ("redis://:pw@cache:6379/0 down", "redis://:***@cache:6379/0 down"),
        ("GET https://h/x?token=abc&page=2", "GET https://h/x?token=***&page=2"),
        ("Authorization: Bearer abc.DEF-123=", "Authorization: Bearer ***"),
        ("bearer eyJ0.eyJ1.c2ln failed", "bearer *** failed"),
        ("host=db user=app password=hunter2 port=5432", "host=db user=app password=*** port=5432"),
        ("password='two words' next", "password=*** next"),
        # Nothing to hide: unchanged, and so is text already masked.
        ("KeyError: 'x'", "KeyError: 'x'"),
        (
            "postgresql://app@db/x and sqlite:///tmp/a.db",
            "postgresql://app@db/x and sqlite:///tmp/a.db",
        ),
        ("postgresql://app:***@db/x Bearer ***", "postgresql://app:***@db/x Bearer ***"),
    ],
)
def test_recognisable_credentials_are_masked(text: str, shown: str) -> None:
    assert scrubbed(text) == shown


async def test_a_long_failure_text_is_scrubbed_in_one_pass() -> None:
    # A scan that restarts at every letter of a long run took 38 s on a 200,000-character
    # message (a dead letter's text on NATS); one pass takes milliseconds. The bound is loose.
    text = "RuntimeError: " + "E" * 2_000_000 + " postgresql://app:s3cret@db/x"
    with anyio.fail_after(30):
        shown = await anyio.to_thread.run_sync(scrubbed, text, abandon_on_cancel=True)
    assert shown.endswith("postgresql://app:***@db/x")


def test_a_url_python_cannot_split_is_still_masked() -> None:
    said = scrubbed("failed http://user:pw@[::1/x")
    assert "pw" not in said and "user" in said


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    target = logging.getLogger("mcp_jobs")
    level = target.level
    stream = io.StringIO()
    handler = configure_logging(json=True, level="INFO", stream=stream, logger="mcp_jobs")
    yield stream
    target.removeHandler(handler)
    target.setLevel(level)


@pytest.mark.drivers("memory", reason="what the engine makes of a failure, before any driver")
@pytest.mark.parametrize("raised", [RuntimeError, Permanent])
async def test_a_failure_s_credentials_are_stored_logged_and_sent_masked(
    clock: ManualClock, registry: JobRegistry, logged: io.StringIO, raised: type[Exception]
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=1), registry=registry)
    async def connects(input: Item, ctx: JobContext) -> None:
        raise raised(SAID)

    queued = await jobs.enqueue(connects, {"n": 1})
    heard: list[WorkerEvent] = []
    worker = Worker(jobs, prune=False)
    worker.add_listener(heard.append)
    await worker.run_until_idle()
    error = (await jobs.get(queued.id)).last_error
    assert error is not None and error.details is not None
    stored = json.dumps(error.model_dump())
    events = [str(e.fields()) for e in heard]
    for where in (stored, logged.getvalue(), *events):
        for secret in SECRETS:
            assert secret not in where
    assert "postgresql://app:***@db/x" in error.cause and "Bearer ***" in error.cause
    assert "Bearer ***" in error.details["traceback"]
    (line,) = [r for r in map(json.loads, logged.getvalue().splitlines()) if "job" in r]
    assert "app:***@db" in line["job"]["error"]
    if raised is Permanent:  # an expected failure: one line, its message the reason
        assert "exc" not in line and "app:***@db" in line["job"]["reason"]
    else:
        assert "app:***@db" in line["exc"]
