"""Task declarations that could never fire as meant are refused where they are written."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engine import JobRegistry
from engine.errors import JobsError
from engine.tasks import DEFAULT_MAX_CATCH_UP, TaskDefinition, task, tasks_of
from engine.tasks.declare import MAX_CATCH_UP


def nothing(at: int) -> list[object]:
    return []


def other(at: int) -> list[object]:
    return []


def declare(registry: JobRegistry, **overrides: object) -> TaskDefinition:
    fields: dict[str, object] = {
        "name": "nightly",
        "cron": "0 3 * * *",
        "tz": "Europe/Paris",
        "enqueue": nothing,
    }
    fields.update(overrides)
    return task(registry=registry, **fields)  # type: ignore[arg-type]


def test_a_valid_declaration_registers_under_the_job_registry(
    registry: JobRegistry,
) -> None:
    definition = declare(registry)
    assert tasks_of(registry).require("nightly") is definition
    assert definition.catch_up == "skip" and definition.max_catch_up == DEFAULT_MAX_CATCH_UP
    assert not definition.schedule.interval
    assert len(tasks_of(JobRegistry())) == 0  # another registry sees none of it


@pytest.mark.parametrize(
    "cron",
    [
        "61 * * * *",  # minute out of range
        "0 3 * *",  # four fields
        "0 3 * * * *",  # a seconds field
        "0 0 30 2 *",  # 30 February never happens
        "R 3 * * *",  # random: every process would fire at a different time
        "@reboot",  # not a schedule
        "every day",
        "",
        42,
    ],
)
def test_an_invalid_cron_expression_is_refused(registry: JobRegistry, cron: object) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, cron=cron)
    assert caught.value.code == "TASK_CRON_INVALID"
    assert "nightly" not in tasks_of(registry).names()


# "localtime" is a host's own link (another zone on each machine), "Factory" the tz database's
# placeholder for a zone not set, and a name in another case loads only on a case-blind disk.
@pytest.mark.parametrize(
    "tz", ["Mars/Olympus", "localtime", "Factory", "Europe/Londn", "", None, 5]
)
def test_a_zone_that_is_not_a_tz_database_name_is_refused(
    registry: JobRegistry, tz: object
) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, tz=tz)
    error = caught.value
    assert error.code == "TASK_TIMEZONE_INVALID"
    # The fix is one runnable line that lists the valid zones; the cause names a valid form.
    assert error.fix.startswith("python3 -c") and "available_timezones" in error.fix
    assert error.details is not None and "/" in error.details["example"]


# A zone written in another case, with blanks around it or a space for `_` stands for one
# zone: the fix is the declaration with it, in one hop, as TASK_CRON_INVALID's is.
@pytest.mark.parametrize(
    ("tz", "meant"),
    [
        ("utc", "UTC"),
        ("america/new_york", "America/New_York"),
        ("europe/london", "Europe/London"),
        ("EST5EDT ", "EST5EDT"),
        ("America/New York", "America/New_York"),
    ],
)
def test_a_zone_plainly_meant_is_the_fix(registry: JobRegistry, tz: str, meant: str) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, tz=tz)
    error = caught.value
    assert error.code == "TASK_TIMEZONE_INVALID"
    assert error.fix == f'task(name="nightly", tz="{meant}", ...)', error.fix
    assert declare(JobRegistry(), tz=meant).tz == meant


def test_the_fix_lists_exactly_the_zones_a_task_takes(
    registry: JobRegistry, tmp_path: Path
) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, tz="Mars/Olympus")
    fix = caught.value.fix
    # Run where Python is `python3` alone, as on Debian (exploreT: `python` was not found).
    (tmp_path / "python3").symlink_to(sys.executable)
    listed = subprocess.run(
        shlex.split(fix), capture_output=True, text=True, check=True, env={"PATH": str(tmp_path)}
    )
    names = listed.stdout.split()
    assert {"UTC", "GMT", "EST5EDT", "America/New_York"} <= set(names)
    assert "localtime" not in names and "Factory" not in names
    for name in names[::50]:  # every listed name is taken
        assert declare(JobRegistry(), tz=name).tz == name


@pytest.mark.parametrize(
    ("tz", "meant"),
    [("america/new york", "America/New_York"), ("utc", "UTC"), ("gmt", "GMT")],
)
def test_a_misspelled_zone_gets_the_real_id_suggested(
    registry: JobRegistry, tz: str, meant: str
) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, tz=tz)
    assert caught.value.code == "TASK_TIMEZONE_INVALID"
    assert caught.value.details is not None
    assert caught.value.details["suggestions"] == [meant]


# Every name of the tz database, by its exact name: Region/City ids, UTC, and the legacy names
# (links such as US/Eastern, rule zones such as EST5EDT, fixed ones such as EST) alike.
@pytest.mark.parametrize(
    "tz",
    [
        "UTC",
        "America/New_York",
        "Asia/Kolkata",
        "Etc/GMT+5",
        "GMT",
        "EST5EDT",
        "EST",
        "US/Eastern",
    ],
)
def test_every_tz_database_name_is_accepted(registry: JobRegistry, tz: str) -> None:
    assert declare(registry, tz=tz).tz == tz


@pytest.mark.parametrize(
    "value",
    # 10**9 was taken: after a year down, each round computed every missed minute of it.
    [0, -1, 0.5, 2.5, 10.0, float("nan"), float("inf"), True, False, "10", None, 10**9],
)
def test_max_catch_up_must_be_a_whole_number_of_at_least_one(
    registry: JobRegistry, value: object
) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, catch_up="all", max_catch_up=value)
    assert caught.value.code == "TASK_CATCH_UP_INVALID"
    assert f"a whole number from 1 to {MAX_CATCH_UP}" in caught.value.cause


def test_the_largest_catch_up_is_taken(registry: JobRegistry) -> None:
    assert declare(registry, catch_up="all", max_catch_up=MAX_CATCH_UP).max_catch_up == MAX_CATCH_UP


@pytest.mark.parametrize("policy", ["none", "latest", "", None, True])
def test_an_unknown_catch_up_policy_is_refused(registry: JobRegistry, policy: object) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, catch_up=policy)
    assert caught.value.code == "TASK_CATCH_UP_INVALID"


@pytest.mark.parametrize(
    ("field", "value"),
    # A name that cannot key an occurrence; a description that cannot be published (it was
    # taken, and every describe_jobs answer failed, INTERNAL, while it was registered).
    [("name", v) for v in ("", " nightly", "a:b", "two words", None, 3)]
    + [("description", v) for v in (5, ["x"], "a\x00b", "x" * 20_000)],
)
def test_a_declaration_field_that_cannot_work_is_refused(
    registry: JobRegistry, field: str, value: object
) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, **{field: value})
    assert caught.value.code == "TASK_DECLARATION_INVALID"
    assert caught.value.details is not None and caught.value.details["field"] == field


def test_an_enqueue_that_is_not_callable_is_refused(registry: JobRegistry) -> None:
    with pytest.raises(JobsError) as caught:
        declare(registry, enqueue=[("job", {})])
    assert caught.value.code == "TASK_DECLARATION_INVALID"


def test_two_tasks_under_one_name_are_refused(registry: JobRegistry) -> None:
    declare(registry)
    with pytest.raises(JobsError) as caught:
        declare(registry, enqueue=other)
    assert caught.value.code == "TASK_NAME_TAKEN"
    with pytest.raises(JobsError) as caught:
        declare(registry, cron="0 4 * * *")
    assert caught.value.code == "TASK_NAME_TAKEN"


def test_redeclaring_the_same_task_is_a_reimport_not_a_clash(
    registry: JobRegistry,
) -> None:
    declare(registry)
    again = declare(registry)
    assert tasks_of(registry).require("nightly") is again


def test_an_unknown_task_name_is_a_typed_error(registry: JobRegistry) -> None:
    declare(registry)
    with pytest.raises(JobsError) as caught:
        tasks_of(registry).require("weekly")
    assert caught.value.code == "TASK_UNKNOWN"


@pytest.mark.parametrize(
    ("cron", "expanded", "interval"),
    [
        ("@hourly", "0 * * * *", True),
        ("@daily", "0 0 * * *", False),
        ("@weekly", "0 0 * * 0", False),
        ("*/15 * * * *", "*/15 * * * *", True),
        ("30 2 * * *", "30 2 * * *", False),
        ("  0   3 * * mon-fri ", "0 3 * * mon-fri", False),
    ],
)
def test_aliases_expand_and_interval_tasks_are_recognised(
    registry: JobRegistry, cron: str, expanded: str, interval: bool
) -> None:
    definition = declare(registry, cron=cron)
    assert definition.cron == expanded
    assert definition.schedule.interval is interval
