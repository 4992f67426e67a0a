"""Each MCP tool an `mcp-jobs` command does too, read both ways: the CLI prints a tool call as
the command that makes it (`command_of_call`), and an MCP caller of a memory:// server, where no
shell reaches the store, is given a command as the tool call doing the same (`tool_call_of`).
Both read one table, `TOOL_COMMANDS`, whose flags are the CLI parser's own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Sequence
from functools import cache
from typing import Any

from engine.fix_lines import END_OF_OPTIONS

# Commands an MCP client is given as the tool call that does the same (`database_report {}`):
# the tool runs where the server runs, which reaches the database, and needs no shell.
TOOL_FOR_COMMAND: dict[tuple[str, ...], tuple[str, dict[str, Any]]] = {
    ("db", "report"): ("database_report", {}),
    ("db", "prune"): ("prune_history", {"write": True}),
}
# Each tool an `mcp-jobs` command does too: the command, and the tool's arguments by the flag
# that gives each (None: a positional, in the command's order; True is a bare flag). Read both
# ways: the CLI prints a tool call as its command (`command_of_call`), and an MCP caller of a
# memory:// server is given a command as its tool call (`tool_call_of`). A tool's first row is
# the command the CLI prints for it.
_NAME = ("name", None)
TOOL_COMMANDS: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str | None], ...]], ...] = (
    (
        "list_jobs",
        ("jobs", "ls"),
        (
            ("state", "--state"),
            ("name", "--name"),
            ("queue", "--queue"),
            ("tenant_id", "--tenant-id"),
            ("cursor", "--cursor"),
            ("limit", "--limit"),
        ),
    ),
    ("inspect_job", ("jobs", "show"), (("job_id", None), ("run_id", "--run-id"))),
    (
        "retry_job",
        ("jobs", "retry"),
        (
            ("job_id", None),
            ("include_cancelled", "--include-cancelled"),
            ("from_step", "--from-step"),
        ),
    ),
    ("cancel_job", ("jobs", "cancel"), (("job_id", None),)),
    (
        "enqueue_job",
        ("jobs", "enqueue"),
        (
            _NAME,
            ("input", "--input"),
            ("tenant_id", "--tenant"),
            ("delay_seconds", "--delay-seconds"),
            ("run_at", "--run-at"),
            ("on_conflict", "--on-conflict"),
            ("key", "--key"),
            ("priority", "--priority"),
        ),
    ),
    ("describe_jobs", ("jobs", "describe"), (_NAME, ("cursor", "--cursor"), ("limit", "--limit"))),
    ("queue_stats", ("jobs", "stats"), (("queues", "--queues"), ("limit", "--limit"))),
    ("queue_stats", ("queues", "ls"), ()),
    ("diagnose_queue", ("jobs", "diagnose"), (("queue", "--queue"),)),
    (
        "pause_queue",
        ("queues", "pause"),
        (("queue", None), ("job", "--job"), ("reason", "--reason")),
    ),
    ("resume_queue", ("queues", "resume"), (("queue", None), ("job", "--job"))),
    ("send_event", ("events", "send"), (_NAME, ("key", None), ("payload", "--payload"))),
    ("database_report", ("db", "report"), ()),
    # `backfill` lists (no NAME, or --runs or --pending) or rehearses or writes NAME.
    (
        "list_backfills",
        ("backfill",),
        (
            _NAME,
            ("pending_only", "--pending"),
            ("runs_limit", "--runs-limit"),
            ("runs_cursor", "--runs-cursor"),
        ),
    ),
    (
        "run_backfill",
        ("backfill",),
        (_NAME, ("write", "--write"), ("force", "--force"), ("wait_seconds", "--wait")),
    ),
)
COMMAND_FOR_TOOL = {
    tool: (command, arguments) for tool, command, arguments in reversed(TOOL_COMMANDS)
}


@cache
def _parser() -> argparse.ArgumentParser:
    from mcp_jobs.cli.parser import build_parser  # the CLI's modules import this one

    return build_parser()


def _actions(command: Sequence[str]) -> list[argparse.Action]:
    """The actions of the parser of `command` (`("jobs", "ls")`)."""
    parser = _parser()
    for word in command:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return parser._actions


def _dests(
    command: tuple[str, ...], arguments: tuple[tuple[str, str | None], ...]
) -> list[tuple[str, str, Any]]:
    """Each tool argument of `command`'s row, as (the dest the CLI's parser gives the flag or
    positional that takes it, the argument, the dest's default)."""
    actions = _actions(command)
    positionals = iter(a for a in actions if not a.option_strings)
    by_flag = {flag: a for a in actions for flag in a.option_strings}
    out: list[tuple[str, str, Any]] = []
    for argument, flag in arguments:
        action = next(positionals) if flag is None else by_flag[flag]
        out.append((action.dest, argument, action.default))
    return out


