"""A PostgreSQL URL refused for an option that plainly stands for one it takes (`sslmode`
misspelt or in capitals, a `schema` in capitals, which PostgreSQL folds to lower case) is
fixed on that option: the fix was the default SQLite file, a line that ran against an empty
local database instead of the server meant."""

from __future__ import annotations

import pytest

from engine.drivers import registered_schemes
from engine.drivers.urls import meant_url, postgres_url_problem


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("postgresql://u:pw@h/db?sslmode=requre", "postgresql://u:pw@h/db?sslmode=require"),
        ("postgresql://u@h/db?sslmode=REQUIRE", "postgresql://u@h/db?sslmode=require"),
        (
            "postgres://u@h/db?application_name=x&sslmode=verify_full",
            "postgres://u@h/db?application_name=x&sslmode=verify-full",
        ),
        ("postgresql://u@h/db?schema=Tenant_A", "postgresql://u@h/db?schema=tenant_a"),
    ],
)
def test_a_postgres_option_that_stands_for_one_it_takes_is_mended(url: str, meant: str) -> None:
    assert postgres_url_problem(url) is not None
    assert meant_url(url, registered_schemes()) == meant
    assert postgres_url_problem(meant) is None


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db?sslmode=sometimes",  # no mode is near: not guessed
        "postgresql://u@h:notaport/db",
    ],
)
def test_a_postgres_url_with_nothing_plainly_meant_is_not_guessed(url: str) -> None:
    assert meant_url(url, registered_schemes()) is None
