"""What the NATS driver makes of its URL's options: one it does not take is refused naming it
(a misspelt `?replica=3` ran the jobs on one replica without a word), and `?replicas=` above 1
on a server that is not clustered is a URL to correct, not a server to wait for."""

from __future__ import annotations

import anyio
import pytest

from engine import connect
from engine.driver_errors import DatabaseUrlInvalidError
from tests.support.fix_lines import run_fix

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats.connection import parse_nats_url


@pytest.mark.parametrize("option", ["replica=3", "Replicas=3", "storage=file&bucket=x"])
def test_an_option_the_driver_does_not_take_is_refused_naming_it(option: str) -> None:
    with pytest.raises(DatabaseUrlInvalidError) as caught:
        parse_nats_url(f"nats://127.0.0.1:4222/jobs?{option}")
    error = caught.value
    assert not error.retryable
    assert "replicas" in error.cause and "storage" in error.cause  # the options it takes


def test_the_options_it_takes_still_parse() -> None:
    parsed = parse_nats_url("nats://h1:4222,h2:4222/jobs?replicas=3&storage=memory")
    assert (parsed.bucket, parsed.replicas, parsed.storage) == ("jobs", 3, "memory")


async def test_replicas_on_a_server_not_clustered_is_a_url_to_correct_whose_fix_runs(
    database_url: str,
) -> None:
    with anyio.fail_after(60), pytest.raises(DatabaseUrlInvalidError) as caught:
        await connect(f"{database_url}?replicas=3")
    error = caught.value
    assert not error.retryable
    assert "replicas" in error.cause and "cluster" in error.cause
    assert "replicas" not in error.fix
    run_fix(error.fix)
