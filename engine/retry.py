"""Retry policy and its pure arithmetic, so inspect can show when attempt N lands (rule 12)."""

from __future__ import annotations

from dataclasses import dataclass

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
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool):
            raise JobDeclarationInvalidError(job, "retry.attempts", self.attempts, "an integer ≥ 1")
        if self.attempts < 1:
            raise JobDeclarationInvalidError(job, "retry.attempts", self.attempts, "an integer ≥ 1")
        if not self.base_delay >= 0 or self.base_delay == float("inf"):
            raise JobDeclarationInvalidError(
                job, "retry.base_delay", self.base_delay, "a finite number of seconds ≥ 0"
            )
        if not self.max_delay >= self.base_delay or self.max_delay == float("inf"):
            raise JobDeclarationInvalidError(
                job, "retry.max_delay", self.max_delay, "finite and ≥ retry.base_delay"
            )


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
