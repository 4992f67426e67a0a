"""A database URL no driver could use is DATABASE_URL_INVALID at `connect()`, before any
connection is tried, and the error never repeats the URL (it may hold a password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import connect
from engine.drivers.urls import postgres_url_problem
from engine.errors import JobsError

SECRET = "s3cretpw"

BAD_POSTGRES = [
    f"postgresql://u:{SECRET}@host:notaport/x",
    f"postgresql://u:{SECRET}@host:99999/x",
    f"postgresql://u:{SECRET}@h1:5432,h2:nope/x",
    f"postgresql://u:{SECRET}%zz@host/x",  # a bad percent-escape
    f"postgresql://u:{SECRET}@:garbage/x",  # an empty host before a port
    f"postgresql://u:{SECRET}@[::1/x",
    f"postgresql://u:{SECRET}@host/x?sslmode=sometimes",
    f"postgresql://u:{SECRET}@host/x?port=five",
    f"postgresql://u:{SECRET}@host/x?novalue",
    f"postgresql://u:{SECRET}@bad@host/x",
    f"postgresql://u:{SECRET} @host/x",
    f"postgresql://u:{SECRET}@host/x?schema=Tenant",  # the schema is a plain identifier
    f"postgresql://u:{SECRET}@host/x?schema=a;drop",
    f"postgresql://u:{SECRET}@host/x?schema=",
    f"postgresql://u:{SECRET}@host/x?schema=a&schema=b",
]


@pytest.mark.parametrize("url", BAD_POSTGRES)
async def test_a_malformed_postgres_url_is_database_url_invalid_without_the_url(url: str) -> None:
    with pytest.raises(JobsError) as raised:
        await connect(url)
    error = raised.value
    assert error.code == "DATABASE_URL_INVALID" and not error.retryable
    assert SECRET not in str(error) and SECRET not in error.to_payload().model_dump_json()


@pytest.mark.parametrize("url", ["sqlite:///dir/", "sqlite:///jobs\x00.db"])
async def test_a_malformed_sqlite_url_is_database_url_invalid(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    with pytest.raises(JobsError) as raised:
        await connect(url)
    assert raised.value.code == "DATABASE_URL_INVALID"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p%40ss@db.example:5432/jobs",
        "postgres://u@h1:5432,h2/jobs?sslmode=require&application_name=x",
        "postgresql://u@[::1]:5432/jobs",
        "postgresql:///jobs?host=/var/run/postgresql&port=5433",
        "postgresql://u@host:/jobs",
        "postgresql://%2Fvar%2Frun%2Fpostgresql/jobs",
        "postgresql://u:@host",
        "postgresql://u@host/jobs?schema=tenant_a&sslmode=disable",
    ],
)
def test_well_formed_postgres_urls_pass(url: str) -> None:
    assert postgres_url_problem(url) is None
