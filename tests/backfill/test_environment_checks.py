"""The environment a backfill is gated by: its refusal's fix is never the bypass, a pass runs only
on a worker of the environment it was started for, and MCP_JOBS_ENV holds an environment name."""

from __future__ import annotations

import pytest

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry, Backfills, resolve_environment
from engine.backfill.errors import BackfillEnvironmentError
from engine.errors import JobsError
from tests.backfill.support import Customers


def test_the_environment_refusal_names_the_deploy_or_the_declaration_never_an_override() -> None:
    error = BackfillEnvironmentError("bf_prod", "development", ["production"])
    assert "MCP_JOBS_ENV=" not in error.fix  # setting it here would be the bypass itself
    assert "mcp-jobs" not in error.fix
    assert error.next_call is None
    # The cause and the fix say the same two things: run it there, or declare it here.
    for text in (error.cause, error.fix):
        assert "production" in text and '"development"' in text


async def test_a_pass_started_for_another_environment_fails_on_this_worker(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    customers.declare(backfill_registry, environments=("production",))
    production = Backfills(jobs, registry=backfill_registry, environment="production")
    start = await production.write("normalize_emails")

    monkeypatch.delenv("MCP_JOBS_ENV", raising=False)  # a plain development worker
    await Worker(jobs).run_until_idle()

    record = await jobs.get(start.job_id)
    assert record.state == "failed" and record.attempt == 1  # typed, never retried
    assert record.last_error is not None and record.last_error.code == "BACKFILL_ENVIRONMENT"
    assert customers.handled == [] and customers.read_calls == 1  # only the write's own check
    (run,) = await jobs.driver.backfill_runs("normalize_emails", "production")
    assert run.status == "failed" and run.error is not None
    assert "BACKFILL_ENVIRONMENT" in run.error


async def test_a_pass_of_an_every_environment_backfill_runs_only_where_it_was_started_for(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    customers.declare(backfill_registry)
    staging = Backfills(jobs, registry=backfill_registry, environment="staging")
    first = await staging.write("normalize_emails")
    monkeypatch.setenv("MCP_JOBS_ENV", "development")
    await Worker(jobs).run_until_idle()
    record = await jobs.get(first.job_id)
    assert record.last_error is not None and record.last_error.code == "BACKFILL_ENVIRONMENT"
    assert customers.handled == []

    # Not otherwise: a staging worker runs staging's pass.
    monkeypatch.setenv("MCP_JOBS_ENV", "staging")
    again = await staging.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(again.job_id)).state == "done"


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        ("", "unset MCP_JOBS_ENV"),
        (" ", "unset MCP_JOBS_ENV"),
        (" production ", "export MCP_JOBS_ENV=production"),
        # Not mended into a name of its own (`prod_uction`): no declaration names one here.
        ("prod uction", "unset MCP_JOBS_ENV"),
        ("production\n", "export MCP_JOBS_ENV=production"),
    ],
)
def test_an_environment_variable_that_is_no_environment_name_is_refused(
    value: str, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_ENV", value)
    with pytest.raises(JobsError) as caught:
        resolve_environment(declared=BackfillRegistry())
    assert caught.value.code == "INVALID_ARGUMENT"
    assert caught.value.details is not None
    assert caught.value.details["argument"] == "MCP_JOBS_ENV"
    assert caught.value.fix == fix
    assert not caught.value.retryable


def test_the_environment_resolves_from_the_variable_else_development(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_JOBS_ENV", raising=False)
    assert resolve_environment() == "development"
    monkeypatch.setenv("MCP_JOBS_ENV", "eu-prod.2")
    assert resolve_environment() == "eu-prod.2"
    assert resolve_environment("staging") == "staging"
    with pytest.raises(JobsError) as caught:
        resolve_environment("")
    assert caught.value.code == "INVALID_ARGUMENT"


async def test_an_environment_that_differs_by_case_from_a_declared_one_is_refused(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, environments=("production",))
    slipped = Backfills(jobs, registry=backfill_registry, environment="Production")
    for call in (lambda: slipped.dry_run("normalize_emails"), slipped.list, slipped.pending):
        with pytest.raises(JobsError) as caught:
            await call()
        assert caught.value.code == "INVALID_ARGUMENT"
        assert caught.value.fix == 'pass environment="production"'  # the argument, not the variable
    assert (await jobs.list()).jobs == []

    # Not otherwise: a name no declaration spells another way is an environment of its own.
    other = Backfills(jobs, registry=backfill_registry, environment="Staging")
    assert [s.pending for s in await other.list()] == [False]


async def test_a_malformed_environment_argument_is_mended_as_the_argument_not_the_variable(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The argument outranks MCP_JOBS_ENV: exporting it (the fix before) changed nothing.
    monkeypatch.setenv("MCP_JOBS_ENV", "production")
    customers.declare(backfill_registry, environments=("production",))
    with pytest.raises(JobsError) as caught:
        Backfills(jobs, registry=backfill_registry, environment=" production ")
    assert caught.value.details is not None
    assert caught.value.details["argument"] == "environment"
    assert caught.value.fix == 'pass environment="production"'
    with pytest.raises(JobsError) as caught:
        Backfills(jobs, registry=backfill_registry, environment="prod uction")
    assert "MCP_JOBS_ENV" not in caught.value.fix and "environment" in caught.value.fix
    cased = Backfills(jobs, registry=backfill_registry, environment="Production")
    with pytest.raises(JobsError) as caught:
        await cased.list()
    assert caught.value.fix == 'pass environment="production"'
    # From the variable, its fix is still the export.
    monkeypatch.setenv("MCP_JOBS_ENV", "Production")
    with pytest.raises(JobsError) as caught:
        await Backfills(jobs, registry=backfill_registry).list()
    assert caught.value.fix == "export MCP_JOBS_ENV=production"
