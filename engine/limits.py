"""Caps on how many jobs run at once: in all, per queue, per tenant, and per job name.

The caps are slots in the database (`Driver.acquire_slots`), so they hold across every worker on
every machine sharing it. A job over a cap is SHED: handed back ready, no attempt burned, no
`last_error` (rule 7). The reason is a log field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TypeVar

from engine import bounds
from engine.errors import VALUE_LEFT_OUT, InvalidArgumentError
from engine.meant import meant_as
from engine.rate_limits import RateLimit, checked_rate

V = TypeVar("V")

# Cap keys beside "job:NAME", "queue:Q" and "tenant:T": the cap of every job, and (published only)
# the cap of each tenant not overridden, with no colon, so no tenant's name can be it.
GLOBAL_CAP = "global"
EVERY_TENANT = "tenant"


def _check(name: str, value: int | None) -> None:
    if value is not None:
        bounds.cap(name, value)


def _named(
    name: str, value: Mapping[str, V], check: Callable[[str, object], object]
) -> list[tuple[str, V]]:
    """`value`'s items when it is a mapping keyed by names a queue or tenant can have (`check`,
    engine.bounds' rule for the kind): a cap keyed by "" (or a NUL, or "*") matched nothing and
    held nothing back, without a word."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(name, value, "a dict of name to limit")
    for key in value:
        check(f"{name} key", key)
    return list(value.items())


def _rate(name: str, rate: object) -> None:
    if rate is None:
        raise InvalidArgumentError(name, rate, "a RateLimit(limit, per=seconds)")
    checked_rate(name, rate, keyed=False)


