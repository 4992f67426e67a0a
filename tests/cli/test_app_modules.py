"""`--app` names: one `import` could never take is INVALID_ARGUMENT with the command mended to
the module meant (a file's path, `module:attribute`, a near name beside the project), and no
fix line runs a word of a hostile name as a command; the installed `mcp-jobs` finds an app
module in the directory it runs from, as `python -m` does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_jobs.cli.entry import main
from tests.support.fix_lines import BIN, command_words, run_fix

COMMAND_SECONDS = 60


def _run(argv: list[str], cwd: Path, **env: str) -> tuple[int, dict[str, Any]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    done = subprocess.run(
        argv, cwd=cwd, env=clean | env, capture_output=True, text=True, timeout=COMMAND_SECONDS
    )
    envelope: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, envelope


def _jobs_ls(app: str, cwd: Path, **env: str) -> tuple[int, dict[str, Any]]:
    argv = [str(BIN / "mcp-jobs"), "jobs", "ls", "--database-url", "memory://", "--json"]
    return _run([*argv, *(["--app", app] if app else [])], cwd, **env)


@pytest.mark.parametrize(
    "typed",
    [
        "examples/shop.py",
        "./examples/shop.py",
        "examples.shop:jobs",
        "examples/shop/__init__.py",  # a package's file: the package
        "examples/shop/",
    ],
)
def test_a_path_or_an_attribute_is_mended_to_the_module(typed: str, tmp_path: Path) -> None:
    code, envelope = _jobs_ls(typed, tmp_path)
    error = envelope["error"]
    assert (code, error["code"], error["retryable"]) == (1, "INVALID_ARGUMENT", False)
    assert f"app={typed!r} is not accepted" in error["cause"]
    assert re.search(r"--app examples\.shop( |$)", error["fix"]), error["fix"]
    assert json.loads(run_fix(error["fix"] + " --json"))["ok"] is True


def test_a_name_from_the_environment_is_mended_by_an_export(tmp_path: Path) -> None:
    code, envelope = _jobs_ls("", tmp_path, MCP_JOBS_APP="examples.shop:jobs")
    assert code == 1 and envelope["error"]["fix"] == "export MCP_JOBS_APP=examples.shop"


def test_no_fix_line_runs_a_word_of_a_hostile_name(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = f'x"; touch {marker}; "'
    code, envelope = _jobs_ls(hostile, tmp_path)
    assert code == 1 and envelope["error"]["code"] == "INVALID_ARGUMENT"
    run_fix(envelope["error"]["fix"])
    assert not marker.exists()


def test_an_app_beside_the_project_imports_and_a_near_name_is_mended(tmp_path: Path) -> None:
    (tmp_path / "myshop.py").write_text(
        "from pydantic import BaseModel\n"
        "from engine import job\n\n"
        "class Beside(BaseModel):\n"
        "    n: int\n\n"
        "@job(idempotency_key=lambda i: str(i.n))\n"
        "async def beside(i: Beside, ctx) -> None:\n"
        "    return None\n"
    )
    argv = [str(BIN / "mcp-jobs"), "jobs", "describe", "--database-url", "memory://", "--json"]
    code, envelope = _run([*argv, "--app", "myshop"], tmp_path)
    assert code == 0, envelope
    assert "beside" in json.dumps(envelope)
    code, envelope = _jobs_ls("myshp", tmp_path)
    error = envelope["error"]
    assert (code, error["code"]) == (1, "INVALID_ARGUMENT")
    assert "the nearest found is myshop" in error["cause"]
    assert "--app myshop" in error["fix"]


def test_a_module_that_fails_to_import_names_this_python_quoted(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    code, envelope = _jobs_ls("broken", tmp_path)
    error = envelope["error"]
    assert (code, error["code"]) == (1, "APP_IMPORT_FAILED")
    assert "RuntimeError: boom at import" in error["cause"]
    python, *rest = shlex.split(error["fix"])[-3:]
    # The mcp-jobs script's interpreter: this one, maybe by another name (python, python3).
    assert os.path.realpath(python) == os.path.realpath(sys.executable), python
    assert rest == ["-c", "import broken"]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("import json\n\nCONFIG = json.loads('{')\n", 3),  # raised in the standard library
        ("from engine import job\n\n\n@job(key=1)\nasync def f(a, b): ...\n", 4),
    ],
    ids=["in-a-library", "a-wrong-keyword"],
)
def test_an_import_failure_names_the_apps_own_line(tmp_path: Path, source: str, line: int) -> None:
    """The cause said only the exception: the line that raised it took running the import."""
    (tmp_path / "settings_app.py").write_text(source)
    code, envelope = _jobs_ls("settings_app", tmp_path)
    error = envelope["error"]
    assert (code, error["code"]) == (1, "APP_IMPORT_FAILED")
    where = f"(at {tmp_path / 'settings_app.py'} line {line})"
    assert error["cause"].endswith(where), error["cause"]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_long_running_command_mends_its_app_too(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve printed the refusal unmended (`export MCP_JOBS_APP=…`, which the flag overrides)."""
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    argv = [command, "--app", "examples.shop:jobs", "--database-url", "memory://"]
    assert main(argv) == 1
    fix = capsys.readouterr().err.split("fix:", 1)[1].strip()
    assert command_words(fix)[:4] == ["mcp-jobs", command, "--app", "examples.shop"]
