"""A fix line carries the PYTHONPATH an app imports by: the one given inline
(`PYTHONPATH=/x mcp-jobs …` from another directory), made absolute, so the line runs from any
directory; an app that imports without it gets none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words, run_fix


def _context(module: str, cwd: Path, pythonpath: str, on_path: Path) -> FixContext:
    sys.path.insert(0, str(on_path))  # as the process PYTHONPATH started has it
    try:
        return FixContext.of(
            Settings(apps=(module,)), cwd=cwd, environ={"PYTHONPATH": pythonpath}, declared=[]
        )
    finally:
        sys.path.remove(str(on_path))


def test_an_app_found_only_by_the_inherited_pythonpath_carries_it(tmp_path: Path) -> None:
    lib, elsewhere = tmp_path / "lib", tmp_path / "elsewhere"
    lib.mkdir()
    elsewhere.mkdir()
    (lib / "fixctx_by_pythonpath.py").write_text("")
    ctx = _context("fixctx_by_pythonpath", elsewhere, str(lib), lib)
    assert ctx.qualify("mcp-jobs worker").startswith(f"PYTHONPATH={lib} mcp-jobs worker ")
    # Relative, it named a directory of the working one: written absolute.
    ctx = _context("fixctx_by_pythonpath", tmp_path, "lib", lib)
    assert ctx.qualify("mcp-jobs worker").startswith(f"PYTHONPATH={lib} mcp-jobs worker ")
    # An app that imports from the installation needs none, whatever the process inherited.
    ctx = _context("json", elsewhere, str(lib), lib)
    assert "PYTHONPATH" not in ctx.qualify("mcp-jobs worker")


def test_a_fix_of_a_command_given_pythonpath_inline_runs_from_another_directory(
    tmp_path: Path,
) -> None:
    lib, elsewhere = tmp_path / "lib", tmp_path / "elsewhere"
    lib.mkdir()
    elsewhere.mkdir()
    (lib / "fixctx_inline_app.py").write_text("")
    url = migrated(f"sqlite:///{tmp_path}/jobs.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    argv = ["jobs", "ls", "--tenant", "acme", "--tenant-id", "globex", "--state", "dead"]
    done = subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *argv, "--app", "fixctx_inline_app"],
        cwd=elsewhere,
        env={**env, "PYTHONPATH": str(lib), "MCP_JOBS_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=30,
    )
    (fix,) = [line for line in done.stderr.splitlines() if line.startswith("  fix:")]
    fix = fix.removeprefix("  fix:").strip()
    assert command_words(fix)[:3] == ["mcp-jobs", "jobs", "ls"], fix
    assert "no jobs" in run_fix(fix)
