"""Hostile requests to every dashboard route, read from its routing table (a new page is covered
by being routed): hostile query parameters and path segments on each GET, hostile fields, a
missing or forged CSRF token, a wrong content type and an oversized body on each POST form, and
every request without its token when the dashboard asks one.

Each answer: never 5xx; a refusal shows its code, cause and fix; no hostile value comes back as
markup; a refused form changes nothing stored; a fix shown runs as given (an `mcp-jobs` line
parses with the CLI's own parser, a dashboard URL answers without a refusal). The requests come
from a fixed seed: a failure replays.
"""

from __future__ import annotations

import io
import random
import re
import sqlite3
from contextlib import closing, redirect_stdout
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx2
import pytest
from starlette.routing import Route

from engine import Jobs
from mcp_jobs.cli.parser import UsageError, build_parser
from mcp_jobs.config import Settings
from mcp_jobs.dashboard.auth import DashboardAuth, static_verifier
from mcp_jobs.dashboard.routing import routes
from tests.dashboard.support import Marks, Seeded, browse, dashboard_for
from tests.support.fix_lines import command_words

pytestmark = pytest.mark.drivers("sqlite", reason="a file whose every row can be compared")

SEED = 77
GETS_PER_ROUTE = 40
POSTS_PER_FORM = 30
XSS = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=1>'
# What must never come back unescaped, whatever was sent.
MARKUP = ("<script>alert(1)</script>", "onerror=1>")
HOSTILE: list[str] = [
    "",
    "\x00",
    "a\x00b",
    "x" * 10_240,
    XSS,
    IMG,
    "\u202eevil",
    "-x",
    "--help",
    "-1",
    "0",
    "99999999999999999999999",
    "1.5",
    "1e308",
    "NaN",
    "!!not-a-cursor",
    "eyJ4IjoxfQ",
    "a" * 31,
    "a" * 33,
    "0" * 32,
    "../../etc/passwd",
    "..",
    "a/b",
    "%2f..%2f",
    "名前",
]
# The parameters each page reads; a page not listed is sent only names it does not take.
READS: dict[str, tuple[str, ...]] = {
    "/": ("queue", "flash"),
    "/jobs": ("queue", "state", "name", "tenant", "cursor"),
    "/jobs/{job_id}": ("flash",),
    "/dead": ("queue",),
    "/jobs/{job_id}/retry": (),
    "/jobs/{job_id}/cancel": (),
    "/queues/pause": ("queue",),
    "/queues/resume": ("queue",),
}
FIELDS = ("csrf", "include_cancelled", "reason")


@dataclass
class Seen:
    """What went wrong, as a replayable request each."""

    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, request: str, why: str) -> None:
        if not ok:
            self.failures.append(f"{short(request)}: {short(why)}")


def short(text: str, most: int = 240) -> str:
    return text if len(text) <= most else f"{text[:most]}…({len(text)} chars)"


