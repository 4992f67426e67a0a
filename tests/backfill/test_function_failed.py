"""A dry run or a write whose check calls the declaration's own `requires`, `count`, `read` or
`key` and gets an exception answers BACKFILL_FUNCTION_FAILED naming the call and what it raised
(not INTERNAL, "the server failed"), and its fix makes the same call again from any directory."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from engine.backfill import BackfillRegistry, Backfills, backfill
from engine.errors import JobsError

APP = """
async def count():
    return 3

async def broken_count():
    raise RuntimeError("count broke")

async def read(after, limit):
    return [{"id": 1}]

async def broken_read(after, limit):
    raise RuntimeError(f"no such column nam (after={after}, limit={limit})")

async def handle(rows):
    return None

async def broken_requires():
    raise ConnectionError("app database down")
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The app module, imported as a CLI run from its directory imports it."""
    (tmp_path / "exa_bf_app.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    yield importlib.import_module("exa_bf_app")
    sys.modules.pop("exa_bf_app", None)


def _run_elsewhere(fix: str, where: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", fix], cwd=where, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.drivers("memory", reason="the refusal comes before anything is stored")
@pytest.mark.parametrize(
    ("broken", "call", "raised"),
    [
        ({"read": "broken_read"}, "read(None, 3)", "RuntimeError: no such column nam"),
        ({"count": "broken_count"}, "count()", "RuntimeError: count broke"),
        ({"requires": "broken_requires"}, "requires()", "ConnectionError: app database down"),
    ],
)
@pytest.mark.parametrize("write", [False, True])
async def test_a_function_that_raises_is_named_with_a_line_that_calls_it_again(
    jobs: object,
    app: ModuleType,
    tmp_path_factory: pytest.TempPathFactory,
    broken: dict[str, str],
    call: str,
    raised: str,
    write: bool,
) -> None:
    registry = BackfillRegistry()
    functions = {"count": app.count, "read": app.read, "handle": app.handle}
    functions.update({field: getattr(app, fn) for field, fn in broken.items()})
    backfill(name="fill", key=lambda row: row["id"], batch_size=3, registry=registry, **functions)
    svc = Backfills(jobs, registry=registry, environment="development")  # type: ignore[arg-type]

    with pytest.raises(JobsError) as caught:
        await (svc.write("fill") if write else svc.dry_run("fill"))
    error = caught.value
    assert error.code == "BACKFILL_FUNCTION_FAILED" and not error.retryable
    kind, _, said = raised.partition(": ")
    assert f'backfill "fill" {call} raised {kind}' in error.cause and said in error.cause
    done = _run_elsewhere(error.fix, tmp_path_factory.mktemp("elsewhere"))
    assert raised in done.stderr, (error.fix, done.stderr)


@pytest.mark.drivers("memory", reason="the refusal comes before anything is stored")
async def test_a_key_that_raises_names_the_declaration_to_change(
    jobs: object, app: ModuleType
) -> None:
    registry = BackfillRegistry()
    backfill(
        name="fill",
        count=app.count,
        read=app.read,
        key=lambda row: row["idd"],
        handle=app.handle,
        registry=registry,
    )
    svc = Backfills(jobs, registry=registry, environment="development")  # type: ignore[arg-type]
    with pytest.raises(JobsError) as caught:
        await svc.dry_run("fill")
    assert caught.value.code == "BACKFILL_FUNCTION_FAILED"
    assert "key(row) raised KeyError" in caught.value.cause
    assert caught.value.fix.startswith('change key= of backfill(name="fill")'), caught.value.fix
