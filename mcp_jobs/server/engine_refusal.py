"""An argument the engine refused while a tool ran (a bound only it can check, a name it does
not know, an id inside other text), as the same refusal whose fix is the caller's call mended."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from mcp.server.mcpserver.tools.base import Tool

from engine.backfill.gate import as_variable
from engine.errors import (
    LEFT_OUT,
    NAMED,
    NOTHING_NEAR,
    InvalidArgumentError,
    JobNotFoundError,
    JobsError,
)
from engine.meant import same_words
from mcp_jobs.errors import ComputedKeyInvalidError, LimitExceededError, TenantPinnedError
from mcp_jobs.operations.meant_job import MeantJobUnknownError, renamed_input
from mcp_jobs.operations.prune import SERVE_COMMAND
from mcp_jobs.server.argument_values import MISSING, not_finite
from mcp_jobs.server.mended_call import WRITE, MendedCall, reads_only
from mcp_jobs.tenant_bound import TENANT_BOUND, lost_note

# The tool call under way, for an INVALID_ARGUMENT the engine raises while the tool runs.
_CALL: ContextVar[tuple[Tool, Mapping[str, Any]] | None] = ContextVar("tool_call", default=None)


@contextmanager
def calling(tool: Tool, arguments: Mapping[str, Any]) -> Iterator[None]:
    """Mark `tool` called with `arguments` while the block runs (see `mended`)."""
    token = _CALL.set((tool, arguments))
    try:
        yield
    finally:
        _CALL.reset(token)


def mended(exc: BaseException) -> BaseException:
    """`exc`, or, when it is the engine refusing an argument of the tool call under way as the
    caller gave it, the same refusal whose fix is that call mended: the value the engine named
    nearest to it (a range's end that moves with the clock, the key the job computes), or a
    "<name>" slot; the id a text holds (JOB_NOT_FOUND), the name meant (JOB_UNKNOWN,
    QUEUE_UNKNOWN), an input's fields renamed (JOB_INPUT_INVALID), a "<tenant_id>" slot
    (JOB_TENANT_REQUIRED) or "<key>" slot (IDEMPOTENCY_KEY_MISSING), the pinned tenant
    (TENANT_PINNED), the input with slots for the fields a computed key is too long for; with
    next_call when the mended call runs as given."""
    if isinstance(exc, JobsError):
        # No tool takes an environment: the server's is MCP_JOBS_ENV's, read when it started.
        restarted = as_variable(exc, restart=SERVE_COMMAND)
        if restarted is not exc:
            return restarted
    current = _CALL.get()
    if current is None or not isinstance(exc, JobsError):
        return exc
    tool, arguments = current
    if isinstance(exc, JobNotFoundError):
        return _id_held(exc, tool, arguments)
    if exc.code in NAMED:
        return _name_meant(exc, tool, arguments)
    if exc.code == "JOB_INPUT_INVALID":
        return _fields_meant(exc, tool, arguments)
    if exc.code == "JOB_TENANT_REQUIRED":
        return _slotted(exc, tool, arguments, "tenant_id", MISSING)
    if exc.code == "IDEMPOTENCY_KEY_MISSING":
        return _slotted(exc, tool, arguments, "key", MISSING)
    if isinstance(exc, TenantPinnedError):
        return _tenant_pinned(exc, tool, arguments)
    if isinstance(exc, ComputedKeyInvalidError) and exc.slotted is not None:
        return _slotted(exc, tool, arguments, "input", exc.slotted)
    if exc.__class__ not in (InvalidArgumentError, LimitExceededError):
        return exc
    assert isinstance(exc, InvalidArgumentError | LimitExceededError)
    if exc.next_call is not None:
        return exc
    if isinstance(exc, LimitExceededError):
        return _within_limit(exc, tool, arguments)
    name, given = exc.argument, arguments.get(exc.argument, MISSING)
    mend = _callers(tool, arguments)
    if exc.nearest is LEFT_OUT and given is not MISSING:
        mend.leave_out(name)  # whatever its value: the call has no use for it
    elif exc.nearest is NOTHING_NEAR and _holds(given, exc.value):
        # An item no stored thing can match (a queue name with a NUL) selects nothing: the
        # list without it asks the same.
        kept = [item for item in given if not _same(item, exc.value)]
        if kept:
            mend.set(name, kept)
        else:
            mend.leave_out(name)
    elif _same(given, exc.value) and _renamed(name, given, exc.nearest) and not reads_only(tool):
        # Another name than the one given ("pay\nsettled": "paysettled", "-orders": "orders"):
        # a write under it would send or pause something else, so it is shown, never offered.
        mend.guess(name, exc.nearest)
        if arguments.get(WRITE) is True:
            as_dry_run(mend)
    elif _same(given, exc.value):
        mend.set(name, MISSING if exc.nearest is NOTHING_NEAR else exc.nearest)
    # The engine named the value by what is wrong with it ("nested deeper than 64 levels at
    # $.a…", "2000000 bytes of JSON"), or in other units: a slot, never its nearest value.
    elif exc.nearest is NOTHING_NEAR and given is not MISSING:
        mend.set(name, MISSING)
    else:
        return exc
    mend.settle()
    return InvalidArgumentError(
        name,
        # As the caller wrote it: 5, not the 5.0 a float argument made of it.
        given if given is not MISSING and given == exc.value else exc.value,
        exc.expected,
        fix=f"{tool.name} {mend.text()}",
        next_call=mend.call(),
    )


# The arguments that name what a call acts on (a job, a queue, an event, a tenant).
_NAMING = frozenset(("name", "queue", "job", "tenant_id"))


def _renamed(argument: str, given: Any, nearest: Any) -> bool:
    """Whether a refused name's nearest value is another name (its NUL or line break left out,
    a leading dash): a guess at what it meant, unlike a value the engine names exactly (the key
    a job computes, run_at in milliseconds)."""
    return argument in _NAMING and isinstance(given, str) and isinstance(nearest, str)


E = TypeVar("E", bound=JobsError)

# What only a write takes: a dry run starts no pass to follow, and refuses run_backfill's
# wait_seconds (operations/backfills.wait_needs_write).
_WRITE_ONLY = ("wait_seconds",)


def as_dry_run(mend: MendedCall) -> None:
    """`mend` as its dry run (a write mended by a guess): `write` left out, and with it what
    only a write takes, so the dry run is not refused for it in turn."""
    for name in (WRITE, *_WRITE_ONLY):
        mend.leave_out(name)


def _as_mended(exc: E, tool: Tool, mend: MendedCall) -> E:
    """`exc` whose fix is the call `mend` holds, and its next_call when that runs as given."""
    mend.settle()
    exc.fix, exc.next_call = f"{tool.name} {mend.text()}", mend.call()
    return exc


def _name_meant(exc: JobsError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_UNKNOWN or QUEUE_UNKNOWN for a name that plainly stands for a known one (its
    `meant`) as the caller's call with that name: with next_call when it is the name in another
    spelling (`Bench_Noop`) on a read-only tool; a slip of the keys, or a write, shown only. An
    enqueue's is mended as the meant job takes it (`MeantJobUnknownError`)."""
    details = exc.details or {}
    given, meant = details.get(NAMED[exc.code]), details.get("meant")
    places = [
        (name, value)
        for name, value in arguments.items()
        if value == given or (isinstance(value, list) and value.count(given) == 1)
    ]
    if meant is None or not isinstance(given, str) or len(places) != 1:
        return exc
    name, value = places[0]
    mend = _callers(tool, arguments)
    named = [meant if item == given else item for item in value] if value != given else meant
    if same_words(given, meant) and reads_only(tool):
        mend.set(name, named)
    else:
        mend.guess(name, named)
    if isinstance(exc, MeantJobUnknownError):
        _as_meant_takes(mend, exc)
    if not same_words(given, meant) and arguments.get(WRITE) is True:
        # A slip of the keys is a guess: the write so mended is its dry run (a plan), as on
        # the CLI, where such a line loses --yes.
        as_dry_run(mend)
    return _as_mended(exc, tool, mend)


