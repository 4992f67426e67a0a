"""Hostile command lines to every `mcp-jobs` command, built from the CLI's own parser.

Every command the parser declares (a new one is covered without a change here) gets a fixed-seed
set of lines with hostile values in its positionals and options. Every run must exit 0, 1 or 2
with no traceback and never `INTERNAL`; a refusal prints its code, cause and fix (with --json:
not `retryable`) and changes no stored job or step; its fix, when it is an `mcp-jobs` line,
parses, and run (a bounded sample) is not refused again with the same code and argument. The
seed is fixed: a failure replays. The long-running commands (worker, serve, dashboard, demo,
jobs drain) only get lines the parser refuses before anything starts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine import JobRegistry, ManualClock, connect
from engine.errors import short_repr
from engine.testing.kit.test_retention import settle
from mcp_jobs.cli import main
from mcp_jobs.cli.exit_status import TRY_AGAIN_EXIT
from mcp_jobs.cli.parser import UsageError, build_parser
from tests.cli.support import stored_job
from tests.support.fix_lines import command_words

# Each seed a fixed set of lines; a seed that found a defect stays, so that it replays.
SEEDS = [77, 5, 3, 7, 11]
RUNS_PER_COMMAND = 25
# Fix lines run in-process per command, at most (each also parses; every one does that).
FIX_RUNS_PER_COMMAND = 4
APP = "examples.shop"
# Commands that would start something that runs until stopped: only lines refused at parsing.
LONG_RUNNING = {("serve",), ("worker",), ("dashboard",), ("demo",), ("jobs", "drain")}
UNKNOWN_FLAG = "--no-such-flag"
EXIT_STATUSES = {0, 1, 2}
# A fix line may also name a server that does not answer here (`db nats-report`'s NATS URL):
# its DRIVER_UNAVAILABLE is retryable, and exits so (TRY_AGAIN_EXIT).
FIX_EXIT_STATUSES = {*EXIT_STATUSES, TRY_AGAIN_EXIT}
STORED = ("jobs", "steps")

HOSTILE: list[str] = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\udcff",  # a byte that is no UTF-8 (0xff), as exec hands it to Python
    "\ud800",  # a lone surrogate: only an in-process argv carries one
    "x" * 10_000,
    "-x",
    "--",
    "-1",
    "0",
    "9" * 30,
    "1.5",
    "1e9",
    "NaN",
    "inf",
    "-inf",
    "\u202eevil",  # right-to-left override
    "🔥",
    "名前",
    '{"a": 1}',
    "[1, 2]",
    "null",
    "'; DROP TABLE mcp_jobs_jobs; --",
    "../../etc/passwd",
    "a=b",
    "\x1b[31mred",
    "line\nbreak",
]
# Values a command may take, so that some lines pass the parser and reach the command.
PLAUSIBLE: list[str] = ["mail", "orders", "fuzz.greet", "ready", "dead", "done", "7d", "5", "200"]
_SLIPS = random.Random(0)  # reseeded per test with the test's seed
UNKNOWN: list[str] = [UNKNOWN_FLAG, "--states", "-x", "--json=1", "--limit=", "--Tenant"]


@dataclass
class Command:
    """A command the parser declares: its words, options (flags, whether each takes a value,
    its choices) and positionals (whether each is required)."""

    words: tuple[str, ...]
    options: list[tuple[tuple[str, ...], bool, tuple[str, ...]]]
    positionals: list[bool]


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[Command]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subs:
        for name, sub in subs[0].choices.items():
            yield from _commands(sub, (*words, name))
        return
    options, positionals = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            choices = tuple(str(c) for c in action.choices or ())
            options.append((tuple(action.option_strings), action.nargs != 0, choices))
        else:
            positionals.append(action.nargs not in ("?", "*"))
    yield Command(words, options, positionals)


def _value(rng: random.Random, choices: tuple[str, ...], ids: list[str]) -> str:
    roll = rng.random()
    if choices and roll < 0.3:
        # A choice written another way ("Dead"), which the refusal mends, from an rng apart so
        # that the seeds' lines stay as they were found.
        choice = rng.choice(choices)
        return choice.capitalize() if _SLIPS.random() < 0.3 else choice
    if roll < 0.45:
        return rng.choice([*PLAUSIBLE, *ids])
    return rng.choice(HOSTILE)


def _line(rng: random.Random, command: Command, url: str, ids: list[str]) -> list[str]:
    """One hostile line for `command`: its words, then its arguments in a random order."""
    parts: list[list[str]] = []
    for required in command.positionals:
        if rng.random() < (0.9 if required else 0.5):
            parts.append([_value(rng, (), ids)])
    for flags, takes_value, choices in command.options:
        if flags[0] in ("--database-url", "--app") or rng.random() > 0.3:
            continue
        for _ in range(2 if rng.random() < 0.15 else 1):  # a repeated flag
            flag = rng.choice(flags)
            value = _value(rng, choices, ids)
            if not takes_value:
                parts.append([flag])
            elif rng.random() < 0.3:
                parts.append([f"{flag}={value}"])
            else:
                parts.append([flag, value])
    if rng.random() < 0.15:
        parts.append([rng.choice(UNKNOWN)])
    if rng.random() < 0.1:
        parts.append(["--app", rng.choice(HOSTILE)])
    elif any(flags[0] == "--app" for flags, _, _ in command.options):
        parts.append(["--app", APP])
    if any(flags[0] == "--database-url" for flags, _, _ in command.options):
        parts.append([f"--database-url={url}"] if rng.random() < 0.3 else ["--database-url", url])
    rng.shuffle(parts)
    if rng.random() < 0.1:  # what follows `--` is positional, whatever it looks like
        parts.insert(rng.randrange(len(parts) + 1), ["--"])
    if command.words in LONG_RUNNING:
        parts.insert(0, [UNKNOWN_FLAG])  # refused before the command starts
    return [*command.words, *(word for part in parts for word in part)]


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return {
            t: [tuple(r) for r in db.execute(f"SELECT * FROM mcp_jobs_{t} ORDER BY 1, 2")]
            for t in STORED
        }


def _seed(url: str) -> list[str]:
    """Settled jobs that finished an hour ago, and a ready one; their ids."""

    async def run() -> None:
        clock = ManualClock(time.time_ns() // 1_000_000 - 3_600_000)
        jobs = await connect(url, clock=clock, registry=JobRegistry(), migrate=True)
        try:
            await settle(jobs.driver, "done", queue="mail")
            await settle(jobs.driver, "dead", queue="orders", tenant="acme")
            await settle(jobs.driver, "failed", queue="orders")
        finally:
            await jobs.close()

    anyio.run(run)
    stored_job(url, "fuzz.greet", "mail")
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        return [r[0] for r in db.execute("SELECT id FROM mcp_jobs_jobs ORDER BY id")]


@dataclass
class Refusal:
    code: str
    cause: str
    fix: str
    retryable: bool | None  # None: printed as text, which does not say
    argument: str | None


_ERROR_LINES = re.compile(r"^error ([A-Z_]+): .*\n  cause: (.*)\n  fix:   (.*)$", re.MULTILINE)


def _refusal(out: str, err: str) -> Refusal | None:
    """The refusal a failed run printed: the envelope on stdout (--json), else the lines."""
    try:
        envelope = json.loads(out)
    except ValueError:
        envelope = None
    if isinstance(envelope, dict) and isinstance(envelope.get("error"), dict):
        error = envelope["error"]
        argument = (error.get("details") or {}).get("argument")
        return Refusal(error["code"], error["cause"], error["fix"], error["retryable"], argument)
    found = _ERROR_LINES.search(err)
    if found is None:
        return None
    return Refusal(found[1], found[2], found[3], None, None)


@dataclass
class Outcome:
    runs: int = 0
    problems: dict[tuple[str, str], str] = field(default_factory=dict)

    def flag(self, command: tuple[str, ...], what: str, argv: list[str]) -> None:
        # The shortest example of each kind of failure is the one worth reading.
        key, shown = (" ".join(command), what), short_repr(argv, 300)
        if key not in self.problems or len(shown) < len(self.problems[key]):
            self.problems[key] = shown


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | str, str, str]:
    try:
        code: int | str = main(argv)
    except SystemExit as exc:  # --help, as a fix may be
        code = exc.code if isinstance(exc.code, int) else f"SystemExit({exc.code!r})"
    except BaseException as exc:  # what escaped main is the finding
        code = f"raised {type(exc).__name__}: {short_repr(str(exc), 200)}"
    out, err = capsys.readouterr()
    return code, out, err


def _check_fix(
    command: Command,
    argv: list[str],
    refusal: Refusal,
    run_it: bool,
    capsys: pytest.CaptureFixture[str],
    outcome: Outcome,
) -> bool:
    """Whether the fix line was run (it may have written)."""
    try:
        words = command_words(refusal.fix)
    except ValueError:
        outcome.flag(command.words, f"{refusal.code}: a fix no shell reads", argv)
        return False
    if not words or Path(words[0]).name != "mcp-jobs":
        return False
    fix_argv = words[1:]
    try:
        build_parser().parse_args(fix_argv)
    except UsageError as usage:
        outcome.flag(command.words, f"{refusal.code}: fix refused by the parser: {usage}", argv)
        return False
    except SystemExit:  # `--help`: the parser printed it
        capsys.readouterr()
        return False
    fixed = tuple(w for w in fix_argv if not w.startswith("-"))[: len(command.words)]
    if not run_it or fixed in LONG_RUNNING or "--help" in fix_argv:
        return False
    code, out, err = _run(fix_argv, capsys)
    if code not in FIX_EXIT_STATUSES:
        outcome.flag(command.words, f"{refusal.code}: its fix exited {code}", argv)
    again = _refusal(out, err) if code != 0 else None
    if again is not None and again.code == refusal.code:
        same = (
            again.argument == refusal.argument
            if again.argument is not None and refusal.argument is not None
            else again.cause == refusal.cause
        )
        if same:
            outcome.flag(command.words, f"{refusal.code}: its fix is refused the same way", argv)
    return True


def _check(
    command: Command,
    argv: list[str],
    db: Path,
    fix_runs: int,
    capsys: pytest.CaptureFixture[str],
    outcome: Outcome,
) -> int:
    """One hostile run checked; the fix lines left to run for this command."""
    before = _rows(db)
    code, out, err = _run(argv, capsys)
    outcome.runs += 1
    if code not in EXIT_STATUSES:
        outcome.flag(command.words, f"exit status {code}", argv)
    if "Traceback" in out + err:
        outcome.flag(command.words, "a traceback", argv)
    if "INTERNAL" in out + err:
        outcome.flag(command.words, "INTERNAL", argv)
    if command.words in LONG_RUNNING and code != 2:
        outcome.flag(command.words, f"a long-running command not refused: {code}", argv)
    if code == 0:
        return fix_runs
    refusal = _refusal(out, err)
    if refusal is None:
        outcome.flag(command.words, "a failure without code, cause and fix", argv)
        return fix_runs
    if refusal.retryable:
        outcome.flag(command.words, f"{refusal.code}: bad input answered retryable", argv)
    if refusal.code == "INTERNAL":
        return fix_runs
    if _rows(db) != before:
        outcome.flag(command.words, f"{refusal.code}: a refused line changed stored rows", argv)
    ran = _check_fix(command, argv, refusal, fix_runs > 0, capsys, outcome)
    return fix_runs - ran


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_command_lines_to_every_command_are_refused_typed_and_change_nothing(
    seed: int,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.delenv("MCP_JOBS_ENV", raising=False)
    ids = _seed(url)
    db = Path(url.removeprefix("sqlite:///"))
    capsys.readouterr()
    rng = random.Random(seed)
    _SLIPS.seed(seed)
    outcome = Outcome()
    commands = list(_commands(build_parser()))
    assert len(commands) > 20, [c.words for c in commands]
    for command in commands:
        fix_runs = FIX_RUNS_PER_COMMAND
        for _ in range(RUNS_PER_COMMAND):
            argv = _line(rng, command, url, ids)
            fix_runs = _check(command, argv, db, fix_runs, capsys, outcome)
    problems = [
        f"{cmd}: {what} — e.g. {argv}" for (cmd, what), argv in sorted(outcome.problems.items())
    ]
    assert not problems, (
        f"{len(problems)} kind(s) of failure in {outcome.runs} runs:\n" + "\n".join(problems)
    )


def test_a_fix_line_keeps_a_tenant_starting_with_a_dash_joined_to_its_flag(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(url)
    capsys.readouterr()
    code, out, err = _run(["jobs", "retry", "done", "--tenant=-x", "--database-url", url], capsys)
    refusal = _refusal(out, err)
    assert code == 1 and refusal is not None and refusal.code == "JOB_NOT_FOUND"
    build_parser().parse_args(command_words(refusal.fix)[1:])
