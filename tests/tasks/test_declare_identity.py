"""What a second declaration under a taken task name is: the same module imported again is
accepted; a second task (a copied block, another lambda) is TASK_NAME_TAKEN."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import JobRegistry
from engine.errors import JobsError
from engine.tasks import task, tasks_of

APP = """
from engine.tasks import task
from tests.tasks.test_declare_identity import SHARED

task(name="nightly", cron="0 2 * * *", tz="UTC", enqueue=lambda at: [("billing", {})],
     registry=SHARED)
"""

SHARED = JobRegistry()


@pytest.fixture
def app_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("identity_app", None)
        tasks_of(SHARED).remove("nightly")


def test_importing_the_declaring_module_again_is_a_reimport(app_dir: Path) -> None:
    (app_dir / "identity_app.py").write_text(APP)
    importlib.import_module("identity_app")
    sys.modules.pop("identity_app")
    importlib.import_module("identity_app")  # a fresh module object runs the same lines again
    importlib.reload(sys.modules["identity_app"])
    assert tasks_of(SHARED).names() == ["nightly"]


def test_a_copied_block_with_another_lambda_is_a_second_task(registry: JobRegistry) -> None:
    # The README's own form, copied: every lambda of a module has the qualname `<lambda>`.
    task(
        name="nightly",
        cron="0 2 * * *",
        tz="UTC",
        enqueue=lambda at: [("billing", {})],
        registry=registry,
    )
    with pytest.raises(JobsError) as caught:
        task(
            name="nightly",
            cron="0 2 * * *",
            tz="UTC",
            enqueue=lambda at: [("reports", {})],
            registry=registry,
        )
    assert caught.value.code == "TASK_NAME_TAKEN" and not caught.value.retryable
    first, second = caught.value.details["first"], caught.value.details["second"]  # type: ignore[index]
    assert first != second and "test_declare_identity.py:" in second
    (kept,) = tasks_of(registry)
    assert kept.enqueue(0) == [("billing", {})]  # the first task is not lost


def test_one_function_declared_twice_under_one_name_is_a_second_task(
    registry: JobRegistry,
) -> None:
    def both(at: int) -> list[object]:
        return []

    for _ in range(2):  # one call run again, as a re-import runs it: one declaration
        task(name="nightly", cron="0 2 * * *", tz="UTC", enqueue=both, registry=registry)
    with pytest.raises(JobsError) as caught:
        task(name="nightly", cron="0 2 * * *", tz="UTC", enqueue=both, registry=registry)
    assert caught.value.code == "TASK_NAME_TAKEN"


@pytest.mark.parametrize("name", ["\u200b", "\u2060", "a\u200bb", "\u00ad", "nightly\u200e"])
def test_a_name_holding_an_invisible_character_is_refused(registry: JobRegistry, name: str) -> None:
    with pytest.raises(JobsError) as caught:
        task(name=name, cron="0 2 * * *", tz="UTC", enqueue=lambda at: [], registry=registry)
    assert caught.value.code == "TASK_DECLARATION_INVALID"
    assert "\u200b" not in caught.value.fix and caught.value.fix.startswith('task(name="')
    assert len(tasks_of(registry)) == 0