# The argument a refusal of the meant job's asks the caller to fill in, by its code.
_SLOT_FOR = {"JOB_TENANT_REQUIRED": "tenant_id", "IDEMPOTENCY_KEY_MISSING": "key"}


def _as_meant_takes(mend: MendedCall, exc: MeantJobUnknownError) -> None:
    """`mend` as the meant job takes it: its input's fields renamed (a guess, as
    `_fields_meant`'s), the key it computes, a slot for what only the caller knows. What it
    still refuses is in the cause; the call, a write under another name, is shown only."""
    for name, value in exc.changed.items():
        if name == "input":
            mend.guess(name, value)
        else:
            mend.set(name, value)
    for name in exc.left_out:
        mend.leave_out(name)
    for slotted in exc.slotted:
        if _SLOT_FOR[slotted.code] in mend.props:
            mend.set(_SLOT_FOR[slotted.code], MISSING)


def _slotted(exc: E, tool: Tool, arguments: Mapping[str, Any], name: str, value: Any) -> E:
    """`exc` as the caller's own call with `name` for them to fill in: a "<name>" slot
    (`MISSING`: the tenant a tenant_required job runs for), or `value` holding slots (the
    input with the fields a computed key is too long for). Shown in the fix, never run."""
    if name not in tool.parameters.get("properties", {}):
        return exc
    mend = _callers(tool, arguments)
    if value is MISSING:
        mend.set(name, value)
    else:
        mend.fill(name, value)
    return _as_mended(exc, tool, mend)


