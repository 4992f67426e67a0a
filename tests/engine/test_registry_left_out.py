"""A client connected without the app's registry (`connect(url)` where the jobs are declared on
`shop.registry`): JOB_UNKNOWN said "registered: none" and its fix listed nothing. It now names
the registry that declares the job, and its fix connects with it, which runs as given."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from engine import connect
from engine.errors import JobsError

APP = """
from pydantic import BaseModel
from engine import JobRegistry, job

registry = JobRegistry()

class Order(BaseModel):
    order_id: int

@job(name="fulfil_left_out", idempotency_key=lambda i: str(i.order_id), registry=registry)
async def fulfil(data: Order, ctx) -> None: ...
"""


async def test_the_registry_left_out_is_named_and_the_fix_connects_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"left_out_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(module)
    url = f"sqlite:///{tmp_path}/jobs.db"
    try:
        jobs = await connect(url, migrate=True)  # the registry left out
        with pytest.raises(JobsError) as refused:
            await jobs.enqueue("fulfil_left_out", {"order_id": 1})
        await jobs.close()
        assert refused.value.code == "JOB_UNKNOWN"
        assert f"declared on {module}.registry" in refused.value.cause
        fix = refused.value.fix
        assert fix == f"import {module}; jobs = await connect({url!r}, registry={module}.registry)"
        scope: dict[str, object] = {"connect": connect}
        await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)
        again = scope["jobs"]
        await again.enqueue("fulfil_left_out", {"order_id": 1})  # type: ignore[attr-defined]
        await again.close()  # type: ignore[attr-defined]
    finally:
        sys.modules.pop(module, None)
