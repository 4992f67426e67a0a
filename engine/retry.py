"""Retry policy and its pure arithmetic, so inspect can show when attempt N lands (rule 12)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import get_args

from engine import bounds
from engine.errors import InvalidArgumentError, JobDeclarationInvalidError
from schemas.descriptor import Backoff, RetryPolicyInfo


@dataclass(frozen=True)
class Retry:
    """`attempts` counts every run, the first included. Delays are in seconds."""

    attempts: int = 3
    backoff: Backoff = "exponential"
    base_delay: float = 1.0
    max_delay: float = 3600.0

    def validate(self, job: str) -> None:
        def within(
            field: str, value: object, low: float, high: float, expected: str, whole: bool = False
        ) -> None:
            try:  # bounds.number: THE range check (a bool, NaN and infinities refused)
                bounds.number(field, value, low, high, whole=whole)
            except InvalidArgumentError:
                raise JobDeclarationInvalidError(job, field, value, expected) from None

        counted = f"a whole number from 1 to {MAX_ATTEMPTS}"
        within("retry.attempts", self.attempts, 1, MAX_ATTEMPTS, counted, whole=True)
        if self.backoff not in BACKOFFS:
            expected = f"one of {', '.join(BACKOFFS)}"
            raise JobDeclarationInvalidError(job, "retry.backoff", self.backoff, expected)
        within("retry.base_delay", self.base_delay, 0, _FINITE, "a finite number of seconds ≥ 0")
        capped = "finite and ≥ retry.base_delay"
        within("retry.max_delay", self.max_delay, self.base_delay, _FINITE, capped)


# Runs a job may be given, the first included. Its descriptor lists the delay before each, so
# the count bounds that list; 1,000 runs an hour apart are six weeks of trying.
MAX_ATTEMPTS = 1_000
BACKOFFS: tuple[str, ...] = get_args(Backoff)
_FINITE = sys.float_info.max


def retry_delay_ms(policy: Retry, failed_attempt: int) -> int:
    """Delay after the `failed_attempt`-th run fails (1-based), before the next one."""
    base = int(policy.base_delay * 1000)
    cap = int(policy.max_delay * 1000)
    n = max(1, failed_attempt)
    if policy.backoff == "fixed":
        delay = base
    elif policy.backoff == "linear":
        delay = base * n
    else:
        delay = base * (2 ** min(n - 1, 62))
    return min(delay, cap)


def retry_schedule(policy: Retry) -> list[int]:
    """Delays in ms before attempt 2, 3, … `attempts`."""
    return [retry_delay_ms(policy, n) for n in range(1, policy.attempts)]


def describe_retry(policy: Retry) -> RetryPolicyInfo:
    return RetryPolicyInfo(
        attempts=policy.attempts,
        backoff=policy.backoff,
        base_delay_ms=int(policy.base_delay * 1000),
        max_delay_ms=int(policy.max_delay * 1000),
        delays_ms=retry_schedule(policy),
    )
