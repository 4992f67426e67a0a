"""A fix line naming a value that holds a control character (bounds admit any but NUL in a queue,
a tenant, a name, a key) is one printable line that, run as given in bash, acts on that exact
value: `mcp-jobs` and `bash` are real processes here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from engine.drivers.base import PAUSES, require
from engine.ids import new_ids
from engine.shell_words import shell_join
from mcp_jobs.cli.render import print_error
from mcp_jobs.fix_context import FixContext
from schemas.jobs import EnqueueRequest
from tests.cli.databases import migrated

BIN = str(Path(sys.executable).parent)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["mcp-jobs", *argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )


def test_a_finding_names_a_queue_with_a_newline_in_a_fix_that_resumes_it(
    tmp_path: Path,
) -> None:
    url = migrated(f"sqlite:///{tmp_path}/jobs.db")
    db = ["--database-url", url]

    async def pause() -> None:
        # Stored before the name rule refused such a pause: written past the client.
        jobs = await connect(url, registry=JobRegistry())
        try:
            await require(jobs.driver, PAUSES).pause("queue", "q\n1", None, None, 0)
        finally:
            await jobs.close()

    anyio.run(pause)
    # A QUEUE_PAUSED finding whose fix resumes it.
    diagnosed = _cli(tmp_path, "jobs", "diagnose", *db)
    fixes = [line for line in diagnosed.stdout.splitlines() if line.lstrip().startswith("fix:")]
    assert len(fixes) == 1, diagnosed.stdout
    fix = fixes[0].strip().removeprefix("fix:").strip()
    assert fix.isprintable(), fix

    done = subprocess.run(
        ["bash", "-c", fix], cwd="/", env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (fix, done.stdout, done.stderr)
    listed = _cli(tmp_path, "queues", "ls", *db, "--json")
    assert json.loads(listed.stdout)["pauses"] == []


class _Numbered(BaseModel):
    n: int


def _enqueue(url: str, tenants: list[str]) -> list[str]:
    registry = JobRegistry()

    @job(idempotency_key=lambda i: f"n:{i.n}", name="noop", registry=registry)
    async def noop(input: _Numbered, ctx: JobContext) -> None:
        return None

    async def run() -> list[str]:
        # Rows stored before the name rule refused such tenants: written past the client.
        jobs = await connect(url, registry=registry)
        try:
            now = jobs.clock.now_ms()
            requests = []
            for n, tenant in enumerate(tenants):
                job_id, run_id = new_ids(2, now)
                key, value = f"n:{n}", {"n": n}
                requests.append(
                    EnqueueRequest(job_id, run_id, "noop", "default", key, value, now, 3, tenant)
                )
            await jobs.driver.enqueue(requests, now=now)
            return [request.id for request in requests]
        finally:
            await jobs.close()

    return anyio.run(run)


def test_a_json_fix_naming_a_tenant_with_a_newline_or_an_escape_is_one_line(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    db = ["--database-url", url]
    tenants = ["t\n1", "t\x1b[31m1"]
    ids = dict(zip(tenants, _enqueue(url, [*tenants, "t\\n1"]), strict=False))
    for tenant in tenants:
        missing = "0" * 32
        refused = _cli(tmp_path, "jobs", "retry", missing, "--tenant", tenant, *db, "--json")
        assert refused.returncode == 1
        fix = json.loads(refused.stdout)["error"]["fix"]
        assert fix.isprintable(), fix
        done = subprocess.run(
            ["bash", "-c", fix], cwd="/", env=_env(), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (fix, done.stderr)
        # It lists that tenant's one job (not the one of "t\\n1", a backslash and an n).
        assert [j["id"] for j in json.loads(done.stdout)["jobs"]] == [ids[tenant]]


def test_context_written_into_a_fix_keeps_a_dollar_quoted_name_after_its_end_of_options() -> None:
    # A queue named "-q\n1" goes after `--`; the flags are written in before it, and the line is
    # read and written again: the name must come back the same.
    fixes = FixContext(database_url="sqlite:////srv/jobs.db\t1", face="cli")
    line = fixes.command("queues", "resume", "-q\n1")
    assert line.isprintable(), line
    assert fixes.qualify(line) == line
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, timeout=30, check=True
    )
    words = done.stdout.decode().split("\0")[:-1]
    assert words == [
        "mcp-jobs",
        "queues",
        "resume",
        "--database-url",
        "sqlite:////srv/jobs.db\t1",
        "--",
        "-q\n1",
    ]


def test_the_text_output_prints_a_dollar_quoted_fix_as_written_and_escapes_a_raw_escape() -> None:
    fix = shell_join(["mcp-jobs", "jobs", "ls", "--tenant", "t\n\x1b1"])
    out = io.StringIO()
    print_error({"code": "JOB_NOT_FOUND", "title": "t", "cause": "c", "fix": fix}, out)
    assert f"  fix:   {fix}\n" in out.getvalue()
    out = io.StringIO()  # an app's own fix, not ours: no terminal escape reaches the screen
    print_error({"code": "JOB_FAILED", "title": "t", "cause": "c", "fix": "run \x1b[2J"}, out)
    assert "\x1b" not in out.getvalue() and "run \\x1b[2J" in out.getvalue()
