"""The refusal of arguments the strict model (`server.arguments`) refused, as the error an
agent can act on: a range breach is INVALID_ARGUMENT naming the argument and its range, or
LIMIT_EXCEEDED when the bound is this server's cap (marked `ServerCap`); anything else (NaN or
±Infinity too, which no bound has as its nearest value) is TOOL_ARGUMENTS_INVALID, each entry
saying what the argument takes. Its fix is the caller's call mended (`mended_call`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver.tools.base import Tool
from pydantic import ValidationError

from engine.errors import InvalidArgumentError, JobsError, id_within
from engine.meant import meant_as, same_words
from mcp_jobs.errors import LimitExceededError, ToolArgumentsInvalidError
from mcp_jobs.server.argument_values import (
    LOWER,
    MISSING,
    UPPER,
    as_choices,
    as_intended,
    nearest_in_range,
    not_finite,
    plainly,
    schema_kinds,
    spelt_number,
    takes,
)
from mcp_jobs.server.arguments import ServerCap
from mcp_jobs.server.engine_refusal import as_dry_run
from mcp_jobs.server.mended_call import (
    WRITE,
    MendedCall,
    fitting_members,
    is_cursor,
    reads_only,
)

# The argument of a write that carries the token its confirmation issued (mcp_jobs/server/
# confirm.py); a write sent without it answers that token.
_CONFIRM = "confirm"
# The bulk tools select by filter and take no ids; the tool that acts on one job by its id.
_ONE_JOB = {"cancel_jobs": "cancel_job", "retry_jobs": "retry_job"}
# The tools whose `name` is a job's: `job` there is that name (pause_queue's `job` is its own).
_NAME_IS_A_JOB = frozenset(
    {"enqueue_job", "describe_jobs", "list_jobs", "retry_jobs", "cancel_jobs"}
)


@dataclass(frozen=True)
class Derived:
    """What an argument of this call must be, which the server derives (`key`: the key the job
    computes), and why: a value moved there from another name gives way to it."""

    value: Any  # MISSING: the call runs without the argument
    why: str


def refusal(
    tool: Tool,
    arguments: Mapping[str, Any],
    exc: ValidationError,
    derived: Mapping[str, Derived] | None = None,
) -> JobsError:
    """The error for arguments the strict model refused. Its fix is the caller's own call
    mended where the mend is plain (a number at its range's nearest end, "5" as 5, JSON text
    as the value it spells), with a placeholder for anything else; `next_call` is that call
    when it needs no placeholder and the strict model accepts it, so it runs as given.
    `derived`: what the server knows an argument must be, for a value moved there."""
    derived = derived or {}
    props: dict[str, Any] = tool.parameters.get("properties", {})
    errors = exc.errors(include_url=False)
    mended = MendedCall(tool, arguments)
    fitting = fitting_members(errors, props, arguments)
    breach = _range_breach(tool, fitting, props, mended)
    if breach is not None:
        return breach
    entries: list[dict[str, Any]] = []
    named: set[str] = set()
    # Each unknown argument that plainly stands for a declared one, moved there in the fix.
    required = tool.parameters.get("required", ())
    meant = {
        name: to
        for e in fitting
        if e["type"] == "extra_forbidden"
        and (to := meant_as(name := str(e["loc"][0]), props, given=arguments, required=required))
        is not None
    }
    if tool.name in _NAME_IS_A_JOB and "job" in arguments and "name" not in arguments:
        meant.setdefault("job", "name")
    # Two unknown arguments meant as one (`states` and `status`): which is plain is not.
    meant = {k: to for k, to in meant.items() if list(meant.values()).count(to) == 1}
    wrapper = _wrapper(fitting, props, arguments)
    dry_run = False  # a write mended by a guess: the fix is its dry run
    for e in fitting:
        name = str(e["loc"][0]) if e["loc"] else ""
        # One entry per argument: a list reports every item.
        if name in named:
            continue
        named.add(name)
        if e["type"] == "extra_forbidden" and name == wrapper:
            inner = ", ".join(arguments[name])
            entry = {
                "msg": f"unknown argument, holding {tool.name}'s own ({inner}): the fix "
                "takes them out of it"
            }
            entry["expected"] = f"no such argument: {tool.name}'s arguments go at the top level"
            # Plainly the call wrapped once (`{"arguments": {...}}`): a read-only tool's
            # next_call runs it unwrapped; a write's is shown in the fix.
            mended.drop(name, guessed=not reads_only(tool))
            for inner_name, value in arguments[name].items():
                mended.set(inner_name, plainly(props[inner_name], value, inner_name))
        elif e["type"] == "extra_forbidden":
            listed = f"{tool.name} takes {', '.join(props) or 'none'}"
            hint = f" (meant as {meant[name]}?)" if name in meant else ""
            entry = {"msg": f"unknown argument{hint}; {listed}"}
            entry["expected"] = f"no such argument: {listed}"
            # A respelling (`tenantId`) is the argument itself: a read-only tool's next_call
            # runs it. Anything else moved is a guess, shown in the fix but not run.
            respelled = name in meant and same_words(name, meant[name])
            mended.drop(name, guessed=not (respelled and reads_only(tool)))
            if name in meant:
                to = entry["meant"] = meant[name]
                known = derived.get(to)
                if known is None:
                    mended.set(to, plainly(props.get(to, {}), arguments[name], to))
                elif known.value is MISSING:
                    entry["msg"] += f"; {known.why}: the fix leaves {to} out"
                else:
                    entry["msg"] += f"; {known.why}: the fix passes {json.dumps(known.value)}"
                    mended.set(to, known.value)
            if arguments.get(WRITE) is True and WRITE in props and not respelled:
                # Dropped, it may have been the call's only narrowing (`job_ids` on
                # cancel_jobs), and moved, a guess: the call so mended, written, could reach
                # every job. The fix is its dry run, whose plan shows what it selects.
                dry_run = True
                entry["msg"] += f"; the fix leaves out {WRITE} (a dry run of what it selects)"
        else:
            expected = takes(props.get(name, {}))
            entry = {"msg": f"{e['msg']}; {name} takes {expected}" if name else e["msg"]}
            if not_finite(e.get("input")):
                # JSON text NaN or Infinity fails a bound (or an integer's kind), but it is no
                # number at all: said as such, and mended to a slot (it means no value).
                said = f"{spelt_number(e['input'])} is not a finite number"
                entry = {"type": "finite_number", "msg": f"{said}; {name} takes {expected}"}
            entry["expected"] = expected
            if name and name not in meant.values():
                given = arguments.get(name, MISSING)
                choice, guessed = as_choices(props.get(name, {}), given)
                if name == _CONFIRM and _CONFIRM in props:
                    # `true` for the token: without it the write answers its plan and the
                    # token to confirm it with, writing nothing.
                    entry["msg"] += "; the fix leaves it out, which answers the token to pass"
                    mended.leave_out(name)
                elif _fraction(props.get(name, {}), given):
                    # 1.5 where a whole number is taken: the nearest is plain, but 1 or 2 is a
                    # guess (shown in the fix, not run; a write so mended is its dry run).
                    mended.guess(name, round(given))
                    dry_run = dry_run or (arguments.get(WRITE) is True and WRITE in props)
                elif choice is MISSING:
                    intended = as_intended(props.get(name, {}), given, seconds_of=name)
                    if intended is MISSING and is_cursor(name) and name in props:
                        # As CURSOR_INVALID's fix: the first page (a placeholder fails as one).
                        entry["msg"] += "; the fix leaves it out: the first page"
                        mended.leave_out(name)
                    else:
                        mended.set(name, intended)
                elif guessed:
                    # A slip of the keys ("deda"): shown in the fix, not run, and a write so
                    # mended is its dry run, as for an argument moved by a guess.
                    entry["msg"] += f" (meant {json.dumps(choice)}?)"
                    mended.guess(name, choice)
                    dry_run = dry_run or (arguments.get(WRITE) is True and WRITE in props)
                else:
                    mended.set(name, choice)
        entries.append({"loc": list(e["loc"]), "type": e["type"], **entry})
    if dry_run:
        as_dry_run(mended)
    mended.settle()
    refused = ToolArgumentsInvalidError(
        tool.name,
        entries,
        mended.text(),
        next_call=mended.call(),
        mended=mended.arguments if mended.valid else None,
    )
    return _by_ids(tool, arguments, refused, set(meant))


def _fraction(schema: Mapping[str, Any], value: Any) -> bool:
    """Whether `value` is a finite fraction where only whole numbers are taken."""
    kinds = schema_kinds(schema)
    if not (isinstance(value, float) and math.isfinite(value)) or "number" in kinds:
        return False
    return "integer" in kinds and not value.is_integer()


def _by_ids(
    tool: Tool, arguments: Mapping[str, Any], refused: ToolArgumentsInvalidError, meant: set[str]
) -> ToolArgumentsInvalidError:
    """`refused`, its fix the one-job tool when an unknown argument of a bulk tool holds job
    ids (`cancel_jobs {"job_ids": [...]}`): the bulk call with them dropped selects every job
    its filter matches, which the ids never asked for."""
    single = _ONE_JOB.get(tool.name)
    if single is None:
        return refused
    for name, value in arguments.items():
        if name in tool.parameters.get("properties", {}) or name in meant:
            continue
        items = value if isinstance(value, list) else [value]
        ids = [_job_id(item) for item in items]
        if not ids or None in ids:
            continue
        refused.fix = f"{single} {json.dumps({'job_id': ids[0]})}"
        refused.next_call = None  # a write on a guess: shown, not run
        rest = f"; one call per id, then {', '.join(map(str, ids[1:]))}" if len(ids) > 1 else ""
        refused.cause += (
            f"; {tool.name} selects by filter and takes no ids: a job by its id is {single}'s{rest}"
        )
        refused.mended = None
        break
    return refused


def _job_id(value: Any) -> str | None:
    """The job id `value` is or holds (" 01a2…\n"), else None."""
    if not isinstance(value, str):
        return None
    if len(value) == 32 and all(c in "0123456789abcdef" for c in value):
        return value
    return id_within(value)


def _wrapper(
    errors: list[Any], props: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """The one unknown argument whose value is an object of this tool's own arguments, none of
    them also given beside it (`list_jobs {"arguments": {"state": "dead"}}`): the call wrapped."""
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and e["loc"]]
    found = [
        name
        for name in dict.fromkeys(unknown)
        if isinstance(value := arguments.get(name), dict)
        and value
        and all(k in props and k not in arguments for k in value)
    ]
    return found[0] if len(found) == 1 else None


def _range_breach(
    tool: Tool,
    errors: list[Any],
    props: Mapping[str, Any],
    mended: MendedCall,
) -> JobsError | None:
    """INVALID_ARGUMENT or LIMIT_EXCEEDED when every error is a number out of its range; the
    fix is the call with each such number at its range's nearest end."""
    if not errors or any(
        e["type"] not in LOWER | UPPER or len(e["loc"]) != 1 or not_finite(e["input"])
        for e in errors
    ):
        return None  # NaN or ±Infinity is out of no range: the argument's kind refused
    for e in errors:
        mended.set(str(e["loc"][0]), nearest_in_range(e))
    mended.settle()
    fix = f"{tool.name} {mended.text()}"
    call = mended.call()
    first = errors[0]
    name = str(first["loc"][0])
    value = first["input"]
    field = tool.fn_metadata.arg_model.model_fields.get(name)
    cap = next((m for m in field.metadata if isinstance(m, ServerCap)), None) if field else None
    if first["type"] in UPPER and cap is not None:
        limit = next(iter(first["ctx"].values()))
        return LimitExceededError(name, value, limit, cap.unit, fix, next_call=call)
    return InvalidArgumentError(name, value, takes(props.get(name, {})), fix=fix, next_call=call)
