"""An enqueue refused for a job name that plainly stands for another (JOB_UNKNOWN's `meant`),
checked as the call with that name: the engine's own check of the meant job, nothing stored.
Each face writes its fix as the caller's call with the name meant; kept as it was, a `key` or
an input the meant job refuses refused that fix in turn (exploreA2: `build_reprt` with key
"zz", fixed to `build_report` with "zz", which computes "report:2"). What the meant job refuses
with a plain mend is mended as its refusal names it (the key it computes; an input's fields
renamed), a value only the caller knows is a slot; anything else is said in the cause."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine import Jobs
from engine.descriptors import IdempotencyKeyMissingError
from engine.enqueue_items import Enqueue
from engine.errors import (
    LEFT_OUT,
    NOTHING_NEAR,
    InvalidArgumentError,
    JobInputInvalidError,
    JobsError,
    JobTenantRequiredError,
    JobUnknownError,
)
from mcp_jobs.operations.job_input import refuse_coerced
from mcp_jobs.operations.scope import Scope

# The ids of a request built only to check it.
_NO_ID = "0" * 32
# What the check goes on with where the meant job needs a tenant the call did not name: the
# caller's to fill in (a slot), and no bound of the call's other values depends on which.
_STAND_IN_TENANT = "tenant"
# The input, a tenant, the key (the engine checks them in that order): each mended once, then
# the call so mended checked.
_CHECKS = 4


class MeantJobUnknownError(JobUnknownError):
    """JOB_UNKNOWN whose meant job was checked with the caller's call (`meant_checked`): the
    arguments to set (`changed`) and leave out (`left_out`) for that job to take it, the
    refusals whose value only the caller knows (`slotted`: a tenant, a published job's key),
    and what it still refuses (`refused`, also said in the cause)."""

    def __init__(
        self,
        unknown: JobUnknownError,
        given: Mapping[str, Any],
        mended: Mapping[str, Any],
        slotted: list[JobsError],
        refused: JobsError | None,
    ) -> None:
        # The engine's refusal as it was (its listing of the names known), its cause gaining
        # what the meant job refuses too.
        cause = unknown.cause if refused is None else f"{unknown.cause}; and {refused.cause}"
        JobsError.__init__(
            self, cause, unknown.fix, next_call=unknown.next_call, details=unknown.details
        )
        self.changed = {
            name: value
            for name, value in mended.items()
            if name != "name" and (name not in given or given[name] != value)
        }
        self.left_out = [name for name in given if name not in mended]
        self.slotted = slotted
        self.refused = refused


async def meant_checked(
    scope: Scope, unknown: JobUnknownError, call: Mapping[str, Any]
) -> JobUnknownError:
    """`unknown`, refusing `call` (enqueue_job's arguments; None: not given), as a
    MeantJobUnknownError when it names a job meant: `call` with that name checked against it,
    and mended where plain."""
    meant = (unknown.details or {}).get("meant")
    given = {name: value for name, value in call.items() if value is not None}
    if not isinstance(meant, str) or not isinstance(given.get("input"), dict):
        return unknown
    mended = {**given, "name": meant}
    slotted: list[JobsError] = []
    refused: JobsError | None = None
    try:
        for _ in range(_CHECKS):
            refused = await _refusal(scope, mended, slotted)
            if refused is None or not _mend(mended, refused, slotted):
                break
    except Exception:  # not a refusal (a bug in the app's key function): not checked
        return unknown
    if refused is not None and (refused.retryable or isinstance(refused, JobUnknownError)):
        # The store not answering, or a name meant that only stored jobs hold: not checked.
        return unknown
    return MeantJobUnknownError(unknown, given, mended, slotted, refused)


async def check_enqueue(jobs: Jobs, item: Enqueue) -> None:
    """Raise what enqueuing `item` would be refused for, storing nothing: the engine's own
    check (`EnqueueItems.one`), and the input the job's model takes only by coercion."""
    await jobs.items.one(item, None, jobs.clock.now_ms(), None, _NO_ID, _NO_ID)
    if isinstance(item.job, str) and isinstance(item.input, dict):
        refuse_coerced(jobs.registry, item.job, item.input)


async def _refusal(
    scope: Scope, call: Mapping[str, Any], slotted: list[JobsError]
) -> JobsError | None:
    """What enqueuing `call` in `scope` is refused for, or None."""
    try:
        tenant = scope.tenant(call.get("tenant_id"))  # the pinned one; TENANT_PINNED
        if tenant is None and any(isinstance(s, JobTenantRequiredError) for s in slotted):
            tenant = _STAND_IN_TENANT
        item = Enqueue(
            call["name"],
            call["input"],
            tenant,
            call.get("delay_seconds"),
            call.get("run_at"),
            call.get("on_conflict", "dedupe"),
            None,
            call.get("priority"),
            call.get("key"),
        )
        await check_enqueue(scope.jobs, item)
    except JobsError as exc:
        return exc
    return None


def _mend(call: dict[str, Any], refused: JobsError, slotted: list[JobsError]) -> bool:
    """Whether `refused` has a plain mend, made in `call` (or `slotted`) for the next check."""
    if isinstance(refused, JobTenantRequiredError | IdempotencyKeyMissingError):
        # A published job's key is checked last: nothing is left to check after it.
        slotted.append(refused)
        return isinstance(refused, JobTenantRequiredError)
    if isinstance(refused, JobInputInvalidError):
        renamed = renamed_input(refused, call["input"])
        if renamed is None:
            return False
        call["input"] = renamed
        return True
    # A subclass of INVALID_ARGUMENT carries fields of its own (a computed key too long).
    if not isinstance(refused, InvalidArgumentError) or type(refused) is not InvalidArgumentError:
        return False
    argument = refused.argument
    if argument not in call or not _same(call[argument], refused.value):
        return False
    if refused.nearest is LEFT_OUT:
        del call[argument]
    elif refused.nearest is not NOTHING_NEAR:
        call[argument] = refused.nearest  # the key the job computes, a time within its bound
    else:
        return False
    return True


def renamed_input(refused: JobsError, given: Any) -> dict[str, Any] | None:
    """`given` with its fields renamed where every error of a JOB_INPUT_INVALID is a field given
    under a name that plainly stands for a declared one (`userId` for `user_id`: the unknown one
    and the missing one); None where any error is something else."""
    errors = (refused.details or {}).get("errors", [])
    meant: dict[str, str] = {
        e["loc"][0]: e["meant"] for e in errors if e.get("meant") and len(e["loc"]) == 1
    }
    explained = {*meant, *meant.values()}
    if (
        not isinstance(given, dict)
        or not meant
        or any(len(e["loc"]) != 1 or e["loc"][0] not in explained for e in errors)
    ):
        return None
    fields: dict[str, Any] = given  # a JSON object's: named by text
    return {meant.get(name, name): value for name, value in fields.items()}


def _same(given: Any, value: object) -> bool:
    return type(given) is type(value) and given == value
