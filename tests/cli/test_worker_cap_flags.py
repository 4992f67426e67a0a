"""`mcp-jobs worker`'s cap flags: the `Limits` a worker of the API sets, from the command line. A
worker line a fix prints writes the caps its peers published with these flags, so running it as
given keeps them (`cap_flags` then `limits_of` is the published caps again)."""

from __future__ import annotations

import shlex

import pytest

from engine.limits import Limits
from mcp_jobs.cap_flags import cap_flags, caps_claimed, limits_of
from mcp_jobs.cli import main
from mcp_jobs.cli.parser import build_parser

LIMITS = Limits(
    global_cap=50,
    per_queue={"emails": 10, "a=b": 2},
    per_tenant=3,
    tenant_overrides={"acme": 20, "O'Brien": 1},
)


def _limits(*flags: str) -> Limits | None:
    return limits_of(build_parser().parse_args(["worker", *flags]))


def test_the_flags_set_the_limits_a_worker_of_the_api_sets() -> None:
    parsed = _limits(
        "--global-cap", "50", "--per-queue", "emails=10", "--per-queue", "a=b=2",
        "--per-tenant", "3", "--per-tenant", "acme=20", "--per-tenant", "O'Brien=1",
    )  # fmt: skip
    assert parsed == LIMITS
    assert _limits() is None  # no cap flag: the worker keeps no cap


def test_a_published_worker_s_caps_written_as_flags_read_back_as_the_same_limits() -> None:
    published = LIMITS.published()
    assert published is not None
    flags = cap_flags(published)
    assert flags[:2] == ["--global-cap", "50"]
    assert _limits(*flags) == LIMITS


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--per-queue", "emails"),
        ("--per-queue", "emails=ten"),
        ("--per-tenant", "acme="),
        # Digits str.isdigit takes and int() refuses ('²': it was INTERNAL) or reads ('٣').
        ("--per-queue", "emails=²"),
        ("--per-tenant", "²"),
        ("--per-tenant", "acme=٣"),
    ],
)
def test_a_pair_without_its_cap_is_refused_naming_the_flag(
    flag: str, value: str, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["worker", "--database-url", "memory://", "--queues", "*", flag, value])
    out, err = capsys.readouterr()
    assert code == 1 and "error INVALID_ARGUMENT" in err, out + err
    assert flag in err and "NAME=N" in err


def test_a_cap_limits_refuses_is_refused_before_the_worker_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["worker", "--database-url", "memory://", "--queues", "*", "--per-tenant", "0"])
    out, err = capsys.readouterr()
    assert code == 1 and "error INVALID_ARGUMENT" in err and "per_tenant" in err, out + err


def test_every_tenants_cap_is_given_once(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["worker", "--database-url", "memory://", "--queues", "*"]
    code = main([*argv, "--per-tenant", "3", "--per-tenant", "4"])
    out, err = capsys.readouterr()
    assert code == 1 and "--per-tenant='4'" in err, out + err


@pytest.mark.parametrize(
    ("typed", "mended"),
    [("--per-queue=qa=0", "qa=1"), ("--per-tenant=acme=0", "acme=1")],
)
def test_a_pairs_cap_out_of_bounds_is_mended_to_the_nearest(
    capsys: pytest.CaptureFixture[str], typed: str, mended: str
) -> None:
    """Named by the flag as typed, not the Python argument (`per_queue['qa']`), and the fix is
    the line with the nearest cap, as for --global-cap 0."""
    flag = typed.split("=", 1)[0]
    code = main(["worker", "--database-url", "memory://", "--queues", "*", typed])
    out, err = capsys.readouterr()
    assert code == 1 and f"{flag}=" in err and "per_queue[" not in err, out + err
    assert f"{flag}={mended}" in err.split("fix:", 1)[1], err  # as typed, with `=`


def test_a_name_given_twice_is_refused_not_taken_last(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["worker", "--database-url", "memory://", "--queues", "*"]
    code = main([*argv, "--per-queue", "qa=3", "--per-queue", "qa=5"])
    out, err = capsys.readouterr()
    assert code == 1 and "qa's cap once" in err, out + err


def _fix_words(err: str) -> list[str]:
    fix = err.split("fix:", 1)[1].strip().splitlines()[0]
    words = shlex.split(fix)
    return words[words.index("worker") :]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        # A slip of a claimed queue's name: the line with the queue meant.
        (["--per-queue", "emials=2", "--per-queue", "reports=1"], ["emails=2", "reports=1"]),
        # A queue this worker never claims: the line without that cap, the others kept.
        (["--per-queue", "reports=1", "--per-queue", "other=3"], ["reports=1"]),
        (["--per-queue=other=3", "--per-queue=reports=1"], ["reports=1"]),
    ],
)
def test_a_cap_of_a_queue_the_worker_does_not_claim_is_refused(
    capsys: pytest.CaptureFixture[str], typed: list[str], meant: list[str]
) -> None:
    """Taken, it capped nothing (the worker never claims that queue) and said nothing. The fix
    line, run as given, keeps the caps that hold."""
    argv = ["worker", "--database-url", "memory://", "--queues", "emails", "reports", *typed]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1 and "error INVALID_ARGUMENT" in err, out + err
    assert "a queue this worker claims (emails, reports)" in err, err
    args = build_parser().parse_args(_fix_words(err))
    assert [text.removeprefix("--per-queue=") for text in args.per_queue] == meant
    caps_claimed(args, ["emails", "reports"])  # the fix line passes the check


def test_a_worker_claiming_every_queue_takes_any_queues_cap() -> None:
    args = build_parser().parse_args(["worker", "--queues", "*", "--per-queue", "other=3"])
    caps_claimed(args, None)
