"""Confirmation before an MCP write: the person sees the dry-run plan and says yes, or nothing
is written.

A client that can elicit is asked through the SDK's resolver route (`Resolve(fn)` returning
`Elicit(...)`): a standalone `elicitation/create` mid-call on 2025-11-25 connections, the
input-required round trip on 2026-07-28 ones. A client that cannot gets a two-step instead: the
dry run answers a confirm token bound to the plan, and the write needs it.

A token is `payload.mac`: HMAC-SHA256 under a secret made when the server starts, over the
tool, its arguments and tenant (`key`), the plan's digest, the instant the plan was taken at and
the expiry. Single use is tracked in this process: one server process is its own authority, and
a restart (new secret) voids every token. Several server processes behind one address do not
share tokens; a client whose write lands on another process gets CONFIRMATION_INVALID and reruns
the dry run.

A tool plugs in with a `ConfirmedWrite` (its plan and its write) and two resolvers from
`asker(...)`; `guarded(...)` runs the call.
"""

# No `from __future__ import annotations`: the SDK reads the resolvers' signatures at
# registration, and their `Resolve(...)` markers are built per tool in `resolvers`.

import base64
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, TypeVar

from mcp.server.mcpserver import Context, Elicit, Resolve
from mcp.server.mcpserver.resolve import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    ElicitationResult,
)
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field

from engine.instants import iso
from mcp_jobs.errors import (
    ConfirmationInvalidError,
    ConfirmationRequiredError,
    ScopeMissingError,
    WriteDeclinedError,
)
from mcp_jobs.operations.models import ConfirmOffer, Envelope, Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.confirm_answer import asked
from mcp_jobs.server.oauth_grants import scope_refusal
from schemas.errors import NextCall

logger = logging.getLogger("mcp_jobs.server")

# The first revision that carries elicitation in an InputRequiredResult (no server request).
_INPUT_REQUIRED_VERSION = "2026-07-28"
_TOKEN_VERSION = 1

D = TypeVar("D", bound=Envelope)
W = TypeVar("W", bound=Envelope)


class ConfirmWrite(BaseModel):
    """What the person answers: a single yes/no (the plan is in the message above it)."""

    confirm: bool = Field(description="yes: do this write now")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


@dataclass(frozen=True)
class Plan:
    """A dry run's plan, as the person is asked to confirm it and a token binds to it."""

    tool: str
    # The arguments that decide what the write does (not `write`, `confirm`, nor a wait).
    arguments: Mapping[str, Any]
    tenant: str | None
    # The instant the plan was taken at, when it depends on time (prune's cutoffs); the write
    # runs at it so it does what was shown.
    at: int | None
    content: Mapping[str, Any]
    # What the person reads, one paragraph.
    summary: str

    @property
    def key(self) -> str:
        return call_key(self.tool, self.arguments, self.tenant)

    @property
    def digest(self) -> str:
        return _digest([self.key, self.at, self.content])

    def message(self, environment: str) -> str:
        # The digest is in the question: a changed plan is a different question, so an answer
        # given to the old one is not taken for the new one (the SDK compares questions).
        return (
            f"Confirm {self.tool} (a write) in environment {environment}, tenant "
            f"{self.tenant or 'every tenant'}: {self.summary} "
            f"Answer yes to write now; decline and nothing is written. [plan {self.digest[:12]}]"
        )


def call_key(tool: str, arguments: Mapping[str, Any], tenant: str | None) -> str:
    return _digest([tool, dict(arguments), tenant])


