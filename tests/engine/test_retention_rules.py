"""engine.retention: the policy's layers, its cutoffs, the plan a pass hands a driver, and the
settings read from the environment — pure, at an injected `now`."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from engine import JobContext, JobRegistry, ManualClock, Worker, connect, job
from engine.descriptors import to_publish
from engine.errors import InvalidArgumentError, JobsError
from engine.metrics import instrument
from engine.pruner import in_force, worker_policy
from engine.retention import (
    DAY_MS,
    DEFAULT_INTERVAL_MS,
    DEFAULT_POLICY,
    Cutoffs,
    Policy,
    PruneRule,
    Retention,
    RetentionSettingInvalidError,
    cutoff,
    interval_from_env,
    is_expired,
    parse_duration,
    plan,
    policy_from_env,
    prune_enabled_from_env,
)
from engine.testing.kit.test_descriptors import declare
from tests.mcp.support import Greet

NOW = 100 * DAY_MS


def test_the_defaults_keep_done_and_cancelled_a_week_and_failures_a_month() -> None:
    assert Policy(7 * DAY_MS, 30 * DAY_MS, 30 * DAY_MS, 7 * DAY_MS) == DEFAULT_POLICY


@pytest.mark.parametrize(
    ("state", "keep"),
    [("done", 7), ("cancelled", 7), ("failed", 30), ("dead", 30)],
)
def test_a_settled_row_expires_strictly_after_its_cutoff(state: str, keep: int) -> None:
    at = cutoff(DEFAULT_POLICY, state, NOW)  # type: ignore[arg-type]
    assert at == NOW - keep * DAY_MS
    assert not is_expired(DEFAULT_POLICY, state, at, NOW)  # type: ignore[arg-type]
    assert is_expired(DEFAULT_POLICY, state, at - 1, NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended"])
def test_a_live_row_never_expires(state: str) -> None:
    assert cutoff(DEFAULT_POLICY, state, NOW) is None  # type: ignore[arg-type]
    assert not is_expired(DEFAULT_POLICY, state, 0, NOW)  # type: ignore[arg-type]


def test_forever_keeps_a_state_and_a_row_without_finish_time_is_kept() -> None:
    policy = Retention(dead="forever").over(DEFAULT_POLICY)
    assert policy.dead is None and cutoff(policy, "dead", NOW) is None
    assert not is_expired(DEFAULT_POLICY, "done", None, NOW)


def test_no_row_finished_at_or_after_the_latest_cutoff_is_expired() -> None:
    """A driver that walks rows by finish time stops at Cutoffs.latest (Redis does)."""
    policy = Retention(dead="forever").over(DEFAULT_POLICY)
    cutoffs = plan(policy, NOW, per_name={"send": Policy(DAY_MS, DAY_MS, DAY_MS, DAY_MS)})
    latest = cutoffs.latest()
    assert latest == NOW - DAY_MS
    for name in ("send", "other"):
        for state in ("done", "failed", "dead", "cancelled"):
            assert not cutoffs.expired(name, state, latest)  # type: ignore[arg-type]
    assert cutoffs.expired("send", "done", latest - 1)
    assert (
        plan(
            Retention(done="forever", failed="forever", dead="forever", cancelled="forever").over(
                DEFAULT_POLICY
            ),
            NOW,
        ).latest()
        is None
    )


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        (90, 90_000),
        (1.5, 1_500),
        (timedelta(hours=2), 7_200_000),
        ("45", 45_000),
        ("500ms", 500),
        ("30m", 1_800_000),
        ("12h", 43_200_000),
        ("7d", 7 * DAY_MS),
        ("2w", 14 * DAY_MS),
        ("0", 0),
        ("forever", None),
    ],
)
def test_durations_in_seconds_timedeltas_or_text(value: object, ms: int | None) -> None:
    assert parse_duration("x", value) == ms  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, "7 days", "", "1y", True, [], float("nan"), "11000d"])
def test_a_bad_duration_is_invalid_argument(value: object) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_duration("x", value)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        Retention(done=value)  # type: ignore[arg-type]


def test_a_job_declaring_a_bad_retention_is_refused_at_the_decorator() -> None:
    with pytest.raises(JobsError) as caught:

        @job(idempotency_key=lambda i: "k", retention="7d", registry=JobRegistry())  # type: ignore[arg-type]
        async def work(input: Greet, ctx: JobContext) -> None: ...

    assert caught.value.code == "JOB_DECLARATION_INVALID"


def test_layers_defaults_then_code_then_environment_then_the_job() -> None:
    code = Retention(done="1d", dead="90d")
    env = {"MCP_JOBS_RETAIN_DONE": "2d", "MCP_JOBS_RETAIN_CANCELLED": "forever"}
    policy = worker_policy(code, env)
    assert policy == Policy(done=2 * DAY_MS, failed=30 * DAY_MS, dead=90 * DAY_MS, cancelled=None)
    assert worker_policy(None, {}) == DEFAULT_POLICY
    assert Retention(failed=60).over(policy) == policy._replace(failed=60_000)


def test_a_bad_environment_value_names_the_variable_and_a_fix_that_runs() -> None:
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DEAD": "a month"})
    # No duration is read in it: the fix keeps every dead job rather than guess a time.
    assert caught.value.fix == "export MCP_JOBS_RETAIN_DEAD=forever"
    assert parse_duration("x", caught.value.fix.split("=", 1)[1]) is None
    with pytest.raises(RetentionSettingInvalidError):
        prune_enabled_from_env({"MCP_JOBS_PRUNE": "maybe"})
    with pytest.raises(RetentionSettingInvalidError):
        interval_from_env({"MCP_JOBS_PRUNE_EVERY": "10ms"})


@pytest.mark.parametrize(
    ("variable", "default"),
    [
        ("MCP_JOBS_RETAIN_DONE", "7d"),
        ("MCP_JOBS_RETAIN_FAILED", "30d"),
        ("MCP_JOBS_RETAIN_DEAD", "30d"),
        ("MCP_JOBS_RETAIN_CANCELLED", "7d"),
        ("MCP_JOBS_RETAIN_AUDIT", "90d"),
        ("MCP_JOBS_PRUNE_EVERY", "5m"),
    ],
)
def test_a_bad_duration_setting_is_never_mended_shorter_than_its_default(
    variable: str, default: str
) -> None:
    """Every duration setting's fix said 7d, the done retention's default: a prune pass a week
    apart (MCP_JOBS_PRUNE_EVERY), a dead job kept a week where the default keeps it a month.
    A value that stands for no duration: the prune interval's own default; a retention's fix
    keeps every row (`forever`), as no time is known that the operator meant."""

    def read(value: str) -> tuple[Policy, int]:
        return policy_from_env(environ={variable: value}), interval_from_env({variable: value})

    mended = default if variable == "MCP_JOBS_PRUNE_EVERY" else "forever"
    for bad in ("0" if variable == "MCP_JOBS_PRUNE_EVERY" else "-1", "abc"):
        with pytest.raises(RetentionSettingInvalidError) as caught:
            read(bad)
        assert caught.value.fix == f"export {variable}={mended}"
    assert read(default) == (DEFAULT_POLICY, DEFAULT_INTERVAL_MS)  # as if it were not set


def test_a_bad_retention_setting_is_never_mended_shorter_than_the_worker_keeps() -> None:
    """A worker's own policy is the default the variable overrides: a value that stands for
    no duration is mended to keep every row, never to less than the worker keeps."""
    base = DEFAULT_POLICY._replace(done=DAY_MS, dead=None)
    for variable in ("MCP_JOBS_RETAIN_DONE", "MCP_JOBS_RETAIN_DEAD"):
        with pytest.raises(RetentionSettingInvalidError) as caught:
            policy_from_env(base, {variable: "a while"})
        assert caught.value.fix == f"export {variable}=forever"


def test_the_audit_retention_is_90_days_set_by_a_worker_or_the_environment() -> None:
    assert DEFAULT_POLICY.audit == 90 * DAY_MS == worker_policy(None, {}).audit
    assert worker_policy(Retention(audit="30d"), {}).audit == 30 * DAY_MS
    env = {"MCP_JOBS_RETAIN_AUDIT": "forever"}
    assert worker_policy(Retention(audit="30d"), env).audit is None
    assert policy_from_env(environ={"MCP_JOBS_RETAIN_AUDIT": "2w"}).audit == 14 * DAY_MS
    with pytest.raises(RetentionSettingInvalidError) as caught:
        policy_from_env(environ={"MCP_JOBS_RETAIN_AUDIT": "a quarter"})
    assert caught.value.code == "RETENTION_SETTING_INVALID"
    assert (caught.value.details or {})["variable"] == "MCP_JOBS_RETAIN_AUDIT"
    with pytest.raises(InvalidArgumentError):
        Retention(audit="a quarter")


def test_a_job_declaring_an_audit_retention_is_refused_at_the_decorator() -> None:
    """Events of no job belong to no job's policy."""
    with pytest.raises(JobsError) as caught:

        @job(idempotency_key=lambda i: "k", retention=Retention(audit="1d"), registry=JobRegistry())
        async def work(input: Greet, ctx: JobContext) -> None: ...

    assert caught.value.code == "JOB_DECLARATION_INVALID"


