"""A Python caller's fixes run as given: JOB_INPUT_INVALID and IDEMPOTENCY_KEY_FAILED name the
job's description as a line a Python caller runs (the `mcp-jobs jobs describe NAME` command with
this client's database, or `await jobs.describe("NAME")` on `memory://`), never an MCP tool
call; an INVALID_ARGUMENT whose nearest value is known is the caller's own call mended, when
every argument of it is a short literal; a JOB_NOT_FOUND of a text holding an id, the call
with that id. Each fix here is run: a shell line from another directory, a call on `jobs`."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, job
from engine.errors import JobsError
from schemas.descriptor import JobDescriptor
from schemas.jobs import EnqueueResult, JobPage, JobRecord
from schemas.trace import JobTrace
from tests.support.fix_lines import run_script

pytestmark = pytest.mark.drivers("memory", "sqlite", "postgres", reason="fix lines per store")


class In(BaseModel):
    a: int
    note: str = ""
    password: str = ""


def declare(registry: JobRegistry) -> None:
    @job(name="nokey", idempotency_key=lambda i: f"k:{i.a}", registry=registry)
    async def nokey(input: In, ctx: JobContext) -> None:
        return None

    @job(name="keyboom", idempotency_key=lambda i: str(1 // (i.a - i.a)), registry=registry)
    async def keyboom(input: In, ctx: JobContext) -> None:
        return None


async def refused(call: Any, code: str) -> JobsError:
    """The error `call` (a function making the coroutine) raises, of `code`."""
    with pytest.raises(JobsError) as raised:
        await call()
    assert raised.value.code == code, raised.value.to_payload()
    return raised.value


async def run_fix(fix: str, jobs: Jobs, elsewhere: Path) -> Any:
    """What `fix` answers: a Python line run against `jobs`, a shell line run in `elsewhere`
    (its JSON)."""
    if fix.startswith("await "):
        code = compile(fix, "<fix>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return await eval(code, {"jobs": jobs})
    assert fix.startswith("mcp-jobs "), fix
    env = {k: v for k, v in os.environ.items() if k != "MCP_JOBS_DATABASE_URL"}
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            ["bash", "-c", fix],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    )
    assert done.returncode == 0, (fix, done.stdout, done.stderr)
    return json.loads(done.stdout)


def described(answer: Any) -> list[str]:
    if isinstance(answer, dict):
        return [d["name"] for d in answer["jobs"]]
    assert all(isinstance(d, JobDescriptor) for d in answer), answer
    return [d.name for d in answer]


async def test_bad_input_and_a_raising_key_fix_is_the_jobs_description(
    jobs: Jobs, registry: JobRegistry, tmp_path: Path
) -> None:
    declare(registry)
    # No --app can import this test's jobs elsewhere, and no worker published them: a shell
    # line would describe none of them, the call on this client describes each.
    cases = [
        ("nokey", lambda: jobs.enqueue("nokey", {"a": "x"}), "JOB_INPUT_INVALID"),
        ("keyboom", lambda: jobs.enqueue("keyboom", {"a": 1}), "IDEMPOTENCY_KEY_FAILED"),
    ]
    for name, call, code in cases:
        error = await refused(call, code)
        assert error.fix == f'await jobs.describe("{name}")'
        assert described(await run_fix(error.fix, jobs, tmp_path)) == [name]
        # An MCP face still offers the tool call beside it.
        assert error.next_call is not None and error.next_call.tool == "describe_jobs"
        assert error.next_call.arguments == {"name": name}
    fix = (await refused(lambda: jobs.describe("zzz"), "JOB_UNKNOWN")).fix
    assert sorted(described(await run_fix(fix, jobs, tmp_path))) == ["keyboom", "nokey"]


async def test_a_misspelt_job_name_is_the_call_with_the_name_meant(
    jobs: Jobs, registry: JobRegistry, tmp_path: Path
) -> None:
    declare(registry)
    fix = (await refused(lambda: jobs.describe("nokye"), "JOB_UNKNOWN")).fix
    assert fix == 'await jobs.describe("nokey")'
    assert described(await run_fix(fix, jobs, tmp_path)) == ["nokey"]
    fix = (await refused(lambda: jobs.enqueue("nokye", {"a": 1}), "JOB_UNKNOWN")).fix
    assert fix == 'await jobs.enqueue("nokey", {"a": 1})'
    assert isinstance(await run_fix(fix, jobs, tmp_path), EnqueueResult)


# Writes the fix of bad input to a job of an app that imports from any directory.
SCRIPT = """
import asyncio, json
import examples.shop.jobs  # noqa: F401  (registers the shop's jobs)
from engine import connect

async def main():
    jobs = await connect("sqlite:///x.db")
    try:
        await jobs.enqueue("import_supplier_prices", {"supplier": []})
    except Exception as e:
        print(json.dumps([e.code, e.fix]))
    await jobs.close()