@dataclass(frozen=True)
class Redeemed:
    key: str
    plan: str
    at: int | None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class WriteGate:
    """One server's confirm tokens and pinned plan instants. In-process, as the module says."""

    secret: bytes = field(default_factory=lambda: os.urandom(32))
    # nonce -> expiry of every token redeemed and not yet expired.
    _used: dict[str, int] = field(default_factory=dict)
    # call key -> (plan instant, expiry): a time-dependent plan asked about over several
    # input-required rounds keeps the instant of its first round, so the question stays one.
    _pins: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _mac(self, payload: str) -> str:
        return _b64(hmac.new(self.secret, payload.encode(), hashlib.sha256).digest())

    def issue(self, plan: Plan, now: int, ttl_ms: int) -> tuple[str, int]:
        expires = now + ttl_ms
        body = {
            "v": _TOKEN_VERSION,
            "k": plan.key,
            "p": plan.digest,
            "at": plan.at,
            "exp": expires,
            "n": _b64(os.urandom(12)),
        }
        payload = _b64(_canonical(body))
        return f"{payload}.{self._mac(payload)}", expires

    def check(self, token: str, key: str, now: int) -> tuple[Redeemed | None, str]:
        """The token's claims when it is genuine, for this call and unexpired and unused;
        otherwise None and why not."""
        payload, _, mac = token.partition(".")
        if not mac or not hmac.compare_digest(mac, self._mac(payload)):
            return None, "was not issued by this server (or since its restart)"
        body = json.loads(_unb64(payload))
        if body.get("v") != _TOKEN_VERSION or body["k"] != key:
            return None, "was issued for another call (other arguments or tenant)"
        if now >= body["exp"]:
            return None, f"expired at {iso(body['exp'])}"
        self._forget(now)
        if body["n"] in self._used:
            return None, "was already used"
        return Redeemed(key=key, plan=body["p"], at=body["at"]), ""

    def spend(self, token: str, now: int) -> None:
        payload = token.partition(".")[0]
        body = json.loads(_unb64(payload))
        self._used[body["n"]] = body["exp"]

    def pin(self, key: str, now: int, ttl_ms: int) -> int:
        self._forget(now)
        pinned = self._pins.get(key)
        if pinned is None:
            pinned = (now, now + ttl_ms)
            self._pins[key] = pinned
        return pinned[0]

    def unpin(self, key: str) -> None:
        self._pins.pop(key, None)

    def _forget(self, now: int) -> None:
        for nonce in [n for n, exp in self._used.items() if exp <= now]:
            del self._used[nonce]
        for key in [k for k, (_, exp) in self._pins.items() if exp <= now]:
            del self._pins[key]


@dataclass(frozen=True)
class ConfirmedWrite(Generic[D, W]):
    """A write that asks first: how to plan it (a dry run, at an instant when it depends on
    time) and how to do it as planned. Bulk retry/cancel plug in with one of these."""

    tool: str
    arguments: Mapping[str, Any]
    # The dry-run call an error's fix and next_call name.
    dry_run_arguments: Mapping[str, Any]
    # The write call a token's next_call names (the token is added).
    write_arguments: Mapping[str, Any]
    # A plan that depends on time takes `at` (None: now); others ignore it.
    plan: Callable[[Scope, int | None], Awaitable[tuple[D, Plan]]]
    # The write, at the plan's instant (None: now).
    write: Callable[[Scope, int | None], Awaitable[W]]
    time_dependent: bool = False
    # The refusal the write would answer now, given its dry run (None: it would run). No token
    # is handed out, and nobody is asked, for a write that would only be refused.
    refusal: Callable[[Scope, D], Awaitable[Exception | None]] | None = None
    # Whether a write's answer stopped short of its plan (prune's `more`): confirmed by token,
    # it then carries a fresh token for the rest of the same plan, so "call again" is one call.
    goes_on: Callable[[W], bool] | None = None

    async def refused(self, scope: Scope, model: D) -> Exception | None:
        return await self.refusal(scope, model) if self.refusal is not None else None

    def dry_run_call(self) -> NextCall:
        return NextCall(tool=self.tool, arguments=dict(self.dry_run_arguments))

    def write_call(self, token: str) -> NextCall:
        return NextCall(tool=self.tool, arguments={**self.write_arguments, "confirm": token})


Mode = Literal["dry_run", "unconfirmed", "elicit", "token"]