@dataclass(frozen=True)
class Limits:
    global_cap: int | None = None
    per_queue: Mapping[str, int] = field(default_factory=dict[str, int])
    # One cap for every tenant, with optional overrides for named tenants.
    per_tenant: int | None = None
    tenant_overrides: Mapping[str, int] = field(default_factory=dict[str, int])
    # Rate limits (engine.rate_limits): starts per period per queue, and per tenant with
    # overrides for named tenants. A job's own rate is declared on the job.
    rate_per_queue: Mapping[str, RateLimit] = field(default_factory=dict[str, RateLimit])
    rate_per_tenant: RateLimit | None = None
    rate_tenant_overrides: Mapping[str, RateLimit] = field(default_factory=dict[str, RateLimit])

    def __post_init__(self) -> None:
        _check("global_cap", self.global_cap)
        _check("per_tenant", self.per_tenant)
        queue_rule, tenant_rule = bounds.queue_name, bounds.tenant
        # A value in a mapping is a cap or a rate, never None: taken, None held nothing back (a
        # tenant's None exempted it from `per_tenant`) and crashed the worker at a queue's.
        for queue, cap in _named("per_queue", self.per_queue, queue_rule):
            bounds.cap(f"per_queue[{queue!r}]", cap)
        for tenant, cap in _named("tenant_overrides", self.tenant_overrides, tenant_rule):
            bounds.cap(f"tenant_overrides[{tenant!r}]", cap)
        checked_rate("rate_per_tenant", self.rate_per_tenant, keyed=False)
        for queue, rate in _named("rate_per_queue", self.rate_per_queue, queue_rule):
            _rate(f"rate_per_queue[{queue!r}]", rate)
        for tenant, rate in _named(
            "rate_tenant_overrides", self.rate_tenant_overrides, tenant_rule
        ):
            _rate(f"rate_tenant_overrides[{tenant!r}]", rate)
        # Read-only copies: the caller's dict changed after this check would hold values
        # nothing checked.
        for name in ("per_queue", "tenant_overrides", "rate_per_queue", "rate_tenant_overrides"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def has_rates(self) -> bool:
        return bool(self.rate_per_queue or self.rate_per_tenant or self.rate_tenant_overrides)

    def tenant_rate(self, tenant_id: str | None) -> RateLimit | None:
        if tenant_id is None:
            return None
        return self.rate_tenant_overrides.get(tenant_id, self.rate_per_tenant)

    def published(self) -> dict[str, int] | None:
        """The caps as a worker publishes them with its presence, by the key `caps_for` names
        (`EVERY_TENANT` for `per_tenant`); None when there are none."""
        caps = {f"queue:{queue}": cap for queue, cap in self.per_queue.items()}
        caps.update((f"tenant:{tenant}", cap) for tenant, cap in self.tenant_overrides.items())
        if self.per_tenant is not None:
            caps[EVERY_TENANT] = self.per_tenant
        if self.global_cap is not None:
            caps[GLOBAL_CAP] = self.global_cap
        return caps or None

    def caps_for(
        self, queue: str, tenant_id: str | None, job: str, job_concurrency: int | None
    ) -> list[tuple[str, int]]:
        caps: list[tuple[str, int]] = []
        if job_concurrency is not None:
            caps.append((f"job:{job}", job_concurrency))
        if queue in self.per_queue:
            caps.append((f"queue:{queue}", self.per_queue[queue]))
        if tenant_id is not None:
            cap = self.tenant_overrides.get(tenant_id, self.per_tenant)
            if cap is not None:
                caps.append((f"tenant:{tenant_id}", cap))
        if self.global_cap is not None:
            caps.append((GLOBAL_CAP, self.global_cap))
        return caps


# The `Limits` fields keyed by queue, and what each sets there. A queue's cap or rate holds on
# the workers that claim it; tenants are not claimed, so their fields are not here.
QUEUE_FIELDS = {"per_queue": "cap", "rate_per_queue": "rate limit"}


def _meant_queues(by_queue: Mapping[str, object], claimed: Sequence[str]) -> dict[str, str | None]:
    """Each key of `by_queue` that `claimed` does not hold, and the claimed queue it plainly
    stands for (None: none). Two slips never stand for one queue, nor one for a queue given."""
    meant: dict[str, str | None] = {}
    for queue in by_queue:
        if queue not in claimed:
            taken = [*by_queue, *(m for m in meant.values() if m is not None)]
            meant[queue] = meant_as(queue, claimed, given=taken)
    return meant


def _mended_line(limits: Limits, claimed: Sequence[str]) -> str:
    """`limits` as the call that makes it, every key of an unclaimed queue mended to the queue
    it stands for or left out, and every other field as given (a fix that dropped them would
    lift the limits they set)."""
    given: list[str] = []
    for spec in fields(limits):
        value: object = getattr(limits, spec.name)
        if isinstance(value, Mapping):
            value = dict(value)  # read-only copies print as mappingproxy(...), which no call takes
            if spec.name in QUEUE_FIELDS:
                meant = _meant_queues(value, claimed)
                value = {
                    meant.get(queue) or queue: limit
                    for queue, limit in value.items()
                    if queue not in meant or meant[queue] is not None
                }
        if value is not None and value != {}:  # a field left as its default
            given.append(f"{spec.name}={value!r}")
    return f"Limits({', '.join(given)})"


class QueueNotClaimedError(InvalidArgumentError):
    """INVALID_ARGUMENT for a key of `per_queue` or `rate_per_queue` (`field`) naming a queue the
    worker does not claim: taken, it limited nothing and said nothing (a queue's cap or rate holds
    on the workers that claim it). `meant`: the claimed queue it plainly stands for, else None
    (left out of the fix)."""

    def __init__(self, field_name: str, queue: str, limits: Limits, claimed: Sequence[str]) -> None:
        meant = _meant_queues(getattr(limits, field_name), claimed)[queue]
        super().__init__(
            f"{field_name} key",
            queue,
            f"a queue this worker claims ({', '.join(claimed) or 'none'}); a queue's "
            f"{QUEUE_FIELDS[field_name]} holds on the workers that claim it",
            fix=_mended_line(limits, claimed),
            nearest=VALUE_LEFT_OUT if meant is None else meant,
        )
        self.field = field_name
        self.queue = queue
        self.meant = meant


def queue_limits_claimed(limits: Limits, claimed: Sequence[str] | None) -> None:
    """QueueNotClaimedError for the first key of `limits`' per-queue fields (QUEUE_FIELDS) whose
    queue `claimed` does not hold (None: the worker claims every queue, so every one holds). The
    one rule `Worker(...)` and `mcp-jobs worker --per-queue` apply."""
    if claimed is None:
        return
    for field_name in QUEUE_FIELDS:
        for queue in getattr(limits, field_name):
            if queue not in claimed:
                raise QueueNotClaimedError(field_name, queue, limits, claimed)
