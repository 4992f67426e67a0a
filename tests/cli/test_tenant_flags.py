"""`--tenant` on the CLI: a worker, which serves every tenant's jobs, refuses it; an empty one on
`events send` says what leaving it out does there; a pinned command's TENANT_PINNED fix keeps the
command's filters."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_jobs.cli.parser import build_parser
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


def _fix_of(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("  fix:")]
    return line.removeprefix("  fix:").strip()


def test_a_worker_refuses_tenant_and_its_fix_is_the_worker_without_it(
    url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    argv = ["worker", "--tenant", "acme", "--app", "json", "--database-url", url]
    # Bounded: before the refusal, this worker ran (every tenant's jobs) until stopped.
    done = subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0, done.stderr
    assert "INVALID_ARGUMENT" in done.stderr and "every tenant" in done.stderr
    words = command_words(_fix_of(done.stderr))
    assert words[:2] == ["mcp-jobs", "worker"] and "--tenant" not in words
    parsed = build_parser().parse_args(words[1:])
    assert (parsed.app, parsed.database_url, parsed.tenant) == (["json"], url, None)
    # Its --help does not offer the flag either.
    assert (
        "--tenant"
        not in build_parser()
        ._subparsers._group_actions[0]
        .choices[  # type: ignore[union-attr]
            "worker"
        ]
        .format_help()
    )


def test_an_empty_tenant_on_events_send_says_what_a_send_without_one_does(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["events", "send", "pay.done", "1", "--tenant", "", "--database-url", url, "--json"]
    code, out = run(capsys, *argv)
    error = out["error"]
    assert code == 1 and error["code"] == "INVALID_ARGUMENT"
    assert "every tenant" not in error["cause"] and "no tenant" in error["cause"]
    words = command_words(error["fix"])
    assert "--help" not in words and "--tenant" not in words
    parsed = build_parser().parse_args(words[1:])
    assert (parsed.name, parsed.key, parsed.database_url) == ("pay.done", "1", url)


def test_a_pinned_commands_tenant_pinned_fix_keeps_its_filters(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    common = ["--tenant", "acme", "--database-url", url, "--json"]
    code, out = run(
        capsys,
        "jobs",
        "ls",
        "--tenant-id",
        "globex",
        "--state",
        "dead",
        "--name",
        "failer",
        *common,
    )
    assert code == 1 and out["error"]["code"] == "TENANT_PINNED"
    parsed = build_parser().parse_args(command_words(out["error"]["fix"])[1:])
    assert (parsed.tenant_filter, parsed.state, parsed.name, parsed.tenant) == (
        "acme",
        ["dead"],
        "failer",
        "acme",
    )
    code, out = run(
        capsys, "jobs", "cancel-all", "--tenant-id", "globex", "--name", "failer", "--yes", *common
    )
    assert code == 1 and out["error"]["code"] == "TENANT_PINNED"
    words = command_words(out["error"]["fix"])
    parsed = build_parser().parse_args(words[1:])
    assert (parsed.tenant_filter, parsed.name, parsed.tenant) == ("acme", "failer", "acme")
    # Another tenant than the one typed: the line shows its plan before it acts.
    assert not parsed.yes, shlex.join(words)