def test_the_switch_and_the_interval_from_the_environment() -> None:
    assert prune_enabled_from_env({}) is True
    assert prune_enabled_from_env({"MCP_JOBS_PRUNE": "off"}) is False
    assert interval_from_env({}) == DEFAULT_INTERVAL_MS == 300_000
    assert interval_from_env({"MCP_JOBS_PRUNE_EVERY": "1m"}) == 60_000


def test_a_plan_is_one_rule_per_state_plus_one_per_state_per_job_with_its_own_policy() -> None:
    own = DEFAULT_POLICY._replace(done=DAY_MS, dead=None)
    cutoffs = plan(DEFAULT_POLICY, NOW, per_name={"short": own, "same": DEFAULT_POLICY})
    assert cutoffs.named == ("short",)  # a job whose policy is everyone's needs no rules
    assert cutoffs.rules == (
        PruneRule("done", NOW - 7 * DAY_MS),
        PruneRule("failed", NOW - 30 * DAY_MS),
        PruneRule("dead", NOW - 30 * DAY_MS),
        PruneRule("cancelled", NOW - 7 * DAY_MS),
        PruneRule("done", NOW - DAY_MS, "short"),
        PruneRule("failed", NOW - 30 * DAY_MS, "short"),
        PruneRule("cancelled", NOW - 7 * DAY_MS, "short"),
    )
    assert cutoffs.expired("short", "done", NOW - DAY_MS - 1)
    assert not cutoffs.expired("other", "done", NOW - DAY_MS - 1)
    assert not cutoffs.expired("short", "dead", 0)  # kept forever by its own policy
    assert cutoffs.expired("other", "dead", 0)


