"""A database URL no driver could use is DATABASE_URL_INVALID at `connect()`, before any
connection is tried, and the error never repeats the URL (it may hold a password)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine import connect
from engine.drivers.urls import meant_url, postgres_url_problem
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


@pytest.mark.parametrize(
    ("url", "options", "argument"),
    [
        # A PostgreSQL pool size kept when the URL moved to SQLite: it was a TypeError naming
        # SqliteDriver.__init__, and memory:// dropped it without a word.
        ("sqlite:///{tmp}/jobs.db", {"pool_max": 4}, "pool_max"),
        ("memory://", {"pool_max": 4}, "pool_max"),
        ("postgresql://u@127.0.0.1:1/db", {"pol_max": 4}, "pol_max"),
        # Each was an AttributeError later, or read as something else.
        ("memory://", {"clock": 5}, "clock"),
        ("memory://", {"registry": 5}, "registry"),
        ("memory://", {"migrate": "no"}, "migrate"),
    ],
)
async def test_connect_refuses_an_option_it_cannot_use_before_it_opens_anything(
    url: str, options: dict[str, object], argument: str, tmp_path: Path
) -> None:
    with pytest.raises(JobsError) as refused:
        await connect(url.format(tmp=tmp_path), **options)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_ARGUMENT" and not refused.value.retryable
    assert refused.value.details is not None and refused.value.details["argument"] == argument
    assert os.listdir(tmp_path) == []  # nothing opened
    if argument.startswith("po"):
        assert "driver takes: " in str(refused.value), refused.value


@pytest.mark.parametrize(
    ("tail", "named"),
    [("?mode=ro&cache=shared", '"mode"'), ("?cache=shared", '"cache"'), ("#frag", "#")],
)
async def test_a_sqlite_url_with_a_query_or_fragment_is_refused_naming_it(
    tail: str, named: str, tmp_path: Path
) -> None:
    """Each was read as part of the file name, and that file was made."""
    with pytest.raises(JobsError) as raised:
        await connect(f"sqlite:///{tmp_path}/q.db{tail}")
    error = raised.value
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert named in error.cause and "sqlite:////absolute/jobs.db" in error.cause
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("url", "forms"),
    [
        ("sqlite:relative.db", "sqlite:////absolute/jobs.db"),
        ("sqlite:/abs.db", "sqlite:////absolute/jobs.db"),
        ("SQLite:jobs.db", "sqlite:////absolute/jobs.db"),
        ("memory", "memory://"),
    ],
)
async def test_a_registered_scheme_without_its_slashes_is_named_with_the_forms_it_takes(
    url: str, forms: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said `(no scheme)` and `"(no scheme)" is not a registered driver scheme`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JobsError) as raised:
        await connect(url)
    error = raised.value
    scheme = forms.partition(":")[0]
    assert error.code == "DATABASE_URL_INVALID" and error.details == {"scheme": scheme}
    assert "no scheme" not in error.cause and forms in error.cause
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("postgress://u@h/db", "postgres://u@h/db"),
        ("sqllite:///x.db", "sqlite:///x.db"),
        ("sqlite:x.db", "sqlite:///x.db"),
        ("sqlite:/abs/x.db", "sqlite:////abs/x.db"),
        ("sqlite:////abs/x.db?mode=ro", "sqlite:////abs/x.db"),
        ("mysql://x/y", None),
        ("sqlite:", None),
        ("memory", None),
        ("postgresql://u@h/db", None),
    ],
)
def test_the_url_meant_is_read_only_where_it_is_plain(url: str, meant: str | None) -> None:
    schemes = ["memory", "nats", "postgres", "postgresql", "redis", "rediss", "sqlite"]
    assert meant_url(url, schemes) == meant