def _tenant_pinned(exc: TenantPinnedError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """TENANT_PINNED as the caller's call with the pinned tenant for the one asked, every other
    argument kept (its filters dropped, a listing or a cancel would span every job) but what
    went with the tenant asked (`TENANT_BOUND`: a cursor, a confirm token): a read runs as
    given; a write acts for another tenant than the caller named, so it is shown only, and one
    that writes on `write: true` comes back as its dry run."""
    if arguments.get("tenant_id") != exc.asked:
        return exc
    mend = _callers(tool, arguments)
    dropped = [name for name in TENANT_BOUND if name in arguments]
    for name in dropped:
        mend.leave_out(name)
    exc.cause += lost_note(dropped, exc.asked)
    if reads_only(tool):
        mend.set("tenant_id", exc.pinned)
    else:
        mend.guess("tenant_id", exc.pinned)
        as_dry_run(mend)
    return _as_mended(exc, tool, mend)


def _fields_meant(exc: JobsError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_INPUT_INVALID whose every error is a field given under a name that plainly stands
    for a declared one (`userId` for `user_id`: the unknown one and the missing one) as the
    call with those fields renamed. A write: shown in the fix, not run."""
    renamed = renamed_input(exc, arguments.get("input"))
    if renamed is None:
        return exc
    mend = _callers(tool, arguments)
    mend.guess("input", renamed)
    return _as_mended(exc, tool, mend)


def _id_held(exc: JobNotFoundError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """JOB_NOT_FOUND for text that holds one job id (`" 01a2…"`, `"job 01a2…"`, capitals) as
    the caller's call with that id: it is plainly the id meant, and the call runs as given. The
    one job an id cut short begins is found, not plain: a write so mended is shown only."""
    inner = exc.meant_id
    names = [name for name, value in arguments.items() if value == exc.job_id]
    if inner is None or len(names) != 1:
        return exc
    mend = _callers(tool, arguments)
    if exc.begun is not None and not reads_only(tool):
        mend.guess(names[0], inner)
    else:
        mend.set(names[0], inner)
    return _as_mended(exc, tool, mend)


def _within_limit(exc: LimitExceededError, tool: Tool, arguments: Mapping[str, Any]) -> JobsError:
    """A server cap only the tool's body checks (an input's bytes), as the caller's own call
    with the argument at the cap when it is a (finite) number, else a "<name>" slot."""
    given = arguments.get(exc.argument, MISSING)
    if given is MISSING:
        return exc
    mend = _callers(tool, arguments)
    # NaN or ±Infinity is over no cap: it means no number, so the cap is not its nearest value.
    number = (
        isinstance(given, int | float) and not isinstance(given, bool) and not not_finite(given)
    )
    mend.set(exc.argument, exc.limit if number else MISSING)
    mend.settle()
    fix = f"{tool.name} {mend.text()}"
    return LimitExceededError(
        exc.argument, exc.value, exc.limit, exc.unit, fix, next_call=mend.call(), why=exc.why
    )


def _callers(tool: Tool, arguments: Mapping[str, Any]) -> MendedCall:
    """The caller's call to mend, with a "<name>" slot for each NaN or ±Infinity in it: JSON
    has no such number, so a fix echoing it would not parse, and it means no value to run."""
    mend = MendedCall(tool, arguments)
    for name, value in arguments.items():
        if not_finite(value):
            mend.set(name, MISSING)
    return mend


def _same(given: Any, value: object) -> bool:
    return type(given) is type(value) and given == value


def _holds(given: Any, value: object) -> bool:
    """Whether the caller's list `given` holds the refused `value` as one of its items."""
    return isinstance(given, list) and any(_same(item, value) for item in given)
