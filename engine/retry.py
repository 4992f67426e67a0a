"""Retry policy and its pure arithmetic, so inspect can show when attempt N lands (rule 12)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn, get_args

from engine import bounds
from engine.errors import InvalidArgumentError, JobDeclarationInvalidError
from engine.retention import duration_text_ms
from schemas.descriptor import Backoff, RetryPolicyInfo


@dataclass(frozen=True)
class Retry:
    """`attempts` counts every run, the first included. Delays are in seconds."""

    attempts: int = 3
    backoff: Backoff = "exponential"
    base_delay: float = 1.0
    max_delay: float = 3600.0

    def validate(self, job: str) -> None:
        def within(field: str, value: object, low: float, high: float, expected: str) -> None:
            try:  # bounds.number: THE range check (a bool, NaN and infinities refused)
                bounds.number(f"retry.{field}", value, low, high, whole=field == "attempts")
            except InvalidArgumentError:
                refuse(field, value, expected)

        def refuse(field: str, value: object, expected: str) -> NoReturn:
            # A dataclass's repr is the call that builds it: the fix is this Retry mended.
            mended = repr(self.mended())
            raise JobDeclarationInvalidError(job, f"retry.{field}", value, expected, mended)

        within(
            "attempts", self.attempts, 1, MAX_ATTEMPTS, f"a whole number from 1 to {MAX_ATTEMPTS}"
        )
        if self.backoff not in BACKOFFS:
            refuse("backoff", self.backoff, f"one of {', '.join(BACKOFFS)}")
        most = bounds.MAX_DELAY_SECONDS
        within("base_delay", self.base_delay, 0, most, f"a number of seconds from 0 to {most}")
        within(
            "max_delay",
            self.max_delay,
            self.base_delay,
            most,
            f"a number of seconds from retry.base_delay to {most}",
        )

    def mended(self) -> Retry:
        """This policy with each value out of bounds replaced by the nearest allowed one (the
        default where none is nearest: NaN, a str)."""

        def near(value: object, low: float, high: float, default: float) -> float:
            if isinstance(value, str):  # "7d": the seconds it spells, as the settings read it
                ms = duration_text_ms(value)
                value = value if ms is None else ms / 1000
            try:
                return bounds.number("value", value, low, high, whole=False)
            except InvalidArgumentError as exc:
                return float(exc.nearest) if isinstance(exc.nearest, int | float) else default

        most = bounds.MAX_DELAY_SECONDS
        attempts = Retry.attempts
        # 2.0 is plainly 2; a fraction is no nearer one whole number than the other.
        given: object = self.attempts
        whole = isinstance(given, float) and given.is_integer()
        if (isinstance(given, int) and not isinstance(given, bool)) or whole:
            attempts = int(near(given, 1, MAX_ATTEMPTS, Retry.attempts))
        base = near(self.base_delay, 0, most, Retry.base_delay)
        top = near(self.max_delay, base, most, max(base, Retry.max_delay))
        backoff = self.backoff if self.backoff in BACKOFFS else Retry.backoff
        return Retry(attempts=attempts, backoff=backoff, base_delay=base, max_delay=top)


# Runs a job may be given, the first included. Its descriptor lists the delay before each, so
# the count bounds that list; 1,000 runs an hour apart are six weeks of trying.
MAX_ATTEMPTS = 1_000
BACKOFFS: tuple[str, ...] = get_args(Backoff)


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
    if not isinstance(policy, Retry):
        raise InvalidArgumentError("policy", policy, "a Retry(...), as @job(retry=...) takes")
    return [retry_delay_ms(policy, n) for n in range(1, policy.attempts)]


def describe_retry(policy: Retry) -> RetryPolicyInfo:
    return RetryPolicyInfo(
        attempts=policy.attempts,
        backoff=policy.backoff,
        base_delay_ms=int(policy.base_delay * 1000),
        max_delay_ms=int(policy.max_delay * 1000),
        delays_ms=retry_schedule(policy),
    )