def snapshot(path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table in the SQLite file, read past the engine."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: sorted(map(tuple, db.execute(f'SELECT * FROM "{n}"')), key=repr) for n in names}


def fixes_run(seen: Seen, request: str, answer: httpx2.Response, prefix: str) -> list[str]:
    """The fixes shown: each `mcp-jobs` line must parse; each dashboard URL is returned to GET."""
    urls = []
    for mark in [*Marks(answer.text).all("error-fix"), *Marks(answer.text).all("notice-fix")]:
        fix = mark.text.strip()
        if fix.startswith(prefix + "/"):
            urls.append(fix)
            continue
        try:
            words = command_words(fix)
        except ValueError as exc:
            seen.check(False, request, f"fix {fix!r} is not a shell line: {exc}")
            continue
        if not words or words[0] != "mcp-jobs":
            continue
        try:
            with redirect_stdout(io.StringIO()):  # --help prints
                build_parser().parse_args(words[1:])
        except UsageError as exc:
            seen.check(False, request, f"fix {fix!r} is refused by the CLI: {exc}")
        except SystemExit as exc:  # --help prints and exits 0
            seen.check(exc.code == 0, request, f"fix {fix!r} exits {exc.code}")
    return urls


def judged(seen: Seen, request: str, answer: httpx2.Response) -> None:
    """The checks every answer passes."""
    seen.check(answer.status_code < 500, request, f"status {answer.status_code}")
    body = answer.text
    for bad in MARKUP:
        seen.check(bad not in body, request, f"{bad!r} unescaped in the body")
    if answer.status_code >= 400:
        marks = Marks(body)
        shown = {t: [m.text.strip() for m in marks.all(t)] for t in ("error-code", "error-cause")}
        fixes = [m.text.strip() for m in marks.all("error-fix")]
        seen.check(
            len(shown["error-code"]) == 1
            and all(shown["error-cause"])
            and all(fixes)
            and bool(fixes),
            request,
            f"{answer.status_code} without a code, cause and fix: {body[-400:]!r}",
        )


def refusal(answer: httpx2.Response) -> tuple[str, ...]:
    marks = Marks(answer.text)
    return tuple(m.text for m in [*marks.all("error-code"), *marks.all("error-cause")])


def hostile_query(rng: random.Random, reads: tuple[str, ...]) -> list[tuple[str, str]]:
    names = [*reads, "bogus", "tenant_id", "states", "token\u202e"]
    query = [(rng.choice(names), rng.choice(HOSTILE))]
    if rng.random() < 0.3:  # repeated
        query.append((query[0][0], rng.choice(HOSTILE)))
    if rng.random() < 0.3 and reads:
        query.append((rng.choice(reads), rng.choice(HOSTILE)))
    return query


def fill(route: Route, value: str) -> str:
    """The route's path with each `{param}` given `value`, percent-encoded as one segment."""
    return re.sub(r"\{[^}]+\}", lambda _: quote(value, safe=""), route.path)


def url_of(path: str, query: list[tuple[str, str]]) -> str:
    return path + ("?" + urlencode(query) if query else "")


async def test_hostile_gets_to_every_page(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    rng = random.Random(SEED)
    seen = Seen()
    before = snapshot(jobs.driver.path)  # type: ignore[attr-defined]
    table = [r for r in routes(dash) if isinstance(r, Route) and "GET" in (r.methods or ())]
    assert {r.path for r in table} >= {"/", "/jobs", "/jobs/{job_id}/retry"}, "routes read"
    async with browse(dash) as http:
        for route in table:
            reads = READS.get(route.path, ())
            for n in range(GETS_PER_ROUTE):
                segment = seeded.one("dead") if n % 2 else rng.choice(HOSTILE)
                query = hostile_query(rng, reads) if n else []
                url = url_of(fill(route, segment), query)
                request = f"seed {SEED} GET {url[:300]}"
                answer = await http.get(url)
                judged(seen, request, answer)
                # A name the page does not read is refused, not dropped (a wider list).
                unread = [name for name, _ in query if name not in reads]
                seen.check(
                    answer.status_code >= 400 or not unread,
                    request,
                    f"{answer.status_code}: {unread} dropped",
                )
                for fix in fixes_run(seen, request, answer, dash.prefix):
                    # The URL mended: it may refuse another hostile value, never this one.
                    mended = await http.get(fix)
                    seen.check(
                        refusal(mended) != refusal(answer),
                        request,
                        f"its fix {fix} is refused the same: {refusal(mended)}",
                    )
        for route in table:
            if "POST" not in (route.methods or ()):  # a method the route does not take
                url = fill(route, seeded.one("dead"))
                answer = await http.post(url, data={"x": XSS})
                seen.check(answer.status_code == 405, f"POST {url}", f"{answer.status_code}")
                judged(seen, f"POST {url}", answer)
                fixes_run(seen, f"POST {url}", answer, dash.prefix)
    # A read (the confirmation forms included) changes nothing stored.
    assert snapshot(jobs.driver.path) == before  # type: ignore[attr-defined]
    assert not seen.failures, "\n".join(seen.failures[:20])


@dataclass(frozen=True)
class Form:
    url: str
    csrf: str


async def confirmation(http: httpx2.AsyncClient, url: str) -> Form | None:
    answer = await http.get(url)
    if answer.status_code != 200:
        return None
    action = re.search(r'<form method="post" action="([^"]*)"', answer.text)
    token = re.search(r'name="csrf" value="([^"]*)"', answer.text)
    assert action is not None and token is not None, answer.text
    return Form(action[1].replace("&amp;", "&"), token[1])


def hostile_body(rng: random.Random, form: Form, other: Form) -> tuple[str, dict[str, str], bool]:
    """A body, its headers, and whether the form's own token is in it (else it must be
    refused before anything runs)."""
    fields = {"csrf": form.csrf, "include_cancelled": "", "reason": ""}
    kind = rng.randrange(7)
    if kind == 0:
        del fields["csrf"]
    elif kind == 1:
        fields["csrf"] = rng.choice([*HOSTILE, "0" * 64, form.csrf.upper(), form.csrf[:-1]])
    elif kind == 2:
        fields["csrf"] = other.csrf  # another form's token
    elif kind == 3:
        fields[rng.choice(FIELDS[1:])] = rng.choice(HOSTILE)
        fields["extra"] = rng.choice(HOSTILE)
    elif kind == 4:  # oversized
        fields["reason"] = "r" * rng.choice([4_097, 10_240, 100_000])
    elif kind == 5:  # a JSON body
        import json

        return json.dumps(fields), {"content-type": "application/json"}, False
    else:
        fields[rng.choice(FIELDS[1:])] = rng.choice(HOSTILE)
        del fields[rng.choice(FIELDS[1:])]
    keeps = kind in (3, 6) or (kind == 1 and fields["csrf"] == form.csrf)
    body = urlencode(fields)
    return body, {"content-type": "application/x-www-form-urlencoded"}, keeps


async def test_hostile_posts_to_every_form(jobs: Jobs, seeded: Seeded) -> None:
    dash = dashboard_for(jobs)
    rng = random.Random(SEED)
    seen = Seen()
    posted = [r for r in routes(dash) if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert posted, "the action routes are read"
    async with browse(dash) as http:
        for route in posted:
            reads = READS.get(route.path, ())
            for n in range(POSTS_PER_FORM):
                # A job not there (or a hostile id), or a hostile queue name: refused by the
                # operation, so nothing but its audit event may be written.
                segment = rng.choice(HOSTILE) if n % 3 else seeded.one("done")
                query = [(q, rng.choice(HOSTILE[4:])) for q in reads]
                url = url_of(fill(route, segment), query)
                form = await confirmation(http, url)
                other = await confirmation(http, url_of(fill(route, "0" * 32), query))
                if form is None or other is None or other.url == form.url:
                    continue
                body, headers, keeps = hostile_body(rng, form, other)
                request = f"seed {SEED} POST {form.url[:200]} body {body[:200]!r} {headers}"
                before = snapshot(jobs.driver.path)  # type: ignore[attr-defined]
                answer = await http.post(form.url, content=body, headers=headers)
                judged(seen, request, answer)
                after = snapshot(jobs.driver.path)  # type: ignore[attr-defined]
                if answer.status_code >= 400:
                    for table in before:
                        if table != "mcp_jobs_events" or not keeps:
                            seen.check(
                                before[table] == after[table],
                                request,
                                f"refused, yet {table} changed",
                            )
                fixes_run(seen, request, answer, dash.prefix)
    assert not seen.failures, "\n".join(seen.failures[:20])


async def test_every_route_without_its_token_is_refused_saying_how(
    jobs: Jobs, seeded: Seeded
) -> None:
    settings = Settings(read_only=False)
    dash = dashboard_for(jobs, settings=settings)
    auth = DashboardAuth(static_verifier("s3cret-token-of-the-test-0123456789"))
    seen = Seen()
    before = snapshot(jobs.driver.path)  # type: ignore[attr-defined]
    async with browse(dash, auth) as http:
        for route in routes(dash):
            assert isinstance(route, Route)
            url = fill(route, seeded.one("dead"))
            for method in sorted(route.methods or ()):
                if method == "HEAD":
                    continue
                for headers in (
                    {},
                    {"authorization": "Bearer wrong"},
                    {"authorization": f"Basic {XSS}"},
                    {"cookie": f"mcp_jobs_dashboard={IMG}"},
                ):
                    request = f"{method} {url} {headers}"
                    answer = await http.request(method, url, headers=headers)
                    seen.check(answer.status_code == 401, request, f"{answer.status_code}")
                    judged(seen, request, answer)
                wrong = url_of(url, [("token", XSS)])
                answer = await http.request(method, wrong)
                judged(seen, f"{method} {wrong}", answer)
    assert snapshot(jobs.driver.path) == before  # type: ignore[attr-defined]
    assert not seen.failures, "\n".join(seen.failures[:20])


async def test_a_read_only_dashboard_refuses_every_action_saying_how(
    jobs: Jobs, seeded: Seeded
) -> None:
    dash = dashboard_for(jobs, read_only=True)
    seen = Seen()
    before = snapshot(jobs.driver.path)  # type: ignore[attr-defined]
    async with browse(dash) as http:
        for route in routes(dash):
            assert isinstance(route, Route)
            if "POST" not in (route.methods or ()):
                continue
            query = [(q, "mail") for q in READS.get(route.path, ())]
            for segment in (seeded.one("dead"), IMG):
                url = url_of(fill(route, segment), query)
                for method in ("GET", "POST"):
                    request = f"read-only {method} {url}"
                    answer = await http.request(method, url, data={"csrf": "x", "reason": IMG})
                    seen.check(answer.status_code == 403, request, f"{answer.status_code}")
                    judged(seen, request, answer)
                    fixes_run(seen, request, answer, dash.prefix)
    assert snapshot(jobs.driver.path) == before  # type: ignore[attr-defined]
    assert not seen.failures, "\n".join(seen.failures[:20])