@dataclass(frozen=True)
class Planned:
    """What the planning resolver decided, before the person is asked (or not)."""

    mode: Mode
    plan: Plan | None = None
    # The dry run failed: the write answers this instead of asking about nothing.
    error: Exception | None = None
    # The dry-run call a decline points back to (when the person is asked).
    dry_run: NextCall | None = None


def can_elicit(ctx: Context[Any, Any]) -> bool:
    """Whether this client can be asked, on this connection, through the resolver route."""
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return False
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, _INPUT_REQUIRED_VERSION):
        return True
    return bool(ctx.session.can_send_request)


def _ttl_ms(scope: Scope) -> int:
    return int(scope.settings.confirm_ttl_seconds * 1000)


async def plan_write(
    ctx: Context[Any, Any], scope: Scope, gate: WriteGate, spec: ConfirmedWrite[D, W], write: bool
) -> Planned:
    """The planning resolver's body: which route this call takes, and the plan to ask about."""
    if not write:
        return Planned(mode="dry_run")
    if not scope.settings.confirm_writes:
        return Planned(mode="unconfirmed")
    if not can_elicit(ctx):
        # Planned in the call body (at the token's instant when one is given).
        return Planned(mode="token")
    at = None
    if spec.time_dependent:
        key = call_key(spec.tool, spec.arguments, scope.settings.tenant)
        at = gate.pin(key, scope.jobs.clock.now_ms(), _ttl_ms(scope))
    try:
        model, plan = await spec.plan(scope, at)
        refused = await spec.refused(scope, model)
    except Exception as exc:  # answered by the body as the tool's error, nothing asked
        return Planned(mode="elicit", error=exc)
    if refused is not None:
        return Planned(mode="elicit", error=refused)
    return Planned(mode="elicit", plan=plan, dry_run=spec.dry_run_call())


def question(planned: Planned, environment: str) -> Elicit[ConfirmWrite] | None:
    """The asking resolver's body: the question, or None when nothing is to be asked."""
    if planned.mode != "elicit" or planned.plan is None:
        return None
    return Elicit(planned.plan.message(environment), ConfirmWrite)


def asker(
    planner: Callable[..., Awaitable[Planned]],
) -> Callable[..., Any]:
    """The asking resolver over a tool's planning resolver (both reach the tool through
    `Resolve`; the SDK runs the planner once a round and the asker after it)."""

    def ask(
        ctx: Context[Any, Any],
        planned: Annotated[Planned, Resolve(planner)],
    ) -> Elicit[ConfirmWrite] | None:
        asking = question(planned, ctx.request_context.lifespan_context.settings.environment)
        if asking is not None and planned.plan is not None and planned.dry_run is not None:
            asked(planned.plan.tool, planned.dry_run)  # an answer that is no yes/no declines
        return asking

    return ask


async def guarded(
    scope: Scope,
    gate: WriteGate,
    spec: ConfirmedWrite[D, W],
    planned: Planned,
    answer: ElicitationResult[ConfirmWrite],
    token: str | None,
    offer: bool,
) -> D | W:
    """The call: a dry run (with a token offered when `offer`), or a write the person
    confirmed, or the typed refusal."""
    clock = scope.jobs.clock
    if planned.mode == "dry_run":
        model, plan = await spec.plan(scope, None)
        lacking = scope_refusal(scope.settings, spec.tool, mutating=True)
        if lacking is not None:
            return noticed(model, cannot_act(lacking))
        if not offer or await spec.refused(scope, model) is not None:
            return model
        issued, expires = gate.issue(plan, clock.now_ms(), _ttl_ms(scope))
        confirm = ConfirmOffer(token=issued, expires_at=expires, next_call=spec.write_call(issued))
        return model.model_copy(update={"confirm": confirm})
    if planned.mode == "unconfirmed":
        return await spec.write(scope, None)
    if planned.mode == "token":
        return await _with_token(scope, gate, spec, token)
    return await _after_asking(scope, gate, spec, planned, answer)


