"""`completion/complete`: values for the resource templates' and the prompts' arguments.

The protocol (2025-11-25 and 2026-07-28 alike) completes only `ref/resource` (a template's
variable) and `ref/prompt` (a prompt's argument): there is no reference to a tool, so tool
arguments cannot be completed. Values come from the engine: job names (registered and
published), known queues, declared backfills, and the ids of the newest jobs this server can see
(one tenant's under a pin). What was typed matches in any case, the values it starts first and
then, from three characters, those that hold it (`Mail` finds `mail`, `noop` finds
`bench_noop`); at most `MAX_VALUES` are sent, with `total` and `has_more` saying how many matched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import cast

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from engine.errors import JobsError, short_repr
from engine.internal_jobs import is_internal
from mcp_jobs.operations.known import known_queues
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState, StateHolder

# The protocol's cap on values in one answer.
MAX_VALUES = 100
# Job ids are offered from this many of the newest visible jobs, and this many at most:
# a completion is a hint for what was just enqueued, not a listing (list_jobs pages).
RECENT_JOBS_WINDOW = 100
RECENT_JOBS = 20
# Typed text this long also matches the values that hold it past their start.
HOLDS_FROM = 3

Handler = Callable[
    [PromptReference | ResourceTemplateReference, CompletionArgument, CompletionContext | None],
    Awaitable[Completion],
]
# A source answers every matching value, in the order to offer them, and how many to send.
Source = Callable[[Scope, str], Awaitable[tuple[list[str], int]]]


def matching(values: Iterable[str], typed: str) -> list[str]:
    """The `values` `typed` matches, in their order: those it starts, in any case, first, then
    those that hold it elsewhere (once it is `HOLDS_FROM` characters: one letter is in most)."""
    folded = typed.casefold()
    starts: list[str] = []
    holds: list[str] = []
    for value in values:
        seen = value.casefold()
        if seen.startswith(folded):
            starts.append(value)
        elif len(folded) >= HOLDS_FROM and folded in seen:
            holds.append(value)
    return starts + holds


async def job_names(scope: Scope, typed: str) -> tuple[list[str], int]:
    # As describe_jobs lists them: not the engine's own jobs (engine/internal_jobs.py).
    names = {d.name for d in await scope.jobs.describe() if not is_internal(d.name)}
    return matching(sorted(names), typed), MAX_VALUES


async def queue_names(scope: Scope, typed: str) -> tuple[list[str], int]:
    return matching(await known_queues(scope), typed), MAX_VALUES


async def backfill_names(scope: Scope, typed: str) -> tuple[list[str], int]:
    return matching(sorted(scope.backfills().registry.names()), typed), MAX_VALUES


async def recent_job_ids(scope: Scope, typed: str) -> tuple[list[str], int]:
    """The matching ids among the newest visible jobs (one tenant's under a pin), newest
    first."""
    page = await scope.jobs.list(tenant_id=scope.tenant(None), limit=RECENT_JOBS_WINDOW)
    return matching([j.id for j in page.jobs], typed), RECENT_JOBS


# (reference kind, template URI or prompt name) -> argument -> where its values come from.
SOURCES: dict[tuple[str, str], dict[str, Source]] = {
    ("ref/resource", "jobs://descriptors/{name}"): {"name": job_names},
    ("ref/resource", "jobs://runs/{job_id}"): {"job_id": recent_job_ids},
    ("ref/prompt", "diagnose_stalled_jobs"): {"queue": queue_names},
    ("ref/prompt", "run_backfill_safely"): {"name": backfill_names},
}


def _source(
    ref: PromptReference | ResourceTemplateReference, argument: str, prompts: set[str]
) -> Source:
    """The source for `argument` of `ref`; an unknown reference or argument is invalid params
    naming what can be completed (the spec's answer to an invalid prompt name)."""
    key = (ref.type, ref.uri if isinstance(ref, ResourceTemplateReference) else ref.name)
    served = {k: v for k, v in SOURCES.items() if k[0] == "ref/resource" or k[1] in prompts}
    by_argument = served.get(key)
    if by_argument is None:
        known = sorted(name for _, name in served)
        message = (
            f"nothing to complete for {ref.type} {short_repr(key[1])}; "
            f"completable: {', '.join(known)}"
        )
        raise MCPError(INVALID_PARAMS, message, {"ref": key[1], "known": known})
    source = by_argument.get(argument)
    if source is None:
        message = (
            f"{key[1]} has no completable argument {short_repr(argument)}; "
            f"it completes: {', '.join(sorted(by_argument))}"
        )
        raise MCPError(INVALID_PARAMS, message, {"argument": argument})
    return source


def bounded(matched: list[str], send: int) -> Completion:
    """The first `send` matches (never more than MAX_VALUES); `total` counts them all."""
    values = matched[: min(send, MAX_VALUES)]
    return Completion(values=values, total=len(matched), has_more=len(matched) > len(values))


def register(server: MCPServer[AppState], holder: StateHolder) -> None:
    """Serve completion/complete; the SDK declares the `completions` capability with it."""

    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        prompts = {p.name for p in await server.list_prompts()}
        source = _source(ref, argument.name, prompts)
        state = holder.require()
        # An OAuth token's tenant claim pins completions as it pins tools: no other tenant's
        # job ids.
        scope = request_scope(state, "completion/complete")
        try:
            matched, send = await source(scope, argument.value)
        except JobsError as exc:
            fix = scope.fixes.qualify(exc.fix)
            message = f"completing {argument.name}: {exc.code}: {exc.cause} (fix: {fix})"
            raise MCPError(INTERNAL_ERROR, message, {"code": exc.code, "fix": fix}) from exc
        return bounded(matched, send)

    # The SDK leaves `completion()` unannotated; `Handler` is the shape it calls.
    decorate = cast(Callable[[Handler], Handler], server.completion())  # type: ignore[no-untyped-call]
    decorate(complete)
