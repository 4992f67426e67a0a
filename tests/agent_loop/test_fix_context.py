"""The one rule that writes the effective context into a fix line (`FixContext`), the app's
declared environment, and the wait's monotone attempt counter."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from engine.environment import (
    EnvironmentUse,
    declared_environment,
    forget_environment,
    uses_environment,
)
from engine.errors import InvalidArgumentError
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext, _fields_to_visit, absolute_url, needs_cwd_on_path
from mcp_jobs.operations.attempts import AttemptCounter
from mcp_jobs.operations.models import Finding
from schemas.errors import ErrorPayload
from schemas.jobs import JobRecord
from tests.cli.databases import migrated


@pytest.fixture
def app_env() -> Iterator[list[EnvironmentUse]]:
    uses_environment("FIXCTX_DB", default="data/app.db", path=True)
    uses_environment("FIXCTX_MODE")
    yield [u for u in declared_environment() if u.name.startswith("FIXCTX_")]
    forget_environment("FIXCTX_DB")
    forget_environment("FIXCTX_MODE")


def context(tmp_path: Path, **settings: object) -> FixContext:
    """A context with no app environment (whatever apps other tests imported)."""
    return FixContext.of(
        Settings(**settings),  # type: ignore[arg-type]
        cwd=tmp_path,
        environ={},
        declared=[],
    )


def test_a_relative_or_default_sqlite_url_is_made_absolute(tmp_path: Path) -> None:
    assert absolute_url("sqlite:///x.db", tmp_path) == f"sqlite:///{tmp_path}/x.db"
    assert absolute_url("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    ctx = context(tmp_path)
    assert ctx.database_url == f"sqlite:///{tmp_path}/.mcp-jobs/jobs.db"


def test_a_password_is_never_written() -> None:
    url = "postgresql://app:s3cret@db:5432/jobs?sslmode=require&password=s3cret"
    written = absolute_url(url, Path("/"))
    assert written == "postgresql://app@db:5432/jobs?sslmode=require"


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret@cache:6379/0",
        "redis://app:s3cret@cache:6379/0?prefix=jobs:",
        "nats://s3cret@broker:4222/jobs",
        "nats://a:4222,app:s3cret@b:4222/jobs",
        "redis://cache:6379/0?password=s3cret",
    ],
)
def test_a_url_with_a_secret_is_named_by_its_variable(tmp_path: Path, url: str) -> None:
    """Redis and NATS clients read the secret from nowhere else: the command names the
    environment variable that holds the URL, never the secret."""
    assert absolute_url(url, tmp_path) is None
    ctx = context(tmp_path, database_url=url)
    line = ctx.qualify("mcp-jobs jobs ls")
    assert "s3cret" not in line
    assert line.startswith('mcp-jobs jobs ls --database-url "$MCP_JOBS_DATABASE_URL"')


def test_a_url_without_a_secret_is_written_out(tmp_path: Path) -> None:
    for url in ("redis://cache:6379/0?prefix=jobs:", "nats://a:4222,b:4222/jobs"):
        ctx = context(tmp_path, database_url=url)
        assert ctx.qualify("mcp-jobs jobs ls").startswith(
            f"mcp-jobs jobs ls --database-url {shlex.quote(url)}"
        )


def test_a_command_gets_the_context_and_a_tool_call_does_not(tmp_path: Path) -> None:
    ctx = context(tmp_path, database_url="sqlite:///j.db", apps=("a.b", "c"), tenant="t 1")
    url = f"sqlite:///{tmp_path}/j.db"
    assert ctx.qualify("mcp-jobs jobs show X --json") == (
        f"mcp-jobs jobs show X --json --database-url {url} --app a.b,c --tenant 't 1'"
    )
    # A backfill spans every tenant and a worker serves them all: no --tenant there.
    assert ctx.qualify("mcp-jobs worker --queues q").endswith(f"--database-url {url} --app a.b,c")
    assert ctx.qualify('inspect_job {"job_id": "X"}') == 'inspect_job {"job_id": "X"}'
    assert ctx.qualify("pip install --upgrade mcp-jobs") == "pip install --upgrade mcp-jobs"
    assert ctx.qualify("mcp-jobs demo") == "mcp-jobs demo"
    given = "mcp-jobs backfill n --database-url sqlite:////o.db --app x"
    assert ctx.qualify(given) == given
    once = ctx.qualify("mcp-jobs jobs ls")
    assert ctx.qualify(once) == once
    # Every command that takes the context gets it: a rate-limit finding's `limits` line ran on
    # the default database from any other directory.
    assert ctx.qualify("mcp-jobs limits --json") == (
        f"mcp-jobs limits --json --database-url {url} --app a.b,c"
    )
    assert ctx.qualify("mcp-jobs events send paid 7").endswith(f"{url} --app a.b,c --tenant 't 1'")
    assert ctx.qualify("mcp-jobs dashboard --port 9").endswith(f"--database-url {url} --app a.b,c")


def test_no_call_is_made_to_a_tool_the_caller_cannot_call(tmp_path: Path) -> None:
    """A read-only server serves no mutating tool: the fix stays the command the person runs,
    and a next_call naming such a tool is left out."""
    full = context(tmp_path, database_url="sqlite:///j.db")
    assert full.rewrite("mcp-jobs db prune")[1] is not None  # prune_history {"write": true}
    bare = FixContext.of(
        Settings(database_url="sqlite:///j.db"),
        cwd=tmp_path,
        environ={},
        declared=[],
        unserved=frozenset({"prune_history", "resume_queue"}),
    )
    line, call = bare.rewrite("mcp-jobs db prune")
    assert call is None and line.startswith("mcp-jobs db prune --database-url sqlite:///")
    paused = Finding(
        code="QUEUE_PAUSED",
        severity="warning",
        cause="paused",
        fix="mcp-jobs queues resume mail",
        next_call={"tool": "resume_queue", "arguments": {"queue": "mail"}},  # type: ignore[arg-type]
    )
    assert bare.qualify_all(paused).next_call is None
    assert full.qualify_all(paused).next_call == paused.next_call
    dead = paused.model_copy(update={"next_call": {"tool": "inspect_job", "arguments": {}}})
    assert bare.qualify_all(dead).next_call == dead.next_call  # a tool it serves stays


def test_the_environment_goes_in_front_of_commands(
    tmp_path: Path, app_env: list[EnvironmentUse]
) -> None:
    environ = {"FIXCTX_MODE": "fast lane"}
    settings = Settings(environment="staging")
    ctx = FixContext.of(settings, cwd=tmp_path, environ=environ, declared=app_env)
    prefix = f"FIXCTX_DB={tmp_path}/data/app.db FIXCTX_MODE='fast lane' MCP_JOBS_ENV=staging"
    assert ctx.qualify('python -c "import x"') == f'{prefix} python -c "import x"'
    assert ctx.qualify("mcp-jobs db migrate").startswith(f"{prefix} mcp-jobs db migrate ")
    # What the line sets itself is not set again.
    assert ctx.qualify("MCP_JOBS_ENV=prod mcp-jobs backfill n --write").startswith(
        f"FIXCTX_DB={tmp_path}/data/app.db FIXCTX_MODE='fast lane' MCP_JOBS_ENV=prod "
    )


def test_an_unknown_app_is_a_marked_placeholder_on_the_worker_line_only(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert ctx.worker("worker").endswith("--app <module>")
    assert "--app" not in ctx.command("jobs", "ls")
    # A worker line as typed ran without --app and runs so again: no placeholder.
    assert "--app" not in ctx.qualify("mcp-jobs worker")
    assert context(tmp_path, apps=("json",)).worker("worker").endswith("--app json")


def test_an_app_importable_only_from_the_cwd_gets_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "fixctx_only_here.py").write_text("")
    assert needs_cwd_on_path("fixctx_only_here", tmp_path)
    assert not needs_cwd_on_path("json", tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        ctx = context(tmp_path, apps=("fixctx_only_here",))
    finally:
        sys.path.remove(str(tmp_path))
    assert ctx.qualify("mcp-jobs worker").startswith(f"PYTHONPATH={tmp_path} mcp-jobs worker ")
    # A PYTHONPATH this process inherited is kept behind it, and not doubled when it names the
    # directory already (it was written as `PYTHONPATH=/dir:/dir`).
    for inherited, written in [
        ("/elsewhere", f"{tmp_path}:/elsewhere"),
        (f"{tmp_path}", f"{tmp_path}"),
        (f"/elsewhere:{tmp_path}", f"/elsewhere:{tmp_path}"),
        (".", f"{tmp_path}"),  # relative: written absolute, as it names the directory
    ]:
        sys.path.insert(0, str(tmp_path))
        try:
            ctx = FixContext.of(
                Settings(apps=("fixctx_only_here",)),
                cwd=tmp_path,
                environ={"PYTHONPATH": inherited},
                declared=[],
            )
        finally:
            sys.path.remove(str(tmp_path))
        assert ctx.qualify("mcp-jobs worker").startswith(f"PYTHONPATH={written} mcp-jobs "), (
            inherited
        )


def test_qualify_all_reaches_nested_payloads_and_leaves_job_data(tmp_path: Path) -> None:
    ctx = context(tmp_path, database_url="sqlite:////j.db")
    error = ErrorPayload(code="X", title="t", cause="c", fix="mcp-jobs jobs ls", retryable=False)
    finding = Finding(
        code="F", severity="info", cause="c", fix="mcp-jobs jobs ls", last_error=error
    )
    out = ctx.qualify_all(finding)
    assert out.fix.endswith("--database-url sqlite:////j.db")
    assert out.last_error is not None and out.last_error.fix.endswith("sqlite:////j.db")


def test_qualify_all_looks_into_every_field_that_can_hold_a_fix(tmp_path: Path) -> None:
    """Only scalar fields are skipped: a union with a model, a list of models, a mapping of
    stored JSON and an untyped field are all looked into."""

    class Row(BaseModel):
        id: str
        state: Literal["a", "b"]
        attempt: int
        last_error: ErrorPayload | None = None

    class Page(BaseModel):
        rows: list[Row]
        data: dict[str, Any] = {}
        anything: Any = None
        by_name: dict[str, Row] = {}

    ctx = context(tmp_path, database_url="sqlite:////j.db")
    error = ErrorPayload(code="X", title="t", cause="c", fix="mcp-jobs jobs ls", retryable=False)
    stored = {"code": "Y", "fix": "mcp-jobs jobs ls"}
    page = Page(
        rows=[Row(id="1", state="a", attempt=1, last_error=error)],
        data={"error": stored},
        anything=[stored],
        by_name={"r": Row(id="2", state="b", attempt=0, last_error=error)},
    )
    out = ctx.qualify_all(page)
    qualified = "mcp-jobs jobs ls --database-url sqlite:////j.db"
    assert out.rows[0].last_error is not None and out.rows[0].last_error.fix == qualified
    assert out.data["error"]["fix"] == qualified and out.anything[0]["fix"] == qualified
    assert out.by_name["r"].last_error is not None
    assert out.by_name["r"].last_error.fix == qualified
    assert _fields_to_visit(Row) == ("last_error",)


def test_an_environment_declaration_is_checked() -> None:
    with pytest.raises(InvalidArgumentError):
        uses_environment("NOT A NAME")


def _record(state: str, attempt: int) -> JobRecord:
    return JobRecord.model_validate(
        {
            "id": "j",
            "run_id": "r",
            "name": "n",
            "queue": "q",
            "tenant_id": None,
            "state": state,
            "attempt": attempt,
            "max_attempts": 3,
            "run_at": 0,
            "created_at": 0,
            "updated_at": 0,
            "queued_at": 0,
            "input": {},
            "idempotency_key": "k",
        }
    )


def test_the_attempt_in_progress_lines_never_goes_backwards() -> None:
    counter = AttemptCounter()
    seen = [
        counter.line(_record(state, attempt))
        for state, attempt in [
            ("ready", 0),
            ("running", 1),
            ("running", 2),
            ("ready", 0),
            ("running", 1),
        ]
    ]
    assert seen[:3] == [
        "ready (attempt 0 of 3)",
        "running (attempt 1 of 3)",
        "running (attempt 2 of 3)",
    ]
    assert seen[3] == "ready (attempt 2 in all; 0 of 3 since it was requeued)"
    assert seen[4] == "running (attempt 3 in all; 1 of 3 since it was requeued)"


def test_a_program_the_shell_would_not_find_as_ours_is_named_by_its_path(tmp_path: Path) -> None:
    """An MCP client often starts the server by its full path, from a virtualenv the agent's
    shell has not activated: there `mcp-jobs` or `python` is not found, or is another one."""
    ours = Path(sys.executable).parent / "mcp-jobs"
    url = migrated(f"sqlite:///{tmp_path}/jobs.db")

    def of(path: str) -> FixContext:
        environ = {"PATH": path}
        return FixContext.of(
            Settings(database_url=url), face="cli", cwd=tmp_path, environ=environ, declared=[]
        )

    elsewhere = of(str(tmp_path))
    line = elsewhere.command("jobs", "ls", "--json")
    assert shlex.split(line)[0] == str(ours)
    assert elsewhere.qualify(line) == line  # written once
    assert shlex.split(elsewhere.qualify("python -c 'print(1)'"))[0] == sys.executable
    ran = subprocess.run(
        shlex.split(line), env={"PATH": str(tmp_path)}, capture_output=True, timeout=60
    )
    assert ran.returncode == 0 and json.loads(ran.stdout)["ok"] is True, ran.stderr
    # A shell that finds ours by name gets the name.
    assert of(str(ours.parent)).command("jobs", "ls").startswith("mcp-jobs jobs ls ")


def test_a_declaration_answers_the_value_the_code_reads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # exploreT: `DATA = uses_environment(...)` was None, and the app's backfill failed on it.
    monkeypatch.chdir(tmp_path)
    try:
        assert uses_environment("FIXCTX_READ", default="data/app.db", path=True) == str(
            tmp_path / "data" / "app.db"
        )
        monkeypatch.setenv("FIXCTX_READ", "/srv/app.db")
        assert uses_environment("FIXCTX_READ", default="data/app.db", path=True) == "/srv/app.db"
        assert uses_environment("FIXCTX_UNSET_READ") is None
    finally:
        forget_environment("FIXCTX_READ")
        forget_environment("FIXCTX_UNSET_READ")
