"""What `--help` and the README's CLI synopsis say matches what the parser takes: every driver
scheme in `--database-url`'s help, `worker --concurrency`'s default, every flag of every command
in the synopsis, and the page cap the CLI holds to in the bounds table."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

from engine import Worker
from engine.drivers import registered_schemes
from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import ServerLimits

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
# The options every command takes, said once under the synopsis, and argparse's own.
COMMON = {"--database-url", "--app", "--tenant", "--json", "--help", "--log-format", "--log-level"}


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _commands(sub, (*path, name))
    return found


def _help(parser: argparse.ArgumentParser, flag: str) -> str:
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    return str(action.help or "") % {"default": action.default}


def _alike(scheme: str, named: str) -> bool:
    return scheme.startswith(named) or named.startswith(scheme)


def test_the_database_url_help_names_every_driver_scheme() -> None:
    for path, parser in _commands(build_parser()).items():
        if not any("--database-url" in a.option_strings for a in parser._actions):
            continue
        said = set(re.findall(r"([a-z]+)://", _help(parser, "--database-url")))
        # `postgres` is `postgresql`'s other name, `rediss` Redis over TLS.
        # A test's own plug-in driver (`toy`) may be registered in this process: built-ins only.
        built_in = [s for s in registered_schemes() if s != "toy"]
        unnamed = [s for s in built_in if not any(_alike(s, n) for n in said)]
        assert not unnamed, (path, unnamed)


def test_worker_concurrency_help_gives_the_workers_default() -> None:
    worker = _commands(build_parser())[("worker",)]
    default = inspect.signature(Worker).parameters["concurrency"].default
    (action,) = [a for a in worker._actions if "--concurrency" in a.option_strings]
    assert action.default == default
    assert f"default: {default}" in _help(worker, "--concurrency")


def _synopsis() -> str:
    section = README.split("\n## CLI\n", 1)[1].split("\n## ", 1)[0]
    block: str = re.search(r"```\n(.*?)\n```", section, flags=re.DOTALL)[1]  # type: ignore[index]
    return block


def _lines_of(command: str, block: str) -> str:
    """The synopsis lines of `mcp-jobs COMMAND`, with the lines that continue them."""
    out: list[str] = []
    taking = False
    for line in block.splitlines():
        if line.startswith("mcp-jobs "):
            taking = line.split()[1] == command
        if taking:
            out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize(
    "path", [p for p in _commands(build_parser()) if p], ids=lambda p: " ".join(p)
)
def test_the_readme_synopsis_names_every_flag_of_each_command(path: tuple[str, ...]) -> None:
    parser = _commands(build_parser())[path]
    lines = _lines_of(path[0], _synopsis())
    assert lines, f"the synopsis has no line for mcp-jobs {path[0]}"
    flags = {
        o
        for a in parser._actions
        for o in a.option_strings
        if o.startswith("--") and o not in COMMON and a.help != argparse.SUPPRESS
    }
    missing = sorted(f for f in flags if not re.search(rf"{re.escape(f)}(?![\w-])", lines))
    assert not missing, (path, missing)


def test_the_bounds_table_gives_the_page_cap_the_cli_holds_to() -> None:
    (row,) = [line for line in README.splitlines() if line.startswith("| list page |")]
    assert f"{ServerLimits.max_page_size}" in row and "CLI" in row, row
