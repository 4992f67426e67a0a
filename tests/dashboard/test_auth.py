"""Who may read the dashboard: loopback asks no token (but checks the Host), beyond loopback a
token by `?token=` (then a cookie), bearer header or cookie; a missing or wrong one is 401 and
nothing is read."""

from __future__ import annotations

import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.dashboard import Dashboard
from mcp_jobs.dashboard.auth import COOKIE, DashboardAuth, standalone_auth, static_verifier
from mcp_jobs.errors import TokenRequiredError, TokenTooShortError
from tests.dashboard.support import Marks, Seeded, browse, dashboard_for

pytestmark = pytest.mark.drivers("memory", reason="auth does not depend on the driver")

TOKEN = "t" * 40
EXPOSED = DashboardAuth(static_verifier(TOKEN))


def unread() -> Dashboard:
    """A dashboard with no jobs client: any read it attempted would fail with 500, not 401."""
    return Dashboard(settings=Settings(host="0.0.0.0"), client=None)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic " + TOKEN},
        {"Cookie": f"{COOKIE}=wrong"},
    ],
    ids=["missing", "wrong-bearer", "not-bearer", "wrong-cookie"],
)
async def test_beyond_loopback_a_request_without_the_token_is_refused_unread(
    headers: dict[str, str],
) -> None:
    async with browse(unread(), EXPOSED, base="http://10.0.0.5:8766") as http:
        for route in ("/", "/jobs", "/dead", "/jobs/x/retry"):
            answer = await http.get(route, headers=headers)
            assert answer.status_code == 401, route
            assert answer.headers["www-authenticate"].startswith("Bearer")


async def test_a_wrong_query_token_is_refused() -> None:
    async with browse(unread(), EXPOSED) as http:
        answer = await http.get("/", params={"token": "x" * 40})
    assert answer.status_code == 401 and "set-cookie" not in answer.headers


async def test_the_query_token_sets_a_strict_cookie_and_redirects_to_the_clean_url(
    jobs: Jobs, seeded: Seeded
) -> None:
    async with browse(dashboard_for(jobs), EXPOSED, base="http://10.0.0.5:8766") as http:
        answer = await http.get("/jobs", params={"token": TOKEN, "state": "dead"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/jobs?state=dead"
        cookie = answer.headers["set-cookie"]
        assert f"{COOKIE}={TOKEN}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        http.cookies.set(COOKIE, TOKEN)
        page = await http.get("/jobs", params={"state": "dead"})
        assert page.status_code == 200
        assert len(Marks(page.text).all("job-row")) == 2
        http.cookies.clear()
        bearer = await http.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200


async def test_loopback_asks_no_token_but_refuses_a_foreign_host_name(
    jobs: Jobs, seeded: Seeded
) -> None:
    dash = dashboard_for(jobs)
    async with browse(dash) as http:
        assert (await http.get("/")).status_code == 200
        assert (await http.get("/", headers={"Host": "localhost:8766"})).status_code == 200
        # A page that rebinds its own name to 127.0.0.1 arrives with that name.
        assert (await http.get("/", headers={"Host": "evil.example:8766"})).status_code == 403


def test_standalone_auth_follows_the_http_servers_token_rules() -> None:
    assert standalone_auth(Settings(host="127.0.0.1")).verify is None
    assert standalone_auth(Settings(host="::1")).verify is None
    with pytest.raises(TokenRequiredError):
        standalone_auth(Settings(host="0.0.0.0"))
    with pytest.raises(TokenTooShortError):
        standalone_auth(Settings(host="0.0.0.0", token="short"))
    assert standalone_auth(Settings(host="0.0.0.0", token=TOKEN)).verify is not None
