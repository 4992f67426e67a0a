"""Retry policy and its pure arithmetic, so inspect can show when attempt N lands (rule 12)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeGuard, get_args

from engine.errors import JobDeclarationInvalidError
from schemas.descriptor import Backoff, RetryPolicyInfo


@dataclass(frozen=True)
class Retry:
    """`attempts` counts every run, the first included. Delays are in seconds."""

    attempts: int = 3
    backoff: Backoff = "exponential"
    base_delay: float = 1.0
    max_delay: float = 3600.0

    def validate(self, job: str) -> None:
        attempts = self.attempts
        if not _whole(attempts) or not 1 <= attempts <= MAX_ATTEMPTS:
            expected = f"a whole number from 1 to {MAX_ATTEMPTS}"
            raise JobDeclarationInvalidError(job, "retry.attempts", attempts, expected)
        if self.backoff not in BACKOFFS:
            expected = f"one of {', '.join(BACKOFFS)}"
            raise JobDeclarationInvalidError(job, "retry.backoff", self.backoff, expected)
        if not _seconds(self.base_delay) or not self.base_delay >= 0:
            raise JobDeclarationInvalidError(
                job, "retry.base_delay", self.base_delay, "a finite number of seconds ≥ 0"
            )
        if not _seconds(self.max_delay) or not self.max_delay >= self.base_delay:
            raise JobDeclarationInvalidError(
                job, "retry.max_delay", self.max_delay, "finite and ≥ retry.base_delay"
            )


# Runs a job may be given, the first included. Its descriptor lists the delay before each, and
# a count of 2**31 (taken before) had every process that published it build that list for
# minutes; 1,000 runs an hour apart are six weeks of trying.
MAX_ATTEMPTS = 1_000
BACKOFFS: tuple[str, ...] = get_args(Backoff)


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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
