"""A value the command refuses after one of its flags: the fix is the command as typed with the
value nearest it that the check admits, and it runs as given."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InvalidArgumentError
from mcp_jobs.cli.entry import main
from mcp_jobs.cli.mend import mended, typed
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words

MENDED = [
    (["jobs", "ls", "--limit", "0"], ["--limit", "1"]),
    (["jobs", "ls", "--limit=-3", "--state", "dead"], ["--limit=1"]),
    (["jobs", "retry-all", "--since-seconds", "-5"], ["--since-seconds", "1"]),
    (["jobs", "retry-all", "--since-seconds", "99999999999"], ["--since-seconds", "315360000"]),
    (
        ["jobs", "cancel-all", "--error-code", "JOB_FAILED", "--since-seconds", "0"],
        ["--since-seconds", "1"],
    ),
]


def _command(fix: str) -> list[str]:
    return command_words(fix)[1:]


def _refused(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    status: int = 1,
) -> tuple[dict[str, Any], list[str]]:
    """The INVALID_ARGUMENT `argv` gets on a new, empty SQLite database (exit `status`: 2 for
    the parser's refusal), and its fix as a command."""
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    url = migrated(f"sqlite:///{tmp_path / 'jobs.db'}")
    assert main([*argv, "--json", "--database-url", url]) == status
    error: dict[str, Any] = json.loads(capsys.readouterr().out)["error"]
    assert (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False)
    return error, _command(error["fix"])


@pytest.mark.parametrize(("argv", "mended"), MENDED)
def test_a_refused_flag_value_comes_back_as_the_command_at_the_nearest_value(
    argv: list[str],
    mended: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error, command = _refused(argv, tmp_path, capsys, monkeypatch)
    at = next(n for n, word in enumerate(command) if word.startswith(mended[0]))
    assert command[at : at + len(mended)] == mended, error["fix"]
    assert main(command) == 0  # as given
    capsys.readouterr()


# JSON that went wrong (an object, a list, a number, a constant JSON has not): sent as a string
# it would run, and hand the waiting jobs a string where they read an object.
MEANT_AS_JSON = ["{a: 1}", '{"x": NaN}', "[1, 2", "12abc", "NaN", '"open']


@pytest.mark.parametrize("payload", MEANT_AS_JSON)
def test_json_that_went_wrong_is_not_mended_into_a_string(
    payload: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = ["events", "send", "paid", "7", "--payload", payload]
    error, command = _refused(argv, tmp_path, capsys, monkeypatch)
    assert command[:3] == ["events", "send", "--help"], error["fix"]
    assert "a JSON object" in error["cause"]


LEFT_OUT = [
    (["backfill", "--runs", "--runs-limit", "5"], "--runs-limit"),
    (["backfill", "--runs-cursor=abc"], "--runs-cursor"),
    (["queues", "pause", "mail", "--job", "greet"], "mail"),  # the narrower: the job's pause
]


@pytest.mark.parametrize(("argv", "flag"), LEFT_OUT)
def test_a_flag_given_where_it_has_no_use_comes_back_as_the_command_without_it(
    argv: list[str],
    flag: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error, command = _refused(argv, tmp_path, capsys, monkeypatch)
    assert not any(word.startswith(flag) for word in command), error["fix"]
    assert command[0] == argv[0]
    assert main(command) == 0  # as given
    capsys.readouterr()


def test_a_worker_refused_at_its_start_is_given_the_command_that_starts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert main(["worker", "--concurrency", "0", "--database-url", url]) == 1
    printed = capsys.readouterr()
    (fix,) = [line for line in (printed.out + printed.err).splitlines() if "fix:" in line]
    command = _command(fix.split("fix:", 1)[1])
    assert command[:3] == ["worker", "--concurrency", "1"] and url in command, fix


def test_a_mended_command_never_writes_the_password_it_was_typed_with(tmp_path: Path) -> None:
    url = "postgresql://ops:s3cret@127.0.0.1:5432/jobs"
    refused = InvalidArgumentError("limit", 0, "a whole number from 1 to 200", nearest=1)
    fixes = FixContext.of(Settings(database_url=url), face="cli", cwd=tmp_path, environ={})
    with typed(["jobs", "ls", "--database-url", url, "--limit", "0"]):
        fix = mended(refused, fixes)
    assert isinstance(fix, InvalidArgumentError)
    assert "s3cret" not in fix.fix and "--limit 1" in fix.fix, fix.fix
    assert "postgresql://ops@127.0.0.1:5432/jobs" in fix.fix, fix.fix


REFUSED_BY_THE_PARSER = [
    (["jobs", "ls", "--limit", "abc"], "mcp-jobs jobs ls", "--limit"),
    (["jobs", "ls", "--state", "bogus"], "mcp-jobs jobs ls", "--state"),
    (["jobs", "ls", "--bogus"], "mcp-jobs jobs ls", "command line"),
    (["jobs", "show"], "mcp-jobs jobs show", "command line"),
    (["nope"], "mcp-jobs", "COMMAND"),
]


@pytest.mark.parametrize(("argv", "command", "argument"), REFUSED_BY_THE_PARSER)
def test_a_command_line_the_parser_refuses_is_typed_and_its_fix_runs(
    argv: list[str], command: str, argument: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, argparse printed its usage alone and exited 2: no code, no fix, and nothing on
    stdout under --json. Now INVALID_ARGUMENT (still exit 2), the envelope under --json."""
    assert main([*argv, "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["code"], error["retryable"]) == ("INVALID_ARGUMENT", False)
    assert error["cause"].startswith(f"{command}: ") and error["details"]["argument"] == argument
    assert error["fix"] == f"{command} --help"
    assert main(argv) == 2
    text = capsys.readouterr()
    assert text.err.startswith("usage: ") and "error INVALID_ARGUMENT" in text.err
    with pytest.raises(SystemExit) as helped:  # argparse's help exits 0 once printed
        main(shlex.split(error["fix"])[1:])
    assert helped.value.code == 0 and capsys.readouterr().out.startswith("usage: ")


def test_an_unknown_flag_that_plainly_stands_for_one_the_command_takes_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--states`, `--tenant_id`, `job`, `--state deda`: the refusal names the flag or choice
    each was meant as (the same rule as a tool's unknown argument, engine/meant.py); a word
    like none says nothing more."""
    assert main(["jobs", "ls", "--states", "dead", "--tenant_id", "t1", "--json"]) == 2
    cause = json.loads(capsys.readouterr().out)["error"]["cause"]
    assert cause.endswith("(meant: --state for --states?, --tenant-id for --tenant_id?)"), cause
    assert main(["jobs", "ls", "--bogus", "--json"]) == 2
    cause = json.loads(capsys.readouterr().out)["error"]["cause"]
    assert cause == "mcp-jobs jobs ls: unrecognized arguments: --bogus", cause
    # A choice: the command, the action, a flag's value.
    for argv, meant in (
        (["job", "ls"], "jobs"),
        (["jobs", "retry_all"], "retry-all"),
        (["jobs", "ls", "--state", "deda"], "dead"),
    ):
        assert main([*argv, "--json"]) == 2
        cause = json.loads(capsys.readouterr().out)["error"]["cause"]
        assert cause.endswith(f") (meant {meant}?)"), cause
    assert main(["jobs", "list", "--json"]) == 2  # ls? not plain: named with the others only
    assert json.loads(capsys.readouterr().out)["error"]["cause"].endswith("'cancel-all')")


CHOICES = [
    # Another case, a list written with commas (a repeatable flag), a slip of the keys.
    (["jobs", "ls", "--state", "Dead"], ["jobs", "ls", "--state", "dead"]),
    (
        ["jobs", "ls", "--state", "failed,dead"],
        ["jobs", "ls", "--state", "failed", "--state", "dead"],
    ),
    (["jobs", "ls", "--state=deda"], ["jobs", "ls", "--state=dead"]),
    (["job", "ls"], ["jobs", "ls"]),
    (["Jobs", "ls"], ["jobs", "ls"]),
    # A guess on a line that acts: without --yes, so it only shows its plan.
    (
        ["jobs", "cancel-all", "--state", "redy", "--yes"],
        ["jobs", "cancel-all", "--state", "ready"],
    ),
    # An action under a command that lacks it, moved to the one command that has it.
    (["queues", "diagnose"], ["jobs", "diagnose"]),
    (["db", "stats"], ["jobs", "stats"]),
    # A guess that would write: its plan (mcp_jobs/cli/plan_only.py).
    (["jobs", "prune"], ["db", "prune", "--dry-run"]),
]


@pytest.mark.parametrize(("argv", "fixed"), CHOICES)
def test_a_choice_written_another_way_comes_back_as_the_line_with_that_choice(
    argv: list[str],
    fixed: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fix was the command's --help; now the line as typed, the choice mended (the same
    rule as a tool's named values, engine/meant.py), and it runs as given."""
    error, command = _refused(argv, tmp_path, capsys, monkeypatch, status=2)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert command == [*fixed, "--json", "--database-url", url], error["fix"]
    assert main(command) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_an_action_two_commands_have_is_not_moved_to_either(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["db", "ls", "--json"]) == 2  # jobs ls or queues ls: not plain
    assert json.loads(capsys.readouterr().out)["error"]["fix"].startswith("mcp-jobs db --help")


def test_serve_refused_on_its_command_line_writes_nothing_on_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """stdout is where a stdio server speaks the protocol: `serve` takes no --json, so its
    refusal goes to stderr even when --json was typed."""
    assert main(["serve", "--json"]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and "error INVALID_ARGUMENT" in printed.err


NOTHING_NEAR = [
    # A name no such thing can have: the command that lists what there is to name.
    (["jobs", "ls", "--queue", ""], ["jobs", "stats"]),
    (["jobs", "show", "a\x00b"], ["jobs", "ls"]),
    (["jobs", "ls", "--name", "x" * 300], ["jobs", "describe"]),
    (["backfill", ""], ["backfill"]),
    # Else the command's help, which says what it takes.
    (["queues", "pause", "mail", "--reason", ""], ["queues", "pause", "--help"]),
    (["db", "prune", "--older-than", "a while"], ["db", "prune", "--help"]),
    (["jobs", "retry-all", "--error-code", ""], ["jobs", "retry-all", "--help"]),
    # A number past a float's precision is still found on the line and mended.
    (["jobs", "retry-all", "--since-seconds", "9" * 20], ["jobs", "retry-all"]),
    # A number no payload can store (past a float): not sent as a string, which would run.
    (["events", "send", "paid", "7", "--payload", "1e309"], ["events", "send", "--help"]),
    # Text that is no JSON: a payload is a JSON object, and no object is plainly meant by it.
    (["events", "send", "paid", "7", "--payload", "hello"], ["events", "send", "--help"]),
    (["events", "send", "paid", "7", "--payload=order paid"], ["events", "send", "--help"]),
]


@pytest.mark.parametrize(("argv", "head"), NOTHING_NEAR)
def test_a_refused_value_with_nothing_near_it_still_gets_a_fix_that_runs(
    argv: list[str],
    head: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, each of these fixes was prose ("pass queue as a non-empty str …")."""
    error, command = _refused(argv, tmp_path, capsys, monkeypatch)
    assert command[: len(head)] == head, error["fix"]
    try:
        code = main(command)
    except SystemExit as helped:  # argparse's --help exits 0 once printed
        code = int(helped.code or 0)
    assert code == 0, error["fix"]
    capsys.readouterr()


WORKER_REFUSALS = [
    ["--log-level", "LOUD"],
    ["--concurrency", "0"],
    ["--metrics-port", "70000"],
    ["--tenant", "acme"],
    ["--log-format", "jsn"],
]


@pytest.mark.parametrize("refused", WORKER_REFUSALS)
@pytest.mark.parametrize("app", [None, "examples.shop"])
def test_a_refused_worker_lines_fix_is_the_line_typed_and_bash_reads_it(
    refused: list[str],
    app: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command ran without --app (and would run so again): its fix adds no `<module>`,
    # which bash reads as a redirection; the --app it had is kept.
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    typed_app = [] if app is None else ["--app", app]
    assert main(["worker", *refused, "--database-url", url, *typed_app]) in (1, 2)
    printed = capsys.readouterr()
    (fix,) = [line for line in (printed.out + printed.err).splitlines() if "fix:" in line]
    fix = fix.split("fix:", 1)[1].strip()
    checked = subprocess.run(["bash", "-n", "-c", fix], capture_output=True, text=True)
    assert checked.returncode == 0, (fix, checked.stderr)
    command = _command(fix)
    assert command[0] == "worker" and "<module>" not in command, fix
    assert (command[command.index("--app") + 1] if "--app" in command else None) == app, fix
