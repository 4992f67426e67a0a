"""What a cron expression may say: five fields (or an alias), each item a value, range or step
the field can mean. Refused otherwise (CronSyntaxError, TASK_CRON_INVALID at the declaration),
with the expression to write instead: the given one corrected when that is obvious (croniter's
reading of it, written plainly), else a `<field range>` slot where it is wrong.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from croniter import croniter

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# croniter's `R` picks a random time when the expression is parsed, so two schedulers would
# disagree on when the task fires. `fri`, `mar`, `apr` contain an r after a letter and are fine.
_RANDOM = re.compile(r"(?<![a-z])r")
# croniter's `H` takes its value from a hash of the task's name: no other cron has it, and a
# croniter hashing otherwise would move the task. No month or day name starts with an h.
_HASHED = re.compile(r"(?<![a-z])h")
# One item of a field: `*`, a value or a range (numbers, or month and day names), and a step.
_ITEM = re.compile(r"(?:\*|(?P<a>[0-9]+|[a-z]+)(?:-(?P<b>[0-9]+|[a-z]+))?)(?:/(?P<step>[0-9]+))?")


@dataclass(frozen=True)
class CronField:
    """One of the five fields: the values it takes, and the names it takes for them."""

    name: str
    low: int
    high: int
    accepts: str
    names: tuple[str, ...] = ()  # names[i] is the value `low + i` (day-of-week: sun is 0)

    @property
    def top(self) -> int:
        """The largest value written: 7 is Sunday again in the day-of-week field."""
        return 7 if self.name == "day-of-week" else self.high

    def slot(self) -> str:
        return f"<{self.name} {self.accepts}>"


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FIELDS = (
    CronField("minute", 0, 59, "0-59"),
    CronField("hour", 0, 23, "0-23"),
    CronField("day-of-month", 1, 31, "1-31"),
    CronField("month", 1, 12, "1-12 or jan-dec", _MONTHS),
    CronField("day-of-week", 0, 6, "0-6 or sun-sat", _DAYS),
)
# What to write when nothing of the expression can be kept: the five fields and their ranges.
CRON_TEMPLATE = " ".join(field.slot() for field in FIELDS)


class CronSyntaxError(ValueError):
    """Why an expression cannot be scheduled, and the expression to write instead (`fix_cron`:
    the given one corrected when `mended`, else with a `<field range>` slot where it is wrong);
    the declaration turns it into TASK_CRON_INVALID."""

    def __init__(
        self,
        reason: str,
        fix_cron: str = CRON_TEMPLATE,
        *,
        field: str | None = None,
        token: str | None = None,
        mended: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix_cron = fix_cron
        self.field = field
        self.token = token
        self.mended = mended


@dataclass(frozen=True)
class _Problem:
    """One item of a field that cannot mean what it says; `mend`: what to write instead, when
    that is obvious (the values croniter reads it as, written plainly)."""

    index: int
    token: str
    reason: str
    mend: str | None

    @property
    def field(self) -> CronField:
        return FIELDS[self.index]

    def said(self) -> str:
        return f'the {self.field.name} field\'s "{self.token}" {self.reason}'


def normalize_cron(expression: str, hash_id: bytes = b"") -> str:
    """The five-field form of `expression` (aliases expanded), or CronSyntaxError. `hash_id`:
    what croniter hashes an `H` with, so the fix of a refused one keeps its values."""
    text = " ".join(expression.split())
    if text.startswith("@"):
        expanded = ALIASES.get(text.lower())
        if expanded is None:
            known = ", ".join(ALIASES)
            meant = difflib.get_close_matches(text.lower(), list(ALIASES), n=1, cutoff=0.6)
            raise CronSyntaxError(
                f"{text} is not a supported alias (supported: {known})",
                meant[0] if meant else CRON_TEMPLATE,
                mended=bool(meant),
            )
        return expanded
    fields = text.split(" ") if text else []
    if len(fields) != len(FIELDS):
        raise CronSyntaxError(
            f"it has {len(fields)} fields; a cron expression here has exactly 5 "
            "(minute hour day-of-month month day-of-week)"
        )
    _check_fields(fields, hash_id)
    return text


def _check_fields(fields: list[str], hash_id: bytes) -> None:
    """CronSyntaxError naming every item that cannot mean what it says, with `fields` mended
    where that is obvious, else with a slot in the first field that is not."""
    problems: list[_Problem] = []
    written = list(fields)
    for index, text in enumerate(fields):
        kept: list[str] = []
        for item in text.split(","):
            problem = _judge(index, item, hash_id)
            if problem is not None:
                problems.append(problem)
            kept.append(item if problem is None or problem.mend is None else problem.mend)
        # An item mended to every value makes the whole field every value.
        written[index] = "*" if "*" in kept else ",".join(kept)
    if not problems:
        return
    first = problems[0]
    reason = "; ".join(p.said() for p in problems)
    stuck = next((p for p in problems if p.mend is None), None)
    mended = stuck is None and _schedulable(" ".join(written), hash_id)
    if not mended:
        slotted = stuck if stuck is not None else first
        written[slotted.index] = slotted.field.slot()
    raise CronSyntaxError(
        reason, " ".join(written), field=first.field.name, token=first.token, mended=mended
    )


def _judge(index: int, item: str, hash_id: bytes) -> _Problem | None:
    """Why `item` of field `index` cannot mean what it says, or None (it does, or it is one of
    croniter's own forms — L, W, # — that croniter judges)."""
    field = FIELDS[index]
    low = item.lower()

    def problem(reason: str, mend: str | None = None) -> _Problem:
        return _Problem(index, item, reason, mend)

    if _RANDOM.search(low):
        return problem("is random (R): croniter picks its value when the expression is parsed, "
                       "so every process fires at a different time")  # fmt: skip
    if _HASHED.search(low):
        mend = _expanded(index, item, hash_id)
        shown = f" (for this task, {mend})" if mend is not None else ""
        return problem(
            f"is hashed (H): croniter derives its value{shown} from a hash of the task's name, "
            "which no other cron implementation does and another croniter may do otherwise; "
            "write the value",
            mend,
        )
    found = _ITEM.fullmatch(low)
    if low == "?" or found is None:
        return None
    a, b, step = found.group("a"), found.group("b"), found.group("step")
    values: list[int] = []
    for part in (a, b):
        if part is None:
            continue
        value = _value(field, part)
        if value is None:
            if part.isalpha() and not field.names:
                return None  # croniter's own forms (L, W)
            return problem(f"is not a value the field takes ({field.accepts})")
        values.append(value)
    if a is None:
        first, last = field.low, field.high
    elif b is None:
        first = values[0]
        last = field.high if step is not None else first  # `5/10` steps from 5 to the end
    else:
        first, last = values
        if field.name == "day-of-week" and first == 7:
            first = 0  # 7-2 is Sunday to Tuesday
    if b is not None and first > last:
        mend = _expanded(index, item, hash_id)
        wraps = f" ({mend})" if mend is not None else ""
        return problem(
            f"is a reversed range: croniter wraps it around{wraps} and other crons refuse it; "
            f"write its values in ascending order ({b}-{a} if that range was meant)",
            mend,
        )
    if step is not None:
        span = last - first
        if int(step) == 0:
            return problem("has a step of 0, which never advances: a step is at least 1")
        if int(step) > span:
            mend = _expanded(index, item, hash_id)
            only = f", so it matches only {field.name} {mend}" if mend is not None else ""
            if span <= 0:
                return problem(f"steps from {first}, the field's last value{only}", mend)
            spanned = "the field spans" if a is None else f"{first}-{last} spans"
            return problem(
                f"has a step of {step}, more than the {span} {spanned}{only}; a step there is "
                f"at most {span}",
                mend,
            )
    return None


def _value(field: CronField, text: str) -> int | None:
    """The value `text` names in `field`, or None when it names none there."""
    if text.isdigit():
        value = int(text)
        return value if field.low <= value <= field.top else None
    if text in field.names:
        return field.low + field.names.index(text)
    return None


def _expanded(index: int, item: str, hash_id: bytes) -> str | None:
    """`item` written plainly: the values croniter reads it as in field `index`."""
    probe = ["0", "0", "*", "*", "*"]
    probe[index] = item
    try:
        read = walk_from(" ".join(probe), datetime(2000, 1, 1), hash_id=hash_id).expanded[index]
    except (ValueError, KeyError, TypeError):
        return None
    field = FIELDS[index]
    if "*" in read:
        return "*"
    # Sunday is read as 0 or 7 in the day-of-week field.
    wrap = 7 if field.name == "day-of-week" else field.high + 1
    values = sorted({int(v) % wrap for v in read})
    if values == list(range(field.low, field.high + 1)):
        return "*"
    steps = {b - a for a, b in itertools.pairwise(values)}
    if len(values) >= 3 and len(steps) == 1 and min(steps) > 1:
        return f"{values[0]}-{values[-1]}/{min(steps)}"
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _schedulable(cron: str, hash_id: bytes) -> bool:
    """Whether `cron` passes these checks and croniter finds a date it matches."""
    try:
        normalize_cron(cron, hash_id)
        walk_from(cron, datetime(2000, 1, 1), hash_id=hash_id).get_next(datetime)
    except (ValueError, KeyError, TypeError):  # CronSyntaxError is a ValueError
        return False
    return True


def walk_from(cron: str, start: datetime, **options: Any) -> croniter:
    """croniter over `cron` from `start`. Imported here, when the first task is declared: a
    worker whose process declares none does not carry croniter and dateutil (~1.4 MB)."""
    from croniter import croniter

    return croniter(cron, start, **options)
