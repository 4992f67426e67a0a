"""`connect(url)` refuses a URL it cannot use as a typed error before anything opens: a Redis
option redis-py cannot take, a URL that is not text, an empty one (or an empty variable), and
the fix of a URL given as the argument changes the argument, not the variable it outranks."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from engine import connect
from engine.errors import JobsError

SECRET = "s3cretpw"
# Port 1 answers nothing: a URL that got as far as a connection fails another way.
REDIS = f"redis://:{SECRET}@127.0.0.1:1/3"


@pytest.mark.parametrize(
    ("query", "option"),
    [
        ("foo=bar", "foo"),  # was a TypeError from redis-py's connection class: INTERNAL
        ("socket_timeout=abc", "socket_timeout"),  # a ValueError at the first command
        ("db=abc", "db"),
        ("health_check_interval=x", "health_check_interval"),
        ("protocol=9", "protocol"),  # was DRIVER_UNAVAILABLE, retryable
        ("ssl_cert_reqs=none", "ssl_cert_reqs"),  # an option of rediss:// only
        ("prefix=app&foo=bar", "foo"),
    ],
)
async def test_a_redis_url_option_redis_py_cannot_take_is_database_url_invalid_naming_it(
    query: str, option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JobsError) as raised:
        await connect(f"{REDIS}?{query}")
    error = raised.value
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False), error
    assert f'"{option}"' in error.cause
    assert SECRET not in error.to_payload().model_dump_json()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?socket_timeout=5&prefix=app&health_check_interval=10",
        "rediss://127.0.0.1:6379/0?ssl_cert_reqs=none",
        "redis://127.0.0.1:6379/0",
    ],
)
def test_redis_url_options_redis_py_takes_pass(url: str) -> None:
    from engine.drivers.urls import redis_url_problem  # here: the check is new

    assert redis_url_problem(url) is None


@pytest.mark.parametrize("url", [5, b"memory://", ["memory://"]])
async def test_connect_refuses_a_url_that_is_not_text_as_invalid_argument(
    url: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each was a TypeError from deep in the URL parsing."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JobsError) as raised:
        await connect(url)  # type: ignore[arg-type]
    assert raised.value.code == "INVALID_ARGUMENT"
    assert raised.value.details is not None and raised.value.details["argument"] == "url"
    assert os.listdir(tmp_path) == []


async def test_an_empty_url_argument_is_refused_not_read_as_the_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It opened, and created, ./.mcp-jobs/jobs.db."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL", raising=False)
    with pytest.raises(JobsError) as raised:
        await connect("")
    assert (raised.value.code, raised.value.retryable) == ("DATABASE_URL_INVALID", False)
    assert raised.value.fix.startswith("leave url out")
    assert os.listdir(tmp_path) == []


async def test_an_empty_database_url_variable_is_refused_and_fixed_by_unsetting_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`export MCP_JOBS_DATABASE_URL="$PROD_URL"` with PROD_URL unset: it opened a new local
    SQLite file, and the jobs enqueued there waited for a worker that never looks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", "")
    with pytest.raises(JobsError) as raised:
        await connect()
    assert raised.value.code == "DATABASE_URL_INVALID"
    assert raised.value.fix == "unset MCP_JOBS_DATABASE_URL"
    assert "MCP_JOBS_DATABASE_URL" in raised.value.cause
    assert os.listdir(tmp_path) == []
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL")  # the fix, run
    jobs = await connect()
    await jobs.close()


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("mysql://x/y", "jobs = await connect('sqlite:///.mcp-jobs/jobs.db')"),
        (
            f"postgress://u:{SECRET}@127.0.0.1:1/db",
            "jobs = await connect('postgres://u@127.0.0.1:1/db')",
        ),
        ("redis://127.0.0.1:1/0?foo=bar", "jobs = await connect('redis://127.0.0.1:1/0')"),
    ],
)
async def test_a_url_given_to_connect_is_fixed_on_the_argument_not_by_an_export(
    url: str, fix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix was `export MCP_JOBS_DATABASE_URL=…`: the argument outranks the variable, so the
    same call failed the same way after it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL", raising=False)
    with pytest.raises(JobsError) as raised:
        await connect(url)
    assert raised.value.code == "DATABASE_URL_INVALID"
    assert raised.value.fix == fix
    if "sqlite:" in fix:  # the fix, run as given
        scope: dict[str, object] = {"connect": connect}
        code = compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        await eval(code, scope)
        await scope["jobs"].close()  # type: ignore[attr-defined]


async def test_a_url_from_the_variable_keeps_the_export_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", "mysql://x/y")
    for given in (None, "mysql://x/y"):  # connect(resolve_url(None)), as the demo calls it
        with pytest.raises(JobsError) as raised:
            await connect(given)
        assert raised.value.fix.startswith("export MCP_JOBS_DATABASE_URL="), raised.value.fix


@pytest.mark.parametrize(
    "url", [f"redis://:{SECRET}@[::1/0", "rediss://[::1", "redis://[::1/0?x=1"]
)
async def test_a_redis_url_that_does_not_parse_is_database_url_invalid(url: str) -> None:
    """It was a ValueError ("Invalid IPv6 URL") from the driver's own check: INTERNAL."""
    with pytest.raises(JobsError) as raised:
        await connect(url)
    assert (raised.value.code, raised.value.retryable) == ("DATABASE_URL_INVALID", False)
    assert SECRET not in raised.value.to_payload().model_dump_json()


@pytest.mark.parametrize(
    "url",
    [
        "nats://127.0.0.1:99999",
        f"nats://u:{SECRET}@127.0.0.1:abc",
        "nats://127.0.0.1:4222,127.0.0.1:x",
        "nats://[::1",
        "tls://127.0.0.1:0",
    ],
)
async def test_a_nats_url_with_a_bad_port_is_database_url_invalid_not_unreachable(
    url: str,
) -> None:
    """It was DRIVER_UNAVAILABLE ("invalid connect url option"), retryable, with a fix that
    failed the same way: no retry mends a port that is no number."""
    with pytest.raises(JobsError) as raised:
        await connect(url)
    assert (raised.value.code, raised.value.retryable) == ("DATABASE_URL_INVALID", False)
    assert SECRET not in raised.value.to_payload().model_dump_json()


@pytest.mark.parametrize(
    "url", ["nats://127.0.0.1:4222", "nats://u:p@h1:4222,h2/jobs?replicas=3", "tls://[::1]:4222"]
)
def test_nats_urls_with_good_hosts_pass(url: str) -> None:
    from engine.drivers.urls import driver_url_problem  # here: the check is new

    assert driver_url_problem(url) is None
