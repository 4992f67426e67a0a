"""A PostgreSQL URL whose `?schema=` option is misspelt (`?shema=`, `?Schema=`), empty, or
names a schema with a dash or a capital (`App-1`), is refused before any connection and fixed
on that option. The misspelt key reached the server as
a setting it refused, and the report's fix was prose (two hops); the other values were fixed
with the default SQLite file, a line that ran against an empty local database."""

from __future__ import annotations

import pytest

from engine.drivers import registered_schemes
from engine.drivers.urls import meant_url, postgres_url_problem


@pytest.mark.parametrize(
    ("url", "meant"),
    [
        ("postgresql://u@h/db?shema=app1", "postgresql://u@h/db?schema=app1"),
        ("postgresql://u@h/db?Schema=app1", "postgresql://u@h/db?schema=app1"),
        ("postgresql://u@h/db?schemas=app1", "postgresql://u@h/db?schema=app1"),
        ("postgresql://u@h/db?schema=App-1", "postgresql://u@h/db?schema=app_1"),
        ("postgresql://u@h/db?schema=my-app", "postgresql://u@h/db?schema=my_app"),
        ("postgresql://u@h/db?schema=", "postgresql://u@h/db"),
        (
            "postgresql://u@h/db?application_name=x&schema=",
            "postgresql://u@h/db?application_name=x",
        ),
    ],
)
def test_a_schema_option_misspelt_or_misnamed_is_refused_and_mended(url: str, meant: str) -> None:
    assert postgres_url_problem(url) is not None
    assert meant_url(url, registered_schemes()) == meant
    assert postgres_url_problem(meant) is None


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db?application_name=x",
        "postgresql://u@h/db?sslcert=/etc/c.pem&sslkey=/etc/k.pem",
        "postgresql://u@h/db?search_path=app&statement_timeout=5000",
        "postgresql://u@h/db?sslmod=require",  # the server's to refuse, and its report names it
        "postgresql://u@h/db?schema=app1&sslmode=require",
    ],
)
def test_options_a_server_or_asyncpg_takes_are_left_alone(url: str) -> None:
    assert postgres_url_problem(url) is None
