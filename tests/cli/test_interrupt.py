"""Ctrl-C while `mcp-jobs` still imports its modules (about a second of a command's start) exits
130 without a Python traceback, as it does once the command runs. Before, the console script's
own import was interrupted outside any handler and printed `KeyboardInterrupt` with its stack.

The interrupt lands at a known point: an import hook in the child holds the import of the
command's modules until the signal arrives, so the test does not depend on timing."""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

# Holds the import of `module` (a line on stdout says so) until a signal arrives (the parent
# bounds the wait: it kills the child after its timeout).
HOLD = """
import signal, sys

class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            print("holding", flush=True)
            signal.pause()
        return None

sys.meta_path.insert(0, Hold())
"""


def _console_script() -> str:
    """The `mcp-jobs` script's own body (pip writes the same), from its declared entry point."""
    (script,) = entry_points(group="console_scripts", name="mcp-jobs")
    module, _, attr = script.value.partition(":")
    return f"import sys\nfrom {module} import {attr}\nsys.exit({attr}())\n"


def _interrupted(code: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "holding\n"  # it is inside the import now
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


@pytest.mark.parametrize("held", ["mcp_jobs.cli.entry", "anyio", "engine.client"])
def test_ctrl_c_during_the_imports_exits_130_without_a_traceback(tmp_path: Path, held: str) -> None:
    code = HOLD.format(module=held) + _console_script()
    argv = ["jobs", "stats", "--database-url", f"sqlite:///{tmp_path}/jobs.db"]
    done = _interrupted(code, argv)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) <= 1, done.stderr


def test_python_m_takes_ctrl_c_during_the_imports_as_quietly(tmp_path: Path) -> None:
    code = HOLD.format(module="mcp_jobs.cli.entry") + (
        "import runpy\nrunpy.run_module('mcp_jobs.cli', run_name='__main__', alter_sys=True)\n"
    )
    done = _interrupted(code, ["jobs", "stats", "--database-url", f"sqlite:///{tmp_path}/j.db"])
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
