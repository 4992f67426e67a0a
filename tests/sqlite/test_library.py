"""Where Python links an SQLite older than the driver needs, the driver runs on pysqlite3's own
SQLite once it is installed; until then it refuses to open, with the command that installs it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from engine import connect
from engine.drivers.sqlite import library
from engine.drivers.sqlite.library import choose, sqlite3, too_old_fix
from engine.errors import JobsError
from tests.sqlite.fix_runner import run_fix
from tests.support.old_stdlib_sqlite import HIDE_FALLBACK, OLD_VERSION

ROOT = Path(__file__).resolve().parents[2]
needs_fallback = pytest.mark.skipif(
    importlib.util.find_spec("pysqlite3") is None,
    reason="pysqlite3-binary is not installed (its wheels are for glibc Linux on x86_64 only)",
)


def _module(version: tuple[int, int, int]) -> SimpleNamespace:
    return SimpleNamespace(sqlite_version_info=version)


def test_python_s_own_module_is_kept_while_its_sqlite_is_new_enough() -> None:
    stdlib, fallback = _module((3, 35, 0)), _module((3, 51, 1))
    assert choose(stdlib, lambda: fallback) is stdlib  # type: ignore[arg-type]


def test_an_old_sqlite_gives_way_to_the_fallback_only_when_that_is_new_enough() -> None:
    stdlib = _module((3, 34, 1))
    new, old = _module((3, 51, 1)), _module((3, 31, 0))
    assert choose(stdlib, lambda: new) is new  # type: ignore[arg-type]
    assert choose(stdlib, lambda: old) is stdlib  # type: ignore[arg-type]
    assert choose(stdlib, lambda: None) is stdlib  # type: ignore[arg-type]


def test_the_fix_installs_the_fallback_where_it_has_wheels_and_a_bundling_python_elsewhere() -> (
    None
):
    python = "/opt/my env/bin/python"
    quoted = shlex.quote(python)
    assert (
        too_old_fix(python, "linux-x86_64", "glibc") == f"{quoted} -m pip install pysqlite3-binary"
    )
    for build, libc in (
        ("linux-aarch64", "glibc"),
        ("linux-x86_64", ""),
        ("macosx-11.0-arm64", ""),
    ):
        fix = too_old_fix(python, build, libc)
        assert fix.startswith(f"{quoted} -m pip install uv && {quoted} -m uv venv"), fix
        assert "--python-preference only-managed" in fix
        assert "pysqlite3" not in fix


async def _old_python(code: str, *, hide_fallback: bool) -> tuple[int, str, str]:
    """Run `code` in a Python whose own sqlite3 claims SQLite 3.31.0."""
    args = [sys.executable, "-m", "tests.support.old_stdlib_sqlite"]
    if hide_fallback:
        args.append(HIDE_FALLBACK)
    with anyio.fail_after(120):
        done = await anyio.run_process([*args, "-c", code], cwd=ROOT, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


_OPEN = """
import asyncio, json, sys
from engine import connect
from engine.drivers.sqlite.library import sqlite3
async def main(url):
    try:
        jobs = await connect(url)
    except Exception as exc:
        print(json.dumps({"code": exc.code, "retryable": exc.retryable, "cause": exc.cause,
                          "fix": exc.fix}))
        return
    await jobs.close()
    print(json.dumps({"module": sqlite3.__name__, "version": sqlite3.sqlite_version}))
asyncio.run(main(sys.argv[1]))
"""


async def _open(url: str, *, hide_fallback: bool) -> dict[str, object]:
    code = _OPEN.replace("sys.argv[1]", repr(url))
    rc, out, err = await _old_python(code, hide_fallback=hide_fallback)
    assert rc == 0, err
    answer: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return answer


@needs_fallback
async def test_an_old_sqlite_without_the_fallback_refuses_to_open_and_the_fix_runs_as_given(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    refused = await _open(f"sqlite:///{path}", hide_fallback=True)
    assert refused["code"] == "SQLITE_TOO_OLD" and refused["retryable"] is False
    assert OLD_VERSION in str(refused["cause"])
    assert not path.exists()  # refused before the file was made
    fix = str(refused["fix"])
    assert fix == f"{shlex.quote(sys.executable)} -m pip install pysqlite3-binary"
    # Installed here already, so pip answers from this environment without the network.
    ran = await run_fix(fix)
    assert ran.returncode == 0, ran.stderr
    # With the fallback in reach, the same interpreter opens the file on pysqlite3's SQLite.
    opened = await _open(f"sqlite:///{path}", hide_fallback=False)
    assert opened["module"] == "pysqlite3.dbapi2", opened
    assert tuple(map(int, str(opened["version"]).split("."))) >= library.MIN_SQLITE


@needs_fallback
async def test_an_outbox_connection_of_the_other_sqlite_module_is_refused(tmp_path: Path) -> None:
    import pysqlite3.dbapi2 as other_module  # type: ignore[import-not-found,import-untyped,unused-ignore]

    other = other_module if sqlite3.__name__ == "sqlite3" else importlib.import_module("sqlite3")
    jobs = await connect(f"sqlite:///{tmp_path}/jobs.db")
    # Another file, so that the refused connection shares no locks with the driver's.
    app = other.connect(str(tmp_path / "app.db"), isolation_level=None)
    try:
        app.execute("BEGIN")
        with pytest.raises(JobsError) as raised:
            await jobs.driver.outbox_stage(app, [])
        error = raised.value
        assert error.code == "OUTBOX_OTHER_SQLITE" and not error.retryable
        assert other.__name__ in error.cause and sqlite3.__name__ in error.cause
        # Only the fallback is there because Python's own SQLite is too old.
        assert ("older than it needs" in error.cause) == (sqlite3.__name__ != "sqlite3")
        assert error.fix.startswith("from engine.drivers.sqlite import sqlite3; tx = ")
    finally:
        app.close()
        await jobs.close()


@needs_fallback
@pytest.mark.timeout(600)  # a nested run of the suites, about a minute: bounded by fail_after
async def test_the_sqlite_driver_passes_its_own_suites_on_the_fallback() -> None:
    """The driver's tests, the conformance kit, the per-driver rules, the outbox, backfills,
    tasks and the example shop on SQLite, in a Python whose own SQLite is too old: every
    statement goes through pysqlite3. (The MCP tools' SQLite tests pass there too, but take a
    minute and a half.)"""
    suites = ["tests/sqlite", "tests/conformance", "tests/parity", "tests/outbox"]
    suites += ["tests/backfill", "tests/tasks", "tests/examples", "tests/cli"]
    args = [
        *("-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "sqlite"),
        *suites,
        "--ignore=tests/sqlite/test_library.py",
    ]
    with anyio.fail_after(600):
        done = await anyio.run_process(
            [sys.executable, "-m", "tests.support.old_stdlib_sqlite", *args],
            cwd=ROOT,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    out = done.stdout.decode()
    assert done.returncode == 0, out[-4000:] + done.stderr.decode()[-2000:]
    assert " passed" in out and " failed" not in out
