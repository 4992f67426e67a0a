"""What the backfill refusals say: a count() over the bound names the real bound and a fix of the
kind the declaration takes; a malformed MCP_JOBS_ENV is never mended into a new environment;
BACKFILL_APPLIED names its time in UTC."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from engine.backfill import BackfillAppliedError, BackfillRegistry, resolve_environment
from engine.errors import JobsError
from tests.backfill.support import declare


async def _refusal_of(registry: BackfillRegistry, **overrides: Any) -> JobsError:
    definition = declare(registry, **overrides)
    with pytest.raises(JobsError) as raised:
        rows = await definition.count_rows()
        sample = await definition.read_batch(None, 10)
        for row in sample:
            definition.key_of(row)
        raise AssertionError(f"not refused: {rows}, {sample}")
    return raised.value


@pytest.mark.parametrize("value", [10**30, -1, 2.5])
async def test_a_count_out_of_bounds_names_the_bound_and_a_fix_for_the_function(
    backfill_registry: BackfillRegistry, value: object
) -> None:
    async def count() -> Any:
        return value

    refused = await _refusal_of(backfill_registry, name="huge", count=count)

    assert refused.code == "BACKFILL_DECLARATION_INVALID"
    assert f"a whole number from 0 to {sys.maxsize}" in refused.cause
    assert "≥" not in refused.cause  # 10**30 is a whole number ≥ 0: that bound was not the one
    assert refused.fix == (
        f"backfill(name='huge', count=<an async def returning a whole number from 0 to "
        f"{sys.maxsize}>)"
    )


async def test_a_read_or_key_refused_gets_a_fix_for_the_function(
    backfill_registry: BackfillRegistry,
) -> None:
    async def read_text(after: object, limit: int) -> Any:
        return "rows"

    async def read_row(after: object, limit: int) -> Any:
        return [{"id": {1, 2}}]

    async def one() -> int:
        return 1

    refused = await _refusal_of(backfill_registry, name="text", count=one, read=read_text)
    assert refused.fix == "backfill(name='text', read=<an async def returning a list of rows>)"
    refused = await _refusal_of(backfill_registry, name="sets", count=one, read=read_row)
    assert refused.fix.startswith("backfill(name='sets', key=<a function returning a JSON value")


@pytest.mark.parametrize("value", ["prod uction", "prod/uction", "Prod Uction"])
def test_a_malformed_environment_is_mended_only_to_one_the_declarations_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    declared = BackfillRegistry()
    declare(declared, name="prod_only", environments=("production", "staging"))
    monkeypatch.setenv("MCP_JOBS_ENV", value)

    with pytest.raises(JobsError) as mended:
        resolve_environment(declared=declared)
    assert mended.value.code == "INVALID_ARGUMENT"
    assert mended.value.fix == "export MCP_JOBS_ENV=production"
    assert "production, staging" in mended.value.cause

    with pytest.raises(JobsError) as unset:
        resolve_environment(declared=BackfillRegistry())
    assert unset.value.fix == "unset MCP_JOBS_ENV"
    ran = subprocess.run(
        ["bash", "-c", f"{unset.value.fix} && echo ${{MCP_JOBS_ENV-unset}}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert ran.stdout.strip() == "unset"


def test_a_malformed_environment_near_no_declared_one_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared = BackfillRegistry()
    declare(declared, name="prod_only", environments=("production",))
    monkeypatch.setenv("MCP_JOBS_ENV", "qa env")

    with pytest.raises(JobsError) as refused:
        resolve_environment(declared=declared)
    assert refused.value.fix == "unset MCP_JOBS_ENV"


def test_backfill_applied_names_its_time_in_utc() -> None:
    refused = BackfillAppliedError("mark_done", "development", "run1", 1_796_528_038_509)

    assert "at 2026-12-06T03:33:58.509Z" in refused.cause
    assert "epoch" not in refused.cause and "1796528038509" not in refused.cause
    assert refused.details is not None and refused.details["completed_at"] == 1_796_528_038_509
