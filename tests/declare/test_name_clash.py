"""Two jobs declared under one name in one registry: the second is refused (JOB_NAME_TAKEN)
naming both declaration sites, and the first is kept. The same declaration run again (a module
imported again) is one job, as for cron tasks (engine/tasks/declare.py)."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, job
from engine.errors import JobsError

SHARED = JobRegistry()

APP = """
from pydantic import BaseModel
from engine import JobContext, job
from tests.declare.test_name_clash import SHARED

class Mail(BaseModel):
    to: str

@job(idempotency_key=lambda i: i.to, registry=SHARED)
async def send_email(input: Mail, ctx: JobContext) -> str:
    return "{which}"
"""


class Mail(BaseModel):
    to: str


@pytest.fixture
def app_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for module in ("clash_app", "clash_other"):
            sys.modules.pop(module, None)
        SHARED.remove("send_email")


def test_importing_the_declaring_module_again_is_one_job(app_dir: Path) -> None:
    (app_dir / "clash_app.py").write_text(APP.format(which="first"))
    importlib.import_module("clash_app")
    sys.modules.pop("clash_app")
    importlib.import_module("clash_app")  # a fresh module object runs the same lines again
    importlib.reload(sys.modules["clash_app"])
    assert SHARED.names() == ["send_email"]


def test_one_name_in_two_modules_is_refused_naming_both(app_dir: Path) -> None:
    (app_dir / "clash_app.py").write_text(APP.format(which="first"))
    (app_dir / "clash_other.py").write_text(APP.format(which="second"))
    importlib.import_module("clash_app")
    with pytest.raises(JobsError) as raised:
        importlib.import_module("clash_other")
    error = raised.value
    assert error.code == "JOB_NAME_TAKEN" and not error.retryable
    assert "clash_app.py:" in error.cause and "clash_other.py:" in error.cause
    assert SHARED.require("send_email").fn.__module__ == "clash_app"


def test_a_copied_block_in_one_module_is_a_second_job(registry: JobRegistry) -> None:
    # Same module, same function name: the qualified names agree, the lines do not.
    @job(idempotency_key=lambda i: i.to, registry=registry)
    async def send_email(input: Mail, ctx: JobContext) -> str:
        return "first"

    first = send_email
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: i.to, registry=registry)
        async def send_email(input: Mail, ctx: JobContext) -> str:
            return "second"

    error = raised.value
    assert error.code == "JOB_NAME_TAKEN"
    first_site, second_site = error.details["first"], error.details["second"]  # type: ignore[index]
    assert first_site != second_site and "test_name_clash.py:" in second_site
    assert registry.require("send_email") is first
    # The fix: the same declaration under a name of its own, which then declares.
    call = ast.parse(error.fix.removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call) and not call.args
    (name,) = [k.value for k in call.keywords if k.arg == "name"]
    renamed = ast.literal_eval(name)
    assert renamed != "send_email"

    @job(idempotency_key=lambda i: i.to, name=renamed, registry=registry)
    async def send_email_again(input: Mail, ctx: JobContext) -> str:
        return "second"

    assert registry.names() == sorted(["send_email", renamed])


def test_one_declaration_run_twice_is_one_job(registry: JobRegistry) -> None:
    def declare() -> None:
        @job(idempotency_key=lambda i: i.to, registry=registry)
        async def send_email(input: Mail, ctx: JobContext) -> None:
            return None

    declare()
    declare()
    assert registry.names() == ["send_email"]