def test_older_than_and_states_replace_the_policy_for_one_pass() -> None:
    cutoffs = plan(DEFAULT_POLICY, NOW, per_name={"x": DEFAULT_POLICY._replace(done=1)},
                   states=["dead"], older_than_ms=DAY_MS)  # fmt: skip
    assert cutoffs == Cutoffs((PruneRule("dead", NOW - DAY_MS),))
    with pytest.raises(InvalidArgumentError):
        plan(DEFAULT_POLICY, NOW, states=["ready"])


async def test_a_worker_prunes_unless_told_not_to_and_counts_what_it_pruned() -> None:
    clock = ManualClock()
    jobs = await connect("memory://", clock=clock, registry=JobRegistry())
    try:
        assert Worker(jobs, prune=False).pruner is None
        worker = Worker(jobs)
        assert worker.pruner is not None
        metrics = instrument(worker)
        from engine.testing.kit.test_retention import settle

        await settle(jobs.driver, "dead")
        clock.advance(31 * DAY_MS)
        await worker.pruner.pass_once()
        sample = metrics.registry.get_sample_value("mcp_jobs_pruned_jobs_total", {"state": "dead"})
        assert sample == 1
    finally:
        await jobs.close()


async def test_a_running_worker_prunes_at_start_and_hands_the_lease_back_on_stop() -> None:
    from engine.pruner import LEASE_NAME, PrunePass
    from engine.testing.kit.test_retention import settle

    clock = ManualClock()
    jobs = await connect("memory://", clock=clock, registry=JobRegistry())
    try:
        await settle(jobs.driver, "done")
        clock.advance(8 * DAY_MS)
        passes: list[PrunePass] = []
        pruned = anyio.Event()
        worker = Worker(jobs, queues="*")
        assert worker.pruner is not None

        def heard(report: PrunePass) -> None:
            passes.append(report)
            pruned.set()

        worker.pruner.add_listener(heard)
        async with worker:
            with anyio.fail_after(5):
                await pruned.wait()
        assert passes[0].leader and passes[0].by_state()["done"] == 1
        assert await jobs.driver.lead(LEASE_NAME, "someone else", 1_000)  # released on stop
    finally:
        await jobs.close()


