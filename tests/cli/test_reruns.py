"""`mcp-jobs jobs retry ID --from-step STEP` (engine/reruns.py) and `jobs show ID --run-id`: the
tool envelopes under --json, the new run in the text, a fix that runs, and the tenant pin."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Retry, Worker, connect, job
from tests.cli.support import run
from tests.support.fix_lines import command_words


class Item(BaseModel):
    n: int


def dead_job(url: str, tenant: str | None = None) -> tuple[str, str]:
    """A job of steps "pick" and "pack" that died at "pack": its id and run."""

    async def make() -> tuple[str, str]:
        registry = JobRegistry()

        @job(idempotency_key=lambda i: f"i:{i.n}", retry=Retry(attempts=1), registry=registry)
        async def boxed(input: Item, ctx: JobContext) -> None:
            await ctx.step.run("pick", lambda: "picked")
            await ctx.step.run("pack", lambda: 1 / 0)

        jobs = await connect(url, registry=registry)
        try:
            r = await jobs.enqueue(boxed, {"n": 1}, tenant_id=tenant)
            await Worker(jobs).run_until_idle()
            record = await jobs.get(r.id)
            assert record.state == "dead"
            return r.id, record.run_id
        finally:
            await jobs.close()

    return anyio.run(make)


def test_retry_from_a_step_reruns_in_a_new_run(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id, old_run = dead_job(url)
    db = ("--database-url", url)
    # Another spelling of a step: the fix is the rerun from the step meant.
    code, refused = run(capsys, "jobs", "retry", job_id, "--from-step", "Pick", *db, "--json")
    assert code == 1 and refused["error"]["code"] == "STEP_UNKNOWN"
    assert "pick, pack" in refused["error"]["cause"]
    # The fix may lead with an app's declared environment (fix_context): from `mcp-jobs` on.
    fix = command_words(refused["error"]["fix"])[1:]
    assert fix[:5] == ["jobs", "retry", job_id, "--from-step", "pick"]
    code, again = run(capsys, *fix, "--json")
    assert code == 0 and again["rerun_of"] == old_run
    code, refused = run(capsys, "jobs", "retry", job_id, *db, "--json")
    assert code == 1 and refused["error"]["code"] == "JOB_NOT_RETRYABLE"

    code, shown = run(capsys, "jobs", "show", job_id, *db, "--json")
    new_run = shown["job"]["run_id"]
    assert shown["job"]["rerun_of"] == old_run and new_run != old_run
    assert shown["steps"] == []  # rerun from its first step: nothing kept
    code, text = run(capsys, "jobs", "show", job_id, *db)
    assert f"run: {new_run}  (rerun of {old_run})" in text
    code, before = run(capsys, "jobs", "show", job_id, "--run-id", old_run, *db, "--json")
    assert [(s["name"], s["status"]) for s in before["steps"]] == [
        ("pick", "completed"),
        ("pack", "failed"),
    ]


def test_a_pinned_cli_does_not_rerun_another_tenant_s_job(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id, run_id = dead_job(url, tenant="acme")
    db = ("--database-url", url)
    argv = ("jobs", "retry", job_id, "--from-step", "pack", *db, "--json")
    code, hidden = run(capsys, *argv, "--tenant", "globex")
    assert code == 1 and hidden["error"]["code"] == "JOB_NOT_FOUND"
    show = ("jobs", "show", job_id, "--run-id", run_id, *db, "--json")
    code, hidden = run(capsys, *show, "--tenant", "globex")
    assert code == 1 and hidden["error"]["code"] == "JOB_NOT_FOUND"
    code, done = run(capsys, *argv, "--tenant", "acme")
    assert code == 0 and done["rerun_of"] == run_id


def test_the_text_answer_names_the_new_run(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    job_id, old_run = dead_job(url)
    db = ("--database-url", url)
    code, out = run(capsys, "jobs", "retry", job_id, "--from-step", "pack", *db)
    assert code == 0 and f"(rerun of {old_run})" in out and "is now ready in run " in out
    code, shown = run(capsys, "jobs", "show", job_id, *db, "--json")
    assert [s["name"] for s in shown["steps"]] == ["pick"]
    # A second rerun while the first waits to run is refused as a live job's retry is.
    code, live = run(capsys, "jobs", "retry", job_id, "--from-step", "pack", *db, "--json")
    assert code == 1 and live["error"]["code"] == "JOB_NOT_RETRYABLE"


def test_a_run_id_the_job_never_had_is_refused_with_a_command_that_shows_a_real_one(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`jobs show ID --run-id nope` exited 0 with the run header and no steps."""
    job_id, old_run = dead_job(url)
    _, other_run = dead_job(url)  # another job's run (its key's first job is dead: not live)
    db = ("--database-url", url)
    assert run(capsys, "jobs", "retry", job_id, "--from-step", "pack", *db, "--json")[0] == 0
    for wrong in ("nope", other_run):
        code, refused = run(capsys, "jobs", "show", job_id, "--run-id", wrong, *db, "--json")
        assert code == 1 and refused["error"]["code"] == "RUN_NOT_FOUND", refused
        assert old_run in refused["error"]["cause"] and refused["error"]["retryable"] is False
        fix = command_words(refused["error"]["fix"])[1:]
        assert fix[:5] == ["jobs", "show", job_id, "--run-id", old_run]
        code, shown = run(capsys, *fix)
        assert code == 0 and [s["name"] for s in shown["steps"]] == ["pick", "pack"]
    code, text = run(capsys, "jobs", "show", job_id, "--run-id", "nope", *db)
    assert code == 1 and "run: " not in text
