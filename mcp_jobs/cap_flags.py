"""`mcp-jobs worker`'s concurrency caps, read both ways: its flags as a `Limits` (`limits_of`),
and the caps a live worker published (`WorkerInfo.caps`) as the flags that start another worker
keeping them (`cap_flags`). A worker line a fix prints carries the caps of the workers it joins:
started without them, it would run what their caps hold back."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence

from engine import bounds
from engine.errors import VALUE_LEFT_OUT, InvalidArgumentError
from engine.limits import (
    EVERY_TENANT,
    GLOBAL_CAP,
    Limits,
    QueueNotClaimedError,
    queue_limits_claimed,
)

# Each flag and what it sets, in the order a line writes them. `--per-tenant` takes the cap of
# every tenant (N) and one tenant's own (TENANT=N), as Limits' per_tenant and tenant_overrides.
GLOBAL_FLAG = "--global-cap"
QUEUE_FLAG = "--per-queue"
TENANT_FLAG = "--per-tenant"
_PAIR = "NAME=N, a name and its cap (the last '=' parts them)"
_TENANT = "N, every tenant's cap (once), or TENANT=N, one tenant's own"
# A cap as typed: ASCII digits (str.isdigit takes '²', which int() then refuses).
_WHOLE = re.compile(r"[0-9]+")


def add_cap_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        GLOBAL_FLAG, type=int, metavar="N", help="jobs running at once on every worker in all"
    )
    parser.add_argument(
        QUEUE_FLAG,
        action="append",
        metavar="QUEUE=N",
        help="jobs of QUEUE running at once on every worker (repeatable)",
    )
    parser.add_argument(
        TENANT_FLAG,
        action="append",
        metavar="N|TENANT=N",
        help="jobs of each tenant running at once; TENANT=N: that tenant's own (repeatable)",
    )


def _pairs(flag: str, typed: Sequence[str] | None) -> dict[str, int]:
    """NAME=N pairs, each cap checked as `Limits` checks it but refused as typed after `flag`
    (its fix the line with the nearest cap); a name given twice is refused, not last-wins."""
    pairs: dict[str, int] = {}
    for text in typed or ():
        name, equals, number = text.rpartition("=")
        if not equals or not _WHOLE.fullmatch(number.strip()):
            raise InvalidArgumentError(flag, text, _PAIR)
        if name in pairs:
            raise InvalidArgumentError(flag, text, f"{name}'s cap once ({name}={pairs[name]} too)")
        try:
            pairs[name] = bounds.cap(flag, int(number))
        except InvalidArgumentError as refused:
            nearest = refused.nearest
            raise InvalidArgumentError(
                flag, text, f"{name}=N, {refused.expected}", nearest=f"{name}={nearest}"
            ) from None
    return pairs


def _every_tenant(typed: Sequence[str] | None) -> tuple[int | None, list[str]]:
    """`--per-tenant`'s cap of every tenant (given once at most) and its TENANT=N pairs."""
    every = [text for text in typed or () if _WHOLE.fullmatch(text.strip())]
    if len(every) > 1:
        raise InvalidArgumentError(TENANT_FLAG, every[1], _TENANT)
    pairs = [text for text in typed or () if not _WHOLE.fullmatch(text.strip())]
    return (int(every[0]) if every else None), pairs


def limits_of(args: argparse.Namespace) -> Limits | None:
    """The `Limits` the worker's flags set (each value checked as `Limits` checks it), or None
    when no cap flag was given."""
    per_queue = _pairs(QUEUE_FLAG, args.per_queue)
    per_tenant, pairs = _every_tenant(args.per_tenant)
    overrides = _pairs(TENANT_FLAG, pairs)
    if args.global_cap is None and per_tenant is None and not per_queue and not overrides:
        return None
    return Limits(
        global_cap=args.global_cap,
        per_queue=per_queue,
        per_tenant=per_tenant,
        tenant_overrides=overrides,
    )


def caps_claimed(args: argparse.Namespace, claimed: Sequence[str] | None) -> None:
    """`Worker(...)`'s rule for a cap of a queue it does not claim
    (engine.limits.queue_limits_claimed; None: it claims every queue), refused as typed after
    `--per-queue`: its fix the line with the queue plainly meant, else without that cap. No flag
    sets a queue's rate limit, so `--per-queue` is all it reads."""
    typed = {text.rpartition("=")[0]: text for text in args.per_queue or ()}
    try:
        queue_limits_claimed(Limits(per_queue=_pairs(QUEUE_FLAG, args.per_queue)), claimed)
    except QueueNotClaimedError as refused:
        text = typed[refused.queue]
        raise InvalidArgumentError(
            QUEUE_FLAG,
            text,
            refused.expected,
            nearest=VALUE_LEFT_OUT
            if refused.meant is None
            else f"{refused.meant}={text.rpartition('=')[2]}",
        ) from None


def cap_flags(caps: Mapping[str, int]) -> list[str]:
    """The flags that start a worker keeping `caps` (keyed as `Limits.published` keys them)."""
    flags: list[str] = []
    if GLOBAL_CAP in caps:
        flags += [GLOBAL_FLAG, str(caps[GLOBAL_CAP])]
    for key in sorted(caps):
        kind, _, name = key.partition(":")
        if kind == "queue":
            flags += [QUEUE_FLAG, f"{name}={caps[key]}"]
    if EVERY_TENANT in caps:
        flags += [TENANT_FLAG, str(caps[EVERY_TENANT])]
    for key in sorted(caps):
        kind, _, name = key.partition(":")
        if kind == "tenant" and key != EVERY_TENANT:
            flags += [TENANT_FLAG, f"{name}={caps[key]}"]
    return flags