def tool_call_of(rest: tuple[str, ...]) -> tuple[str, dict[str, Any]] | None:
    """The tool call that does what `mcp-jobs <rest>` does (a value the command leaves at its
    default is left out), or None: no tool does it, or `rest` is no command the CLI takes."""
    found = _tool_call_of(rest)
    return None if found is None else (found[0], json.loads(found[1]))


@cache
def _tool_call_of(rest: tuple[str, ...]) -> tuple[str, str] | None:
    from mcp_jobs.cli.parser import UsageError

    try:
        args = _parser().parse_args(list(rest))
    except (UsageError, SystemExit):
        return None
    command: tuple[str, ...] = (args.command,)
    if getattr(args, "action", None) is not None:
        command += (args.action,)
    rows = [(tool, arguments) for tool, c, arguments in TOOL_COMMANDS if c == command]
    if command == ("backfill",):
        listing = args.name is None or args.runs or args.pending
        rows = [row for row in rows if (row[0] == "list_backfills") == bool(listing)]
    if not rows:
        return None
    tool, shape = rows[0]
    arguments: dict[str, Any] = {}
    for dest, argument, default in _dests(command, shape):
        value = getattr(args, dest, None)
        if value is None or value is False or value == default:
            continue
        if argument in _JSON_ARGUMENTS and isinstance(value, str):
            with contextlib.suppress(ValueError):  # else the CLI sends it as text too
                value = json.loads(value)
        arguments[argument] = value
    return tool, json.dumps(arguments)


# The arguments a command takes as JSON text after their flag.
_JSON_ARGUMENTS = frozenset({"payload", "input"})
# A fix line never asks for help: these words in one are names (a queue named `-h`).
_NEVER_A_FLAG = frozenset({"-h", "--help"})


@cache
def _cli_options() -> dict[str, bool]:
    """Every option string any `mcp-jobs` command takes, and whether it takes a value."""
    from mcp_jobs.cli.parser import build_parser  # the CLI's modules import this one

    options: dict[str, bool] = {}
    parsers = [build_parser()]
    while parsers:
        for action in parsers.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            for option in action.option_strings:
                options[option] = options.get(option, False) or action.nargs != 0
    return options


def _option(word: str) -> bool | None:
    """Whether `word` is an option that takes a value (True) or none (False), as argparse reads
    it (`--opt=value` with its value, an unambiguous prefix `--data`); None: not an option."""
    flag, inline, _ = word.partition("=")
    options = _cli_options()
    if word in _NEVER_A_FLAG or not flag.startswith("-"):
        return None
    matches = [o for o in options if o == flag] or [
        o for o in options if flag.startswith("--") and len(flag) > 2 and o.startswith(flag)
    ]
    if not matches:
        return None
    return not inline and all(options[o] for o in matches)


def dash_safe(words: Sequence[str]) -> list[str]:
    """A command's `words` with every name in them that starts with `-` read as that name, not
    as a flag: an option's value joined to it (`--job=--yes`), and from the first such
    positional on, the positionals after `--` (`queues resume -- -h`). Bounds admit such queue
    and job names, and a fix line must run as given."""
    out: list[str] = []
    names: list[str] = []
    value_next = False
    for at, word in enumerate(words):
        if value_next:
            value_next = False
            if word.startswith("-"):
                out[-1] = f"{out[-1]}={word}"
            else:
                out.append(word)
        elif word == END_OF_OPTIONS:
            names += words[at + 1 :]
            break
        elif (option := _option(word)) is not None:
            out.append(word)
            value_next = option
        elif names or word.startswith("-"):
            names.append(word)
        else:
            out.append(word)
    return [*out, END_OF_OPTIONS, *names] if names else out


def _command_word(value: Any) -> str:
    """`value` as the command word that gives it: text as is, anything else as JSON (a
    payload's object, which the CLI reads back as JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def command_of_call(tool: str, given: str) -> list[str] | None:
    """The words after `mcp-jobs` of the command that makes the tool call `tool` with the JSON
    arguments `given` (`list_jobs`, `{"limit": 200}`), or None when no command does or the CLI
    has no way to give one of its arguments."""
    shape = COMMAND_FOR_TOOL.get(tool)
    if shape is None:
        return None
    try:
        arguments = json.loads(given)
    except ValueError:
        return None
    subcommand, flags = shape
    if not isinstance(arguments, dict) or not set(arguments) <= {k for k, _ in flags}:
        return None
    positionals: list[str] = []
    options: list[str] = []
    for key, flag in flags:
        for value in _as_list(arguments.get(key)):
            if flag is None:
                positionals.append(_command_word(value))
            elif value is True:
                options.append(flag)
            elif value is not False:
                options += [flag, _command_word(value)]
    words = [*subcommand, *positionals, *options]
    if tool == "list_backfills" and "name" in arguments:
        words.append("--runs")  # `backfill NAME` alone would rehearse it, not list its runs
    return words


__all__ = [
    "COMMAND_FOR_TOOL",
    "TOOL_COMMANDS",
    "TOOL_FOR_COMMAND",
    "command_of_call",
    "dash_safe",
    "tool_call_of",
]
