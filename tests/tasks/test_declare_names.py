"""A task name is bounded where it is declared (it becomes the `enqueued_by` of every job the
task enqueues), and a refused name gets a fix that is a call with one `name=`."""

from __future__ import annotations

import ast

import pytest

from engine import JobRegistry
from engine.bounds import MAX_ACTOR_BYTES
from engine.errors import JobsError
from engine.tasks import task, tasks_of
from engine.tasks.declare import TASK_ACTOR


def nothing(at: int) -> list[object]:
    return []


def declare(registry: JobRegistry, name: object) -> None:
    task(name=name, cron="0 3 * * *", tz="UTC", enqueue=nothing, registry=registry)  # type: ignore[arg-type]


def keywords(fix: str) -> list[str]:
    """The keywords of the call `fix` is (its trailing `...`, "as before", left out)."""
    call = ast.parse(fix.replace(", ...)", ")"), mode="eval").body
    assert isinstance(call, ast.Call)
    return [k.arg or "**" for k in call.keywords]


def test_the_longest_name_whose_jobs_can_be_enqueued_is_taken(registry: JobRegistry) -> None:
    name = "n" * (MAX_ACTOR_BYTES - len(TASK_ACTOR))
    declare(registry, name)
    assert tasks_of(registry).require(name).name == name


@pytest.mark.parametrize(
    ("name", "mended"),
    [
        ("n" * (MAX_ACTOR_BYTES - len(TASK_ACTOR) + 1), "n" * (MAX_ACTOR_BYTES - len(TASK_ACTOR))),
        ("a b", "a_b"),
        ("a:b", "a_b"),
        (" nightly", "nightly"),
        ("", "nightly"),
        (5, "nightly"),
        ("a\x00b", "a_b"),
    ],
)
def test_a_refused_name_gets_a_fix_with_one_name(
    registry: JobRegistry, name: object, mended: str
) -> None:
    with pytest.raises(JobsError) as raised:
        declare(registry, name)
    error = raised.value
    assert error.code == "TASK_DECLARATION_INVALID" and not error.retryable
    assert keywords(error.fix) == ["name"]
    assert error.fix == f'task(name="{mended}", ...)'
    assert len(tasks_of(registry)) == 0
