"""Who may read the dashboard: loopback asks no token (but checks the Host), beyond loopback a
token by `?token=` (then a cookie), bearer header or cookie; a missing or wrong one is 401 and
nothing is read."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from engine import Jobs
from mcp_jobs.config import Settings
from mcp_jobs.dashboard import Dashboard
from mcp_jobs.dashboard.auth import COOKIE, DashboardAuth, standalone_auth, static_verifier
from mcp_jobs.dashboard.routing import dashboard_routes_app
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


async def _raw_get(app: Any, path: str, query: bytes) -> list[Any]:
    """GET `path` as a client sends it (httpx would read `//host/x` as another host)."""
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"10.0.0.5:8766")],
        "client": ("10.0.0.9", 5555),
        "server": ("10.0.0.5", 8766),
    }
    await app(scope, receive, send)
    return sent


@pytest.mark.parametrize(
    "route", ["//evil.example/x", "///evil.example/x", "/\\evil.example/x", "/очередь/x"]
)
async def test_the_token_step_redirects_only_to_a_path_of_this_dashboard(route: str) -> None:
    app = dashboard_routes_app(unread(), EXPOSED)
    sent = await _raw_get(app, route, f"token={TOKEN}&state=dead".encode())
    assert sent[0]["status"] == 303
    location = dict(sent[0]["headers"])[b"location"].decode("ascii")
    # A browser reads `//host` and `/\host` as another site: one slash, then this path.
    assert location.startswith("/") and location[1] not in "/\\", location
    assert location.endswith("/x?state=dead")
    assert urlsplit(location).netloc == ""


def _framing_refused(answer: httpx2.Response) -> None:
    assert answer.headers["x-frame-options"] == "DENY", answer.request.url
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy, policy


async def test_no_answer_can_be_framed_by_another_page(jobs: Jobs, seeded: Seeded) -> None:
    """A page that frames the confirm form could trick a click (no token on loopback)."""
    live = seeded.one("ready")
    answers = []
    async with browse(dashboard_for(jobs)) as http:
        for route in ("/", "/jobs", f"/jobs/{live}/cancel", "/jobs?state=nope", "/nowhere"):
            answers.append(await http.get(route))
        answers.append(await http.post(f"/jobs/{live}/cancel", data={"csrf": "x"}))
        answers.append(await http.get("/", headers={"Host": "evil.example"}))
    async with browse(dashboard_for(jobs), EXPOSED, base="http://10.0.0.5:8766") as http:
        answers.append(await http.get("/"))
        answers.append(await http.get("/", params={"token": TOKEN}))
    assert [a.status_code for a in answers] == [200, 200, 200, 400, 404, 403, 403, 401, 303]
    for answer in answers:
        _framing_refused(answer)


async def test_the_policy_lets_the_pages_own_script_and_style_run(
    jobs: Jobs, seeded: Seeded
) -> None:
    async with browse(dashboard_for(jobs)) as http:
        overview = await http.get("/")
    policy = overview.headers["content-security-policy"]
    scripts = re.findall(r"<script>(.*?)</script>", overview.text, re.S)
    assert scripts, "the overview reloads itself by a script"
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert "script-src 'unsafe-inline'" not in policy
