"""TASK_ENQUEUE_FAILED's fix reproduces the failing `enqueue` call. A worker started in the app's
directory (`mcp-jobs worker --app app`) imports the module from there; the fix is stored with the
task's state and shown by `jobs diagnose` anywhere, so it names that directory (`PYTHONPATH=…`)
and runs as given from another one: it raises what `enqueue` raised, not ModuleNotFoundError."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.tasks.errors import TaskEnqueueFailedError

APP = """
def boom(at):
    raise RuntimeError(f"report service down at {at}")
"""


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module `exa_tasks_app` imported as a worker run from its directory imports it."""
    (tmp_path / "exa_tasks_app.py").write_text(APP)
    (tmp_path / "exa_tasks_pkg").mkdir()
    (tmp_path / "exa_tasks_pkg" / "__init__.py").write_text("")
    (tmp_path / "exa_tasks_pkg" / "jobs.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    importlib.import_module("exa_tasks_app")
    importlib.import_module("exa_tasks_pkg.jobs")
    yield tmp_path
    for name in ("exa_tasks_app", "exa_tasks_pkg", "exa_tasks_pkg.jobs"):
        sys.modules.pop(name, None)


def _run_elsewhere(fix: str, where: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", fix], cwd=where, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("declared_by", ["exa_tasks_app:boom", "exa_tasks_pkg.jobs:boom"])
def test_the_fix_reproduces_the_failure_from_another_directory(
    app_dir: Path, tmp_path_factory: pytest.TempPathFactory, declared_by: str
) -> None:
    error = TaskEnqueueFailedError("report", 1_796_593_920_000, RuntimeError("down"), declared_by)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    done = _run_elsewhere(error.fix, elsewhere)
    assert "ModuleNotFoundError" not in done.stderr, (error.fix, done.stderr)
    assert "RuntimeError: report service down at 1796593920000" in done.stderr, done.stderr


def test_a_module_importable_anywhere_gets_no_pythonpath() -> None:
    error = TaskEnqueueFailedError("t", 60_000, RuntimeError("down"), "json:dumps")
    assert error.fix.startswith("python3 -c"), error.fix
