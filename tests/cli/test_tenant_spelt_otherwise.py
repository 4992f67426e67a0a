"""`mcp-jobs jobs ls --tenant-id ACME` where the stored tenant is `acme` answered "no jobs" and
nothing more: a tenant is matched exactly. An empty list whose tenant differs only in case from
stored ones that have matching jobs now says so, and its fix is the line typed with the stored
spelling, which lists them. Nothing is said where nothing differs only in case, nor to a
caller pinned to a tenant (it must not learn another tenant's name)."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, connect, job
from mcp_jobs import operations
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.operations.scope import Scope
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


class _Receipt(BaseModel):
    n: int


def _stored_for(url: str, tenant: str) -> str:
    """One ready job of `tenant` in the database at `url`; its id."""

    async def enqueue() -> str:
        registry = JobRegistry()

        async def body(item: _Receipt, ctx: JobContext) -> None: ...

        declared = job(
            registry=registry, name="send_receipt", queue="emails", idempotency_key=_key
        )(body)
        jobs = await connect(url, registry=registry, migrate=True)
        try:
            return (await jobs.enqueue(declared, _Receipt(n=1), tenant_id=tenant)).id
        finally:
            await jobs.close()

    return anyio.run(enqueue)


def _key(item: _Receipt) -> str:
    return str(item.n)


def test_an_empty_list_names_the_tenant_stored_in_another_case_and_its_fix_lists_it(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _stored_for(migrated(url), "acme")
    assert main(["jobs", "ls", "--tenant-id", "ACME", "--database-url", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "no jobs", out
    assert lines[1].startswith("WARNING TENANT_SPELT_OTHERWISE: ") and "'acme'" in lines[1], out
    fix = lines[2].removeprefix("  fix: ")
    # The line typed, with the stored spelling: no --json nobody typed.
    assert command_words(fix)[1:] == ["jobs", "ls", "--tenant-id", "acme", "--database-url", url]
    code, listed = run(capsys, *command_words(fix)[1:], "--json")
    assert code == 0 and [j["id"] for j in listed["jobs"]] == [job_id]


def test_the_json_answer_keeps_the_other_filters_in_its_fix(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _stored_for(migrated(url), "acme")
    argv = ["jobs", "ls", "--state", "ready", "--tenant-id=Acme", "--limit", "5", "--json"]
    code, answer = run(capsys, *argv, "--database-url", url)
    assert code == 0 and answer["jobs"] == []
    (notice,) = answer["notices"]
    assert notice["code"] == "TENANT_SPELT_OTHERWISE" and notice["severity"] == "warning"
    assert notice["next_call"] == {
        "tool": "list_jobs",
        "arguments": {"state": ["ready"], "tenant_id": "acme", "limit": 5},
    }
    fix = command_words(notice["fix"])[1:]
    typed = [*argv[:4], "--tenant-id=acme", *argv[5:]]
    assert fix[: len(typed)] == typed, notice["fix"]
    code, listed = run(capsys, *fix)
    assert code == 0 and [j["id"] for j in listed["jobs"]] == [job_id]


@pytest.mark.parametrize(
    "argv",
    [
        ["--tenant-id", "nobody"],  # no tenant is spelt so
        ["--tenant-id", "ACME", "--state", "dead"],  # acme has no dead job either
        ["--tenant", "ACME", "--tenant-id", "ACME"],  # pinned: acme is not its to learn
    ],
)
def test_nothing_is_said_where_no_other_spelling_would_list_a_job(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    _stored_for(migrated(url), "acme")
    code, answer = run(capsys, "jobs", "ls", *argv, "--database-url", url, "--json")
    assert code == 0 and answer == {"ok": True, "jobs": []}, answer


def test_an_mcp_caller_is_handed_the_list_jobs_call(url: str) -> None:
    """The same operation answers the list_jobs tool: its fix is the call, not a command."""
    _stored_for(migrated(url), "acme")

    async def listed() -> dict[str, object]:
        jobs = await connect(url, registry=JobRegistry())
        try:
            scope = Scope(jobs=jobs, settings=Settings(database_url=url), tool="t", actor="t")
            answer = await operations.list_jobs(scope, tenant_id="ACME")
            return answer.model_dump(exclude_none=True)
        finally:
            await jobs.close()

    answer = anyio.run(listed)
    (notice,) = answer["notices"]  # type: ignore[misc]
    assert notice["fix"] == 'list_jobs {"tenant_id": "acme"}'
    assert notice["next_call"] == {"tool": "list_jobs", "arguments": {"tenant_id": "acme"}}


def test_a_bulk_plan_of_nothing_names_the_tenant_stored_in_another_case(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`jobs cancel-all --tenant-id ACME` planned 0 jobs beside acme's ready ones, and said
    nothing more: the plan now says so too, its fix listing the stored spelling's jobs."""
    job_id = _stored_for(migrated(url), "acme")
    argv = ["jobs", "cancel-all", "--tenant-id", "ACME", "--database-url", url]
    code, answer = run(capsys, *argv, "--json")
    assert code == 0 and answer["plan"]["matched"] == 0, answer
    (notice,) = answer["notices"]
    assert notice["code"] == "TENANT_SPELT_OTHERWISE" and "'acme'" in notice["cause"]
    code, listed = run(capsys, *command_words(notice["fix"])[1:])
    assert code == 0 and [j["id"] for j in listed["jobs"]] == [job_id]
    assert answer.get("act_command") is None  # acting on a plan of nothing does nothing
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "TENANT_SPELT_OTHERWISE" in out, out
    # Acting on it (--yes) says so too: it cancelled nothing, and why.
    assert main([*argv, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "0 of the 0" in out and "TENANT_SPELT_OTHERWISE" in out, out
