"""A `--help` fix (a command line the parser refused, an empty `--app` or `--tenant`, a value
with nothing near it) names this installation's `mcp-jobs` by its full path where the shell's
PATH would not find it, as every other fix does (`fix_context.unreachable_programs`)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from tests.support.fix_lines import command_words

OURS = str(Path(sys.executable).parent / "mcp-jobs")

REFUSED = [
    (["jobs", "ls", "--states", "dead"], 2),
    (["jobs", "ls", "--limit", "abc"], 2),
    (["jobs", "prun"], 2),
    (["jobs", "ls", "--app", ""], 1),
    (["jobs", "ls", "--tenant", ""], 1),
    (["queues", "pause", "mail", "--reason", ""], 1),
]


@pytest.mark.parametrize(("argv", "status"), REFUSED)
def test_a_help_fix_names_mcp_jobs_by_its_path_where_path_would_not_find_it(
    argv: list[str],
    status: int,
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["db", "migrate", "--database-url", url]) == 0
    capsys.readouterr()
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    monkeypatch.setenv("PATH", str(elsewhere))
    assert main([*argv, "--json", "--database-url", url]) == status
    fix = json.loads(capsys.readouterr().out)["error"]["fix"]
    words = command_words(fix)
    assert words[0] == OURS and "--help" in words, fix
    # Run as printed by a shell with that PATH: the help, exit 0.
    ran = subprocess.run(
        fix, shell=True, env={"PATH": str(elsewhere)}, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0 and ran.stdout.startswith("usage: "), ran.stderr


def test_an_empty_app_from_the_environment_is_unset_whatever_the_path(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its fix is no --help but the unset of the variable, which no PATH hides
    (tests/cli/test_empty_app_variable_fix_runs.py)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("MCP_JOBS_APP", "")
    assert main(["jobs", "ls", "--json"]) == 1
    fix = json.loads(capsys.readouterr().out)["error"]["fix"]
    assert shlex.split(fix) == ["unset", "MCP_JOBS_APP"], fix


def test_a_shell_that_finds_ours_gets_the_bare_name(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(Path(OURS).parent))
    assert main(["jobs", "ls", "--limit", "abc", "--json"]) == 2
    fix = json.loads(capsys.readouterr().out)["error"]["fix"]
    assert fix == "mcp-jobs jobs ls --help", fix
