"""A slip in a Redis or NATS URL's own options is mended to what it plainly meant: dropped, as
before, `?prefx=other:` or `?bucket=other` pointed the fix at the default prefix or bucket,
another deployment's jobs; a database or bucket no server takes pointed at a fresh SQLite file."""

from __future__ import annotations

import pytest

from engine.drivers import registered_schemes
from engine.drivers.urls import meant_url


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("redis://127.0.0.1:6379/0?prefx=other:", "redis://127.0.0.1:6379/0?prefix=other:"),
        ("redis://127.0.0.1:6379/abc", "redis://127.0.0.1:6379/0"),
        ("nats://127.0.0.1:4222?bucket=other", "nats://127.0.0.1:4222/other"),
        ("nats://127.0.0.1:4222/ex.f", "nats://127.0.0.1:4222/ex_f"),
        ("postgresql://u@h/db?shema=app1", "postgresql://u@h/db?schema=app1"),
    ],
)
def test_a_slip_in_a_drivers_own_option_is_mended_to_it(typed: str, meant: str) -> None:
    assert meant_url(typed, registered_schemes()) == meant


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0?prefix=a:", "nats://127.0.0.1:4222/jobs", "redis://h/2"]
)
def test_a_url_with_nothing_to_mend_is_left_alone(url: str) -> None:
    assert meant_url(url, registered_schemes()) is None