asyncio.run(main())
"""


@pytest.mark.drivers("sqlite", reason="the script opens a SQLite file of its own")
async def test_bad_input_to_an_importable_apps_job_is_the_describe_line(tmp_path: Path) -> None:
    here, elsewhere, out = await anyio.to_thread.run_sync(lambda: run_script(SCRIPT, tmp_path))
    code, fix = json.loads(out)
    assert code == "JOB_INPUT_INVALID"
    assert fix == (
        "mcp-jobs jobs describe import_supplier_prices --json "
        f"--database-url sqlite:///{here / 'x.db'} --app examples.shop.jobs"
    )
    answer = await run_fix(fix, None, elsewhere)  # type: ignore[arg-type]
    assert described(answer) == ["import_supplier_prices"]


async def test_a_refused_argument_with_a_nearest_value_is_the_call_mended(
    jobs: Jobs, registry: JobRegistry, tmp_path: Path
) -> None:
    declare(registry)
    made = await jobs.enqueue("nokey", {"a": 1})
    cases: list[tuple[Any, str, type]] = [
        (lambda: jobs.list(limit=100_000), "await jobs.list(limit=1000)", JobPage),
        (
            lambda: jobs.list(state="dead", limit=0),
            'await jobs.list(state="dead", limit=1)',
            JobPage,
        ),
        (
            lambda: jobs.enqueue("nokey", {"a": 2}, priority=11),
            'await jobs.enqueue("nokey", {"a": 2}, priority=10)',
            EnqueueResult,
        ),
        (
            lambda: jobs.enqueue("nokey", {"a": 3}, delay=-5),
            'await jobs.enqueue("nokey", {"a": 3}, delay=0)',
            EnqueueResult,
        ),
        (
            lambda: jobs.trace(made.id, steps_limit=0),
            f'await jobs.trace("{made.id}", steps_limit=1)',
            JobTrace,
        ),
        (lambda: jobs.select(limit=5000), "await jobs.select(limit=1000)", tuple),
    ]
    for call, fix, answer in cases:
        error = await refused(call, "INVALID_ARGUMENT")
        assert error.fix == fix
        assert isinstance(await run_fix(error.fix, jobs, tmp_path), answer)


async def test_a_text_holding_a_job_id_is_the_call_with_that_id(
    jobs: Jobs, registry: JobRegistry, tmp_path: Path
) -> None:
    declare(registry)
    made = await jobs.enqueue("nokey", {"a": 1})
    error = await refused(lambda: jobs.get(f"job {made.id}"), "JOB_NOT_FOUND")
    assert error.fix == f'await jobs.get("{made.id}")'
    record = await run_fix(error.fix, jobs, tmp_path)
    assert isinstance(record, JobRecord) and record.id == made.id


async def test_the_prose_is_kept_where_no_literal_call_can_be_written(
    jobs: Jobs, registry: JobRegistry
) -> None:
    declare(registry)
    # An input model (no literal of it), a long input, a credential: the words, as before.
    calls = [
        lambda: jobs.enqueue("nokey", In(a=1), priority=11),
        lambda: jobs.enqueue("nokey", {"a": 1, "note": "x" * 400}, priority=11),
        lambda: jobs.enqueue("nokey", {"a": 1, "note": "postgresql://u:s3cret@h/db"}, priority=11),
        lambda: jobs.enqueue("nokey", {"a": 1, "password": "s3cret"}, priority=11),
    ]
    for call in calls:
        error = await refused(call, "INVALID_ARGUMENT")
        assert error.fix == "pass priority as a whole number from 0 to 10", error.fix
    # No value is nearest to a state nothing has: said, not a "<state>" slot.
    unknown = "sleeping"
    error = await refused(lambda: jobs.list(state=unknown), "INVALID_ARGUMENT")  # type: ignore[arg-type]
    assert error.fix.startswith("pass state as one of"), error.fix


async def test_a_faces_client_keeps_the_engines_fix(jobs: Jobs, registry: JobRegistry) -> None:
    declare(registry)
    # A face (MCP, CLI) writes its own fix, its caller's tool call or command: never a call on
    # `jobs` it has no client named so for.
    jobs.fix_context = None
    for call in (
        lambda: jobs.list(limit=100_000),
        lambda: jobs.enqueue("nokey", {"a": 2}, priority=11),
    ):
        error = await refused(call, "INVALID_ARGUMENT")
        assert not error.fix.startswith("await "), error.fix


@pytest.mark.drivers("memory", reason="no command reaches a memory:// store: the call does")
async def test_an_unknown_backfill_on_memory_is_the_call_listing_them(jobs: Jobs) -> None:
    from engine.backfill import Backfills  # the name the fix line uses

    backfills = Backfills(jobs)
    error = await refused(lambda: backfills.dry_run("nosuch"), "BACKFILL_UNKNOWN")
    assert error.fix == "await Backfills(jobs).list()"
    listed = await eval(
        compile(error.fix, "<fix>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT),
        {"jobs": jobs, "Backfills": Backfills},
    )
    assert isinstance(listed, list)
