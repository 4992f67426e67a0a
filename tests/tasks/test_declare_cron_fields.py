"""A cron field that cannot mean what it says is refused at `task(...)`: a step larger than the
field's span (`*/1000` fires only at minute 0), a reversed range (croniter wraps it, other crons
refuse it) and croniter's `H` (its value is croniter's hash of the task's name). The refusal
names the field and the token, and its fix is the given expression corrected, or, where nothing
is obvious, the given expression with a slot saying what the wrong field accepts."""

from __future__ import annotations

from datetime import datetime

import pytest
from croniter import croniter

from engine import JobRegistry
from engine.errors import JobsError
from engine.tasks import TaskDefinition, task

NAME = "nightly"


def nothing(at: int) -> list[object]:
    return []


def declare(registry: JobRegistry, cron: object) -> TaskDefinition:
    return task(name=NAME, cron=cron, tz="UTC", enqueue=nothing, registry=registry)  # type: ignore[arg-type]


def refusal(registry: JobRegistry, cron: object) -> JobsError:
    with pytest.raises(JobsError) as caught:
        declare(registry, cron)
    error = caught.value
    assert error.code == "TASK_CRON_INVALID"
    assert not error.retryable
    return error


def fixed_cron(fix: str) -> str:
    """The cron expression a fix line declares."""
    prefix = f'task(name="{NAME}", cron="'
    assert fix.startswith(prefix) and fix.endswith('", ...)'), fix
    return fix[len(prefix) : -len('", ...)')]


@pytest.mark.parametrize(
    ("cron", "field", "token", "mended", "said"),
    [
        # A step past the field's span matches only the field's first value.
        ("*/1000 * * * *", "minute", "*/1000", "0 * * * *", "at most 59"),
        ("*/60 * * * *", "minute", "*/60", "0 * * * *", "at most 59"),
        ("0-10/20 * * * *", "minute", "0-10/20", "0 * * * *", "at most 10"),
        ("0 */24 * * *", "hour", "*/24", "0 0 * * *", "at most 23"),
        ("0 0 */31 * *", "day-of-month", "*/31", "0 0 1 * *", "at most 30"),
        ("0 0 1 */12 *", "month", "*/12", "0 0 1 1 *", "at most 11"),
        ("0 0 * * */7", "day-of-week", "*/7", "0 0 * * 0", "at most 6"),
        # A reversed range: written out as the ascending values croniter wrapped it to.
        ("1-0 * * * *", "minute", "1-0", "* * * * *", "1-0"),
        ("0 22-2 * * *", "hour", "22-2", "0 0-2,22-23 * * *", "2-22"),
        ("0 9 * * 5-1", "day-of-week", "5-1", "0 9 * * 0-1,5-6", "1-5"),
        ("0 9 * * fri-mon", "day-of-week", "fri-mon", "0 9 * * 0-1,5-6", "mon-fri"),
        ("0 9 * * 1-5,6-0", "day-of-week", "6-0", "0 9 * * 1-5,0,6", "0-6"),
    ],
)
def test_a_field_that_cannot_mean_what_it_says_is_refused_with_a_derived_fix(
    registry: JobRegistry, cron: str, field: str, token: str, mended: str, said: str
) -> None:
    error = refusal(registry, cron)
    assert error.details is not None
    assert (error.details["field"], error.details["token"]) == (field, token)
    assert field in error.cause and token in error.cause and said in error.cause
    assert fixed_cron(error.fix) == mended
    # The fix is taken as given.
    assert declare(JobRegistry(), mended).cron == mended


@pytest.mark.parametrize("cron", ["H * * * *", "H/15 * * * *", "0 H(0-5) * * *", "0 0 * * h"])
def test_a_hashed_field_is_refused_with_the_values_croniter_gave_this_task(
    registry: JobRegistry, cron: str
) -> None:
    error = refusal(registry, cron)
    assert error.details is not None and error.details["token"].lower().startswith("h")
    mended = fixed_cron(error.fix)
    assert "h" not in mended.lower()
    # The fix fires when the hashed expression fired for this task: nothing moves.
    start = datetime(2026, 1, 1)
    hashed = croniter(cron, start, hash_id=NAME.encode())
    plain = croniter(mended, start)
    assert [hashed.get_next(datetime) for _ in range(20)] == [
        plain.get_next(datetime) for _ in range(20)
    ]
    declare(JobRegistry(), mended)


@pytest.mark.parametrize(
    ("cron", "field", "fix"),
    [
        ("61 * * * *", "minute", "<minute 0-59> * * * *"),
        ("0 3 32 * *", "day-of-month", "0 3 <day-of-month 1-31> * *"),
        ("0 25 * * *", "hour", "0 <hour 0-23> * * *"),
        ("0 0 1 13 *", "month", "0 0 1 <month 1-12 or jan-dec> *"),
        ("0 0 * * 8", "day-of-week", "0 0 * * <day-of-week 0-6 or sun-sat>"),
        ("R 3 * * *", "minute", "<minute 0-59> 3 * * *"),
        ("*/0 * * * *", "minute", "<minute 0-59> * * * *"),
    ],
)
def test_without_an_obvious_correction_the_fix_names_the_field_and_its_range(
    registry: JobRegistry, cron: str, field: str, fix: str
) -> None:
    error = refusal(registry, cron)
    assert error.details is not None and error.details["field"] == field
    assert field in error.cause
    assert fixed_cron(error.fix) == fix


@pytest.mark.parametrize("cron", ["every day", "0 3 * *", "0 3 * * * *", "@reboot", "", 42])
def test_an_expression_of_no_known_shape_gets_the_five_fields_and_their_ranges(
    registry: JobRegistry, cron: object
) -> None:
    error = refusal(registry, cron)
    assert fixed_cron(error.fix) == (
        "<minute 0-59> <hour 0-23> <day-of-month 1-31> <month 1-12 or jan-dec> "
        "<day-of-week 0-6 or sun-sat>"
    )


def test_a_misspelled_alias_gets_the_alias_meant(registry: JobRegistry) -> None:
    error = refusal(registry, "@dialy")
    assert fixed_cron(error.fix) == "@daily"


@pytest.mark.parametrize(
    ("cron", "meant"), [("0 0 30 2 *", "0 0 L 2 *"), ("5 4 31 apr,jun *", "5 4 L apr,jun *")]
)
def test_a_date_that_never_comes_is_mended_to_the_months_last_day(
    registry: JobRegistry, cron: str, meant: str
) -> None:
    error = refusal(registry, cron)
    assert error.details is not None and error.details["field"] == "day-of-month"
    assert "failed to find" not in error.cause  # croniter's own words are not the reader's
    assert fixed_cron(error.fix) == meant
    task(name="mended", cron=meant, tz="UTC", enqueue=lambda ms: None, registry=registry)


@pytest.mark.parametrize(
    "cron",
    [
        "*/15 * * * *",
        "*/45 * * * *",
        "0 9-17 * * 1-5",
        "30 2 * * *",
        "@daily",
        "@HOURLY",
        "0 0 * * 0-7",
        "0 0 * * 7",
        "0 0 * * mon-fri",
        "0 0 * jan-mar *",
        "0 0 L * *",
        "0 0 * * 5#2",
        "59 23 31 12 *",
        "0 0 ? * thu",
        "5/10 * * * *",
        "0 */12 * * *",
        "0 0 */30 * *",
        "0 0 1 */11 *",
        "0 0 * * */6",
    ],
)
def test_common_expressions_are_still_taken(registry: JobRegistry, cron: str) -> None:
    declare(registry, cron)
