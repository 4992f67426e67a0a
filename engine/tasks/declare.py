"""`task(...)`: declaring a cron task, and the registry of a process's tasks.

A declaration is refused where it is written when it could never fire as meant: a cron
expression croniter cannot schedule or that cannot mean what it says (a step past its field's
span, a reversed range, croniter's random R and hashed H: engine/tasks/cron_syntax.py), a zone
that is not a tz database name, a catch-up policy that is not `skip`/`all`, or a `max_catch_up`
that is not a whole number ≥ 1 (zero, a fraction or a negative fires nothing ever, silently; NaN
and infinity are an unbounded burst nobody declared), or an enqueue function that cannot be called
with the occurrence alone.

Tasks live beside the jobs they enqueue: `task(registry=r)` files the task under the same
`JobRegistry` `@job(registry=r)` and `connect(registry=r)` use, so a client, a worker and
`describe_tasks(jobs)` all find it from `jobs.registry`.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import json
import linecache
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine import bounds
from engine.declare import (
    JobRegistry,
    default_registry,
    description_declared,
    one_argument,
    whole_declared,
)
from engine.errors import InvalidArgumentError, JobsError
from engine.registry import Registry, caller_line, first_line
from engine.registry import declared_by as declared_by_of
from engine.storable import find_unstorable
from engine.tasks.cron_syntax import CronSyntaxError
from engine.tasks.errors import (
    TaskCatchUpInvalidError,
    TaskCronInvalidError,
    TaskDeclarationInvalidError,
    TaskNameTakenError,
    TaskTimezoneInvalidError,
    TaskUnknownError,
)
from engine.tasks.occurrences import Schedule
from engine.tasks.zones import zone_ids

CatchUp = Literal["skip", "all"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = ("skip", "all")
DEFAULT_MAX_CATCH_UP = 10
# A round computes up to this many missed occurrences and enqueues their jobs in one write, so
# the bound keeps a round after a long outage a bounded amount of work.
MAX_CATCH_UP = 10_000

# What an enqueue function returns: (job, input) or (job, input, tenant_id) tuples, or
# `engine.Enqueue` items. Checked when the task fires (TASK_ENTRY_INVALID).
EnqueueFn = Callable[[int], Sequence[Any] | Awaitable[Sequence[Any]]]


_ORIGIN = object()

# What a task's jobs are enqueued by: this and the task's name (engine.tasks.scheduler).
TASK_ACTOR = "task:"
MAX_TASK_NAME_BYTES = bounds.MAX_ACTOR_BYTES - len(TASK_ACTOR)


@dataclass(frozen=True, eq=False)
class TaskDefinition:
    """A declared cron task. Build it with `task(...)`."""

    name: str
    cron: str
    tz: str
    enqueue: EnqueueFn
    catch_up: CatchUp
    max_catch_up: int
    description: str | None
    schedule: Schedule = field(repr=False)
    declared_by: str = ""
    # Where the declaration is: the `task(...)` call and the enqueue function's first line
    # (`file:line` each). A re-import runs the same lines again; a second task has its own.
    declared_at: tuple[str, str] = ("", "")
    origin: object = field(default=None, repr=False)

    async def entries(self, occurrence_ms: int) -> Sequence[Any]:
        """What this task enqueues for one occurrence (the app's function, sync or async)."""
        produced = self.enqueue(occurrence_ms)
        if inspect.isawaitable(produced):
            produced = await produced
        return produced


class TaskRegistry(Registry[TaskDefinition]):
    """The cron tasks of one `JobRegistry`, by name."""

    def check(self, definition: object) -> TaskDefinition:
        if not isinstance(definition, TaskDefinition) or definition.origin is not _ORIGIN:
            raise TaskDeclarationInvalidError(
                getattr(definition, "name", "?"),
                "definition",
                definition,
                "built by task(...)",
            )
        return definition

    def clash(self, existing: TaskDefinition, definition: TaskDefinition) -> JobsError | None:
        if _identity(existing) == _identity(definition):
            return None
        return TaskNameTakenError(definition.name, _where(existing), _where(definition))

    def unknown(self, name: str, known: Sequence[str]) -> JobsError:
        return TaskUnknownError(name, known)


_BY_REGISTRY: weakref.WeakKeyDictionary[JobRegistry, TaskRegistry] = weakref.WeakKeyDictionary()


def tasks_of(registry: JobRegistry) -> TaskRegistry:
    """The tasks declared under `registry` (created empty on first use)."""
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = TaskRegistry()
        _BY_REGISTRY[registry] = found
    return found


def _identity(definition: TaskDefinition) -> tuple[str, tuple[str, str], str, str]:
    # Re-importing the declaring module re-declares the same task from the same lines; anything
    # else is a clash (the qualname alone is `<lambda>` for every lambda of a module).
    return (
        definition.declared_by,
        definition.declared_at,
        definition.cron,
        definition.tz,
    )


def _where(definition: TaskDefinition) -> str:
    return f"{definition.declared_by} (task(...) at {definition.declared_at[0]})"


def _unfit(c: str) -> bool:
    """A character a task name may not hold: ':' (it ends the name in an occurrence's key),
    whitespace, and what is not printable (a zero-width space, a direction mark, a control
    character): a name nobody can see or type back is no name."""
    return c == ":" or c.isspace() or not c.isprintable()


def _name(value: object) -> str:
    if isinstance(value, str) and value and not any(_unfit(c) for c in value):
        try:  # "task:<name>" is the enqueued_by of every job it enqueues, bounded as any actor
            return bounds.text("name", value, MAX_TASK_NAME_BYTES)
        except InvalidArgumentError as exc:
            expected = exc.expected
    else:
        expected = "a non-empty str of printable characters without whitespace or ':'"
    shown = value if isinstance(value, str) else repr(value)
    mended = json.dumps(_mended_name(value), ensure_ascii=False)
    raise TaskDeclarationInvalidError(shown, "name", value, expected, mended)


def _mended_name(value: object) -> str:
    """`value` made a name `task()` takes: what may not be in one becomes `_`, the ends are
    trimmed, and the whole cut to the bound; "nightly" where nothing of it is left."""
    if not isinstance(value, str):
        return "nightly"
    kept = "".join(
        "_" if _unfit(c) or find_unstorable(c) is not None else c for c in value.strip()
    ).strip("_")
    cut = kept.encode()[:MAX_TASK_NAME_BYTES].decode(errors="ignore")
    return cut or "nightly"


def _one_argument_enqueue(enqueue: Callable[..., Any]) -> str | None:
    """`enqueue` taking no argument, mended to take the occurrence: a named function called
    from a lambda that takes it, a lambda written again with its own body (read from its
    source); None when neither can be written."""
    try:
        if inspect.signature(enqueue).parameters:
            return None
    except (TypeError, ValueError):
        return None
    name = getattr(enqueue, "__name__", "")
    if name.isidentifier() and name != "<lambda>":
        return f"lambda occurrence_ms: {name}()"
    body = _lambda_body(enqueue)
    return None if body is None else f"lambda occurrence_ms: {body}"


def _lambda_body(fn: Callable[..., Any]) -> str | None:
    """The source of a lambda's body, as its code's positions place it (columns in UTF-8 bytes),
    when it reads back as one expression."""
    code = getattr(fn, "__code__", None)
    filename = getattr(code, "co_filename", "")
    spans = [
        (line, end_line, col, end_col)
        for line, end_line, col, end_col in (code.co_positions() if code else ())
        if line is not None and end_line is not None and col is not None and end_col is not None
        if (line, col) != (end_line, end_col)
    ]
    if not spans:
        return None
    start = min((line, col) for line, _, col, _ in spans)
    end = max((end_line, end_col) for _, end_line, _, end_col in spans)
    lines = [linecache.getline(filename, n).encode() for n in range(start[0], end[0] + 1)]
    if not all(lines):
        return None
    lines[-1] = lines[-1][: end[1]]
    lines[0] = lines[0][start[1] :]
    text = b"".join(lines).decode(errors="replace")
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    return " ".join(text.split())


def _zone(task: str, tz: object) -> ZoneInfo:
    if not isinstance(tz, str) or not tz:
        raise TaskTimezoneInvalidError(task, tz, [])
    if tz not in zone_ids():
        raise TaskTimezoneInvalidError(task, tz, _suggest(tz), mended=_folded_match(tz))
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise TaskTimezoneInvalidError(task, tz, _suggest(tz)) from exc


def _fold(tz: str) -> str:
    return tz.strip().lower().replace(" ", "_")


def _folded_match(tz: str) -> str | None:
    """The zone `tz` is but for case, blanks around it and `_` written as a space."""
    matches = [z for z in zone_ids() if _fold(z) == _fold(tz)]
    return matches[0] if len(matches) == 1 else None


def _suggest(tz: str) -> list[str]:
    zones = sorted(zone_ids())
    folded = {_fold(z): z for z in zones}
    exact = folded.get(_fold(tz))
    if exact is not None:
        return [exact]
    close = difflib.get_close_matches(tz.lower(), list(folded), n=3, cutoff=0.6)
    return [folded[c] for c in close]


def _max_catch_up(task: str, value: object) -> int:
    # bool is an int subclass, and a float admits fractions, NaN and infinity: only a real whole
    # number ≥ 1 fires at all and fires a bounded amount.
    def refuse(expected: str) -> JobsError:
        return TaskCatchUpInvalidError(task, "max_catch_up", value, expected)

    return whole_declared(refuse, "max_catch_up", value, 1, MAX_CATCH_UP)


def task(
    *,
    name: str,
    cron: str,
    tz: str,
    enqueue: EnqueueFn,
    catch_up: CatchUp = "skip",
    max_catch_up: int = DEFAULT_MAX_CATCH_UP,
    description: str | None = None,
    registry: JobRegistry | None = None,
) -> TaskDefinition:
    """Declare a cron task: at each occurrence of `cron` in zone `tz`, enqueue what
    `enqueue(occurrence_ms)` returns, once, under the key `task:<name>:<occurrence_ms>`.

    `catch_up='skip'` fires only the latest missed occurrence after downtime; `'all'` fires every
    missed one, oldest first, at most `max_catch_up` per scheduler round.
    """
    task_name = _name(name)
    if not isinstance(cron, str):
        raise TaskCronInvalidError(task_name, cron, "it must be a str")
    zone = _zone(task_name, tz)
    try:
        schedule = Schedule(cron, zone, hash_id=task_name)
    except CronSyntaxError as exc:
        raise TaskCronInvalidError(task_name, cron, exc) from exc
    if catch_up not in CATCH_UP_POLICIES:
        raise TaskCatchUpInvalidError(task_name, "catch_up", catch_up, "'skip' or 'all'")
    limit = _max_catch_up(task_name, max_catch_up)
    if not callable(enqueue):
        raise TaskDeclarationInvalidError(
            task_name, "enqueue", enqueue, "a function of the occurrence (epoch ms)"
        )
    takes = one_argument(enqueue)
    if takes is not None:
        # Taken, the task failed with TASK_ENQUEUE_FAILED at every occurrence: it is called
        # with the occurrence.
        expected = f"a function of one argument, the occurrence (epoch ms); {takes}"
        mended = _one_argument_enqueue(enqueue)
        raise TaskDeclarationInvalidError(task_name, "enqueue", enqueue, expected, mended)
    description_declared(
        lambda expected: TaskDeclarationInvalidError(
            task_name, "description", description, expected
        ),
        description,
    )
    declared_by = declared_by_of(enqueue)
    declared_at = (
        caller_line(1),
        first_line(enqueue),
    )  # the line declaring it, the body's
    definition = TaskDefinition(
        name=task_name,
        cron=schedule.cron,
        tz=tz,
        enqueue=enqueue,
        catch_up=catch_up,
        max_catch_up=limit,
        description=description,
        schedule=schedule,
        declared_by=declared_by,
        declared_at=declared_at,
        origin=_ORIGIN,
    )
    tasks_of(registry if registry is not None else default_registry).add(definition)
    return definition