async def _with_token(
    scope: Scope, gate: WriteGate, spec: ConfirmedWrite[D, W], token: str | None
) -> W:
    clock = scope.jobs.clock
    if token is None:
        model, plan = await spec.plan(scope, None)
        refused = await spec.refused(scope, model)
        if refused is not None:
            raise refused
        issued, expires = gate.issue(plan, clock.now_ms(), _ttl_ms(scope))
        raise ConfirmationRequiredError(spec.tool, spec.write_call(issued), _shown(plan), expires)
    key = call_key(spec.tool, spec.arguments, scope.settings.tenant)
    try:
        claims, why = gate.check(token, key, clock.now_ms())
    except (ValueError, KeyError, TypeError):
        claims, why = None, "is not a confirm token"
    if claims is None:
        raise ConfirmationInvalidError(spec.tool, why, spec.dry_run_call())
    # Spent before anything is awaited: of calls racing with one token, one writes and the
    # rest are told it was used (not a refusal from the write that says to try again).
    gate.spend(token, clock.now_ms())
    _, plan = await spec.plan(scope, claims.at)
    if plan.digest != claims.plan:
        raise ConfirmationInvalidError(
            spec.tool, "was for a plan that has changed since", spec.dry_run_call()
        )
    logger.info("%s: write confirmed by token (plan %s)", spec.tool, plan.digest[:12])
    done = await spec.write(scope, plan.at)
    if spec.goes_on is None or not spec.goes_on(done):
        return done
    # What is left of the plan the person confirmed (the same instant, so the same cutoffs),
    # and a token for it: single use, like the one just spent.
    _, rest = await spec.plan(scope, plan.at)
    issued, expires = gate.issue(rest, clock.now_ms(), _ttl_ms(scope))
    confirm = ConfirmOffer(token=issued, expires_at=expires, next_call=spec.write_call(issued))
    return done.model_copy(update={"confirm": confirm})


async def _after_asking(
    scope: Scope,
    gate: WriteGate,
    spec: ConfirmedWrite[D, W],
    planned: Planned,
    answer: ElicitationResult[ConfirmWrite],
) -> W:
    if planned.error is not None:
        raise planned.error
    assert planned.plan is not None
    asked = planned.plan
    gate.unpin(asked.key)
    if isinstance(answer, DeclinedElicitation | CancelledElicitation):
        raise WriteDeclinedError(spec.tool, answer.action, spec.dry_run_call())
    assert isinstance(answer, AcceptedElicitation)
    if not answer.data.confirm:
        raise WriteDeclinedError(spec.tool, "no", spec.dry_run_call())
    # On 2025-11-25 the person answered while this call waited: the plan they saw must still
    # be the plan (taken again at the same instant).
    _, now_plan = await spec.plan(scope, asked.at)
    if now_plan.digest != asked.digest:
        raise ConfirmationInvalidError(
            spec.tool, "was given for a plan that changed while it was asked", spec.dry_run_call()
        )
    logger.info("%s: write confirmed by the person (plan %s)", spec.tool, asked.digest[:12])
    return await spec.write(scope, asked.at)


def cannot_act(lacking: ScopeMissingError) -> Finding:
    """The notice of a plan the caller may not act on: the scope it lacks, what grants it."""
    return Finding(
        code=lacking.code,
        severity="warning",
        cause=f"{lacking.cause}: acting on this plan (write=true) would be refused, so no "
        "confirm token is offered",
        fix=lacking.fix,
    )


def noticed(model: D, notice: Finding) -> D:
    """`model` (a dry run's answer) with `notice` added to its notices."""
    earlier: list[Finding] = getattr(model, "notices", None) or []
    return model.model_copy(update={"notices": [*earlier, notice]})


def _shown(plan: Plan) -> dict[str, Any]:
    return {"summary": plan.summary, "tenant": plan.tenant, "at": plan.at, **plan.content}
