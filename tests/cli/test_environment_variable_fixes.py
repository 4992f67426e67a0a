"""A refused environment variable's fix at the terminal is the value meant, set where it came
from: `MCP_JOBS_ENV='prod uction'` is mended to the environment the app declares (the fix was
`unset MCP_JOBS_ENV`: the command checked it before importing the app), `MCP_JOBS_ENV=Staging`
to `export MCP_JOBS_ENV=staging` (it was `pass environment="staging"`, no line a shell runs),
and a retention written in words to that duration (`'90 days'`: 90d, where the fix was the
30d default and running it deleted the dead jobs between 30 and 90 days old)."""

from __future__ import annotations

import itertools
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.backfill import default_backfills
from tests.cli.databases import migrated
from tests.cli.test_cli import cli, cli_json, shop

__all__ = ["shop"]  # the fixture, used by name below

_APPS = itertools.count()


@pytest.fixture
def env_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """An app module declaring one backfill for production and staging; (module, backfill)."""
    n = next(_APPS)
    module, name = f"envfix_app_{n}", f"envfix_{n}"
    (tmp_path / f"{module}.py").write_text(
        "from engine.backfill import backfill\n"
        "async def count(): return 0\n"
        "async def read(after, limit): return []\n"
        "async def handle(rows): return None\n"
        f"backfill(name={name!r}, count=count, read=read, key=lambda r: r, handle=handle,\n"
        "         environments=('production', 'staging'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield module, name
    finally:
        default_backfills.remove(name)
        sys.modules.pop(module, None)


def _exported(fix: str, variable: str) -> str:
    """The value `fix`, an `export VARIABLE=value` line, sets."""
    words = shlex.split(fix)
    assert words[0] == "export" and words[1].startswith(f"{variable}="), fix
    return words[1].split("=", 1)[1]


@pytest.mark.parametrize(
    ("typed", "meant"), [("prod uction", "production"), ("stag ing", "staging")]
)
def test_a_malformed_environment_is_mended_to_the_one_the_app_declares(
    shop: str,
    env_app: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    typed: str,
    meant: str,
) -> None:
    module, name = env_app
    db = ("--database-url", migrated(shop), "--app", module)
    monkeypatch.setenv("MCP_JOBS_ENV", typed)
    code, refused = cli_json(capsys, "backfill", name, *db)
    assert code == 1
    error = refused["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["details"]["argument"] == "MCP_JOBS_ENV"
    assert error["fix"] == f"export MCP_JOBS_ENV={meant}"
    # The fix runs: the same command is no longer refused for its environment.
    monkeypatch.setenv("MCP_JOBS_ENV", _exported(error["fix"], "MCP_JOBS_ENV"))
    code, plan = cli_json(capsys, "backfill", name, *db)
    assert code == 0 and plan["plan"]["environment"] == meant, plan


def test_an_environment_in_another_case_is_mended_as_the_variable(
    shop: str,
    env_app: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, name = env_app
    db = ("--database-url", migrated(shop), "--app", module)
    monkeypatch.setenv("MCP_JOBS_ENV", "Staging")
    code, _, err = cli(capsys, "backfill", name, *db)
    assert code == 1
    assert "MCP_JOBS_ENV='Staging' is not accepted" in err
    assert err.split("fix:", 1)[1].strip() == "export MCP_JOBS_ENV=staging"
    code, refused = cli_json(capsys, "backfill", name, *db)
    assert refused["error"]["details"]["argument"] == "MCP_JOBS_ENV"
    monkeypatch.setenv("MCP_JOBS_ENV", _exported(refused["error"]["fix"], "MCP_JOBS_ENV"))
    code, plan = cli_json(capsys, "backfill", name, *db)
    assert code == 0 and plan["plan"]["environment"] == "staging", plan


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("90 days", "90d"), ("2 weeks", "14d"), ("12 hours", "12h"), ("3days", "3d")],
)
def test_a_retention_in_words_is_mended_to_that_duration(
    shop: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    typed: str,
    meant: str,
) -> None:
    db = ("--database-url", migrated(shop))
    monkeypatch.setenv("MCP_JOBS_RETAIN_DEAD", typed)
    code, refused = cli_json(capsys, "db", "prune", "--dry-run", *db)
    assert code == 1 and refused["error"]["code"] == "RETENTION_SETTING_INVALID"
    assert refused["error"]["fix"] == f"export MCP_JOBS_RETAIN_DEAD={meant}"
    monkeypatch.setenv(
        "MCP_JOBS_RETAIN_DEAD", _exported(refused["error"]["fix"], "MCP_JOBS_RETAIN_DEAD")
    )
    code, plan = cli_json(capsys, "db", "prune", "--dry-run", *db)
    assert code == 0 and plan["mode"] == "dry_run"


def test_a_worker_refuses_a_retention_in_words_with_that_duration(
    shop: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_JOBS_RETAIN_DONE", "3 days")
    code, _, err = cli(capsys, "worker", "--queues", "*", "--database-url", shop)
    assert code == 1 and "RETENTION_SETTING_INVALID" in err
    assert err.split("fix:", 1)[1].strip() == "export MCP_JOBS_RETAIN_DONE=3d"


def test_a_retention_that_is_no_duration_is_mended_to_keep_every_row(
    shop: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default (30d) would prune what a value no one can read meant to keep."""
    monkeypatch.setenv("MCP_JOBS_RETAIN_DEAD", "a quarter")
    code, refused = cli_json(capsys, "db", "prune", "--dry-run", "--database-url", migrated(shop))
    assert code == 1
    assert refused["error"]["fix"] == "export MCP_JOBS_RETAIN_DEAD=forever"
    assert "stands for no duration" in refused["error"]["cause"]
