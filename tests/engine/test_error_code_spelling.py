"""A bulk filter's `error_code` is matched exactly against the stored code: `job_failed` or
`job-failed` matched no job, so `retry_jobs`/`retry-all` planned nothing and said nothing of why.
A known code in another spelling is refused with it as `nearest`; any other text (an app's own
code, which need not be known here) is taken as it is."""

from __future__ import annotations

import pytest

from engine import Jobs
from engine.errors import InvalidArgumentError


@pytest.mark.parametrize("typed", ["job_failed", "job-failed", "JobFailed", "Job_Failed"])
async def test_a_known_code_in_another_spelling_is_refused_with_it(jobs: Jobs, typed: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await jobs.select(error_code=typed)
    assert raised.value.argument == "error_code" and raised.value.nearest == "JOB_FAILED"
    assert not raised.value.retryable
    selected = await jobs.select(error_code=str(raised.value.nearest))
    assert selected.jobs == []


async def test_any_other_code_is_taken_as_it_is(jobs: Jobs) -> None:
    for code in ("JOB_FAILED", "PAYMENT_DECLINED", "job_failed_later"):
        assert (await jobs.select(error_code=code)).jobs == []
