"""The error registry and the pure retry arithmetic (rule 12)."""

from __future__ import annotations

import pytest

from engine.errors import REGISTRY, ErrorCodeTakenError, JobNotFoundError, JobsError
from engine.retry import Retry, retry_delay_ms, retry_schedule


def test_a_code_registered_twice_fails_at_class_creation() -> None:
    with pytest.raises(ErrorCodeTakenError):

        class Again(JobsError):
            code = "JOB_NOT_FOUND"

    assert REGISTRY["JOB_NOT_FOUND"] is JobNotFoundError


def test_every_registered_error_has_a_title_and_screaming_snake_code() -> None:
    for code, cls in REGISTRY.items():
        assert code == cls.code and code.isupper() and " " not in code
        assert cls.title


def test_payload_carries_cause_fix_and_next_call() -> None:
    payload = JobNotFoundError("abc", "acme").to_payload()
    assert payload.code == "JOB_NOT_FOUND" and not payload.retryable
    assert "abc" in payload.cause and "acme" in payload.cause
    assert "\n" not in payload.fix
    assert payload.next_call is not None and payload.next_call.tool == "list_jobs"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Retry(attempts=5, backoff="exponential", base_delay=1), [1000, 2000, 4000, 8000]),
        (Retry(attempts=4, backoff="linear", base_delay=3), [3000, 6000, 9000]),
        (Retry(attempts=3, backoff="fixed", base_delay=0.5), [500, 500]),
        (
            Retry(attempts=6, backoff="exponential", base_delay=10, max_delay=45),
            [10_000, 20_000, 40_000, 45_000, 45_000],
        ),
        (Retry(attempts=1), []),
    ],
)
def test_retry_schedule_values(policy: Retry, expected: list[int]) -> None:
    assert retry_schedule(policy) == expected
    assert [retry_delay_ms(policy, n) for n in range(1, policy.attempts)] == expected


def test_a_huge_attempt_number_is_capped_not_overflowing() -> None:
    assert retry_delay_ms(Retry(attempts=2, max_delay=60), 10_000) == 60_000


def test_id_within_finds_the_one_id_a_text_holds() -> None:
    from engine.errors import id_within

    job_id = "01a2461c7bc10000bf834e64fed742a6"
    for held in [f" {job_id}\n", f'"{job_id}"', f"job {job_id}", job_id.upper()]:
        assert id_within(held) == job_id, held
    # Already the id, two ids, an id run into more digits, or none: no one id held.
    for text in [job_id, f"{job_id} {job_id}", f"{job_id}0", "0" * 31, ""]:
        assert id_within(text) is None, text
