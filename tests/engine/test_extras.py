"""An error that needs an optional extra prints a line that installs it as given: with this
interpreter's pip, whatever `pip` the PATH of the shell that runs it holds."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engine import connect
from engine.errors import JobsError
from engine.extras import install_line, upgrade_line
from mcp_jobs.errors import OAuthUnavailableError

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# The extras an error's fix installs.
FIXED_EXTRAS = ("redis", "nats", "oauth", "uvloop")
# A shell whose PATH holds the system's tools only: its `pip`, if any, is not this venv's.
SYSTEM_PATH = "/usr/bin:/bin"


def test_each_fixed_extra_is_declared_and_installed_with_this_python() -> None:
    declared = tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]["optional-dependencies"]
    python = shlex.quote(sys.executable)
    for extra in FIXED_EXTRAS:
        assert extra in declared
        assert install_line(extra) == f"{python} -m pip install 'mcp-jobs[{extra}]'"


@pytest.mark.skipif(importlib.util.find_spec("redis") is None, reason="redis-py is not installed")
def test_the_redis_line_runs_as_given_from_a_shell_with_another_pip() -> None:
    # Installed here already: pip answers from this environment, without the network.
    done = subprocess.run(
        install_line("redis"),
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": SYSTEM_PATH, "HOME": str(Path.home())},
    )
    assert done.returncode == 0, done.stderr
    assert "Requirement already satisfied: mcp-jobs[redis]" in done.stdout
    assert "Requirement already satisfied: redis" in done.stdout


async def test_a_redis_url_without_redis_py_names_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "engine.drivers.redis", None)  # its import now fails
    with pytest.raises(JobsError) as raised:
        await connect("redis://127.0.0.1:1/0")
    assert raised.value.code == "DRIVER_EXTRA_MISSING"
    assert raised.value.fix == install_line("redis")


def test_oauth_without_pyjwt_names_the_line() -> None:
    assert OAuthUnavailableError().fix == install_line("oauth")


def test_the_upgrade_line_uses_this_python_and_pulls_a_checkout_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python = shlex.quote(sys.executable)
    monkeypatch.setattr("engine.extras._checkout", lambda: None)
    assert upgrade_line() == f"{python} -m pip install --upgrade mcp-jobs"
    assert upgrade_line(checkout=Path("/srv/my app")) == (
        f"git -C '/srv/my app' pull --ff-only && {python} -m pip install -e '/srv/my app'"
    )
    monkeypatch.undo()
    # This test runs from a checkout (an editable install): its own line pulls it.
    root = PYPROJECT.parent
    if (root / ".git").exists():
        assert upgrade_line().startswith(f"git -C {shlex.quote(str(root))} pull --ff-only && ")


def test_the_checkout_s_upgrade_line_runs_as_given(tmp_path: Path) -> None:
    """The git half, on a clone one commit behind its origin (`true` stands in for pip,
    which would reinstall this project)."""

    def git(*args: str, cwd: Path = tmp_path) -> str:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    origin, clone = tmp_path / "origin", tmp_path / "clone"
    git("init", "-q", "-b", "main", str(origin))
    for n in (1, 2):
        if n == 2:
            git("clone", "-q", str(origin), str(clone))
        git(
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            f"c{n}",
            cwd=origin,
        )
    line = upgrade_line(executable="true", checkout=clone)
    done = subprocess.run(
        line,
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": SYSTEM_PATH, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert git("log", "-1", "--format=%s", cwd=clone) == "c2"