async def test_the_environment_turns_the_workers_pruner_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_JOBS_PRUNE", "off")
    jobs = await connect("memory://", clock=ManualClock(), registry=JobRegistry())
    try:
        assert Worker(jobs).pruner is None
        assert Worker(jobs, prune=True).pruner is not None
    finally:
        await jobs.close()


def test_a_prune_keeps_each_job_as_long_as_the_longest_policy_it_knows_for_it() -> None:
    """in_force: per job, the longer of this process's policy and the published one, field by
    field (forever wins); the audit retention the longest of all; a job published without a
    retention (a worker too old to publish one) changes nothing."""
    app = JobRegistry()
    declare(app)
    (charge,) = [to_publish(d.describe(), []) for d in app]
    year = 365 * DAY_MS
    theirs = Policy(done=30 * DAY_MS, failed=DAY_MS, dead=None, cancelled=DAY_MS, audit=year)
    published = [
        charge.model_copy(update={"retention": theirs.info()}),
        charge.model_copy(update={"name": "plain"}),
    ]
    refund = DEFAULT_POLICY._replace(done=DAY_MS)
    policy, per_name = in_force(DEFAULT_POLICY, {"refund": refund}, published)
    assert policy == DEFAULT_POLICY._replace(audit=year)
    assert per_name == {
        "charge": Policy(30 * DAY_MS, 30 * DAY_MS, None, 7 * DAY_MS, year),
        "refund": refund._replace(audit=year),
    }
    assert Policy.of(theirs.info()) == theirs
    forever = Policy(None, None, None, None, None)
    kept = charge.model_copy(update={"retention": forever.info()})
    assert in_force(DEFAULT_POLICY, {}, [kept]) == (
        DEFAULT_POLICY._replace(audit=None),
        {"charge": forever},
    )


@pytest.mark.parametrize(("typed", "meant"), [("of", "off"), ("flase", "off"), ("onn", "on")])
def test_a_slip_in_the_prune_switch_is_mended_to_the_switch_meant(typed: str, meant: str) -> None:
    """`MCP_JOBS_PRUNE=of` was mended to the default, `on`: the pruner the operator meant to
    turn off."""
    with pytest.raises(JobsError) as refused:
        prune_enabled_from_env({"MCP_JOBS_PRUNE": typed})
    assert refused.value.fix.endswith(f"MCP_JOBS_PRUNE={meant}"), refused.value.fix


@pytest.mark.parametrize(
    ("typed", "meant"), [("1y", "365d"), ("2 years", "730d"), ("20y", "3650d")]
)
def test_a_retention_in_years_is_mended_to_its_days(typed: str, meant: str) -> None:
    """Years are no unit here: `MCP_JOBS_RETAIN_AUDIT=20y` was mended to the default, 90d,
    which prunes the audit trail kept for twenty years after three months."""
    with pytest.raises(JobsError) as refused:
        policy_from_env(environ={"MCP_JOBS_RETAIN_AUDIT": typed})
    assert refused.value.fix == f"export MCP_JOBS_RETAIN_AUDIT={meant}"


@pytest.mark.parametrize(
    ("typed", "meant"), [("7", "7d"), ("0", "0d"), ("1.5", "36h"), ("4000", "3650d")]
)
def test_a_retention_with_no_unit_is_refused_and_mended_to_as_many_days(
    typed: str, meant: str
) -> None:
    """exploreV: `MCP_JOBS_RETAIN_DONE=7` was read as 7 seconds, and the worker's first pass
    pruned the history. A unit left out of what deletes is read as days, never shorter."""
    with pytest.raises(JobsError) as refused:
        policy_from_env(environ={"MCP_JOBS_RETAIN_DONE": typed})
    assert refused.value.code == "RETENTION_SETTING_INVALID"
    assert refused.value.fix == f"export MCP_JOBS_RETAIN_DONE={meant}", refused.value.fix
    assert "no unit would be seconds" in refused.value.cause
