"""An error that needs an optional extra prints a line that installs it as given: this
interpreter's pip, and the extra's own requirements (from a source checkout, `pip install
'mcp-jobs[redis]'` names nothing an index has)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engine import connect
from engine.errors import JobsError
from engine.extras import extra_requirements, install_line
from mcp_jobs.errors import OAuthUnavailableError

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# The extras an error's fix installs.
FIXED_EXTRAS = ("redis", "nats", "oauth", "uvloop")
REQUIRES = [
    "anyio>=4",
    'uvloop>=0.19; sys_platform != "win32" and extra == "uvloop"',
    'redis[hiredis]>=5; extra == "redis"',
    'redis[hiredis]>=5; extra == "dev"',
    'PyJWT[crypto]>=2.15; extra == "oauth"',
]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower()


def test_an_extra_s_requirements_keep_their_other_markers() -> None:
    assert extra_requirements("redis", REQUIRES) == ["redis[hiredis]>=5"]
    assert extra_requirements("uvloop", REQUIRES) == ['uvloop>=0.19; sys_platform != "win32"']
    assert extra_requirements("otel", REQUIRES) == []
    assert extra_requirements("redis", None) == []


def test_each_fixed_extra_installs_what_pyproject_declares_with_this_python() -> None:
    declared = tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]["optional-dependencies"]
    python = shlex.quote(sys.executable)
    for extra in FIXED_EXTRAS:
        line = install_line(extra)
        assert line.startswith(f"{python} -m pip install "), line
        assert "mcp-jobs[" not in line
        installed = {_name(w) for w in shlex.split(line)[4:]}
        assert installed == {_name(r) for r in declared[extra]}, (extra, line)


@pytest.mark.skipif(importlib.util.find_spec("redis") is None, reason="redis-py is not installed")
def test_the_redis_line_runs_as_given() -> None:
    # Installed here already: pip answers from this environment, without the network.
    done = subprocess.run(
        install_line("redis"), shell=True, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Requirement already satisfied: redis" in done.stdout


async def test_a_redis_url_without_redis_py_names_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "engine.drivers.redis", None)  # its import now fails
    with pytest.raises(JobsError) as raised:
        await connect("redis://127.0.0.1:1/0")
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    assert raised.value.fix == install_line("redis")


def test_oauth_without_pyjwt_names_the_line() -> None:
    assert OAuthUnavailableError().fix == install_line("oauth")
