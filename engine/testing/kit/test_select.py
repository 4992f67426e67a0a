"""`Jobs.select`, the bounded read a bulk action plans with: `list`'s filters plus the stored
error code and a window on the last change, newest first, at most `limit` jobs (`more` when one
past it matched) and at most `scan_limit` rows read (`scan_capped` when it stopped short)."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.drivers.base import Driver
from engine.errors import InvalidArgumentError
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, NackOptions

_serial = 0


async def dead(
    driver: Driver, code: str, *, name: str = "fulfil", tenant: str | None = None
) -> str:
    """One job dead-lettered at the clock's now with `last_error.code` = `code`."""
    global _serial
    _serial += 1
    now = driver.clock.now_ms()
    request = EnqueueRequest(
        id=f"sel{_serial:06d}", run_id=f"selrun{_serial:06d}", name=name, queue="default",
        tenant_id=tenant, idempotency_key=f"sel{_serial}", input={}, run_at=now, max_attempts=3,
    )  # fmt: skip
    await driver.enqueue([request])
    (claimed,) = await driver.claim("w", 1, 60_000, ["default"])
    error = ErrorPayload(code=code, title="t", cause="c", fix="f", retryable=True)
    await driver.nack(request.id, claimed.token, NackOptions(error=error, dead_letter=True))
    return request.id


async def test_select_filters_by_error_code_and_the_window_of_the_last_change(
    jobs: Jobs, clock: ManualClock
) -> None:
    old = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    clock.advance(60_000)
    since = clock.now_ms()
    recent = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
    await dead(jobs.driver, "JOB_FAILED")
    await dead(jobs.driver, "DRIVER_UNAVAILABLE", name="other")
    tenant_job = await dead(jobs.driver, "DRIVER_UNAVAILABLE", tenant="acme")

    found = await jobs.select(
        state="dead", name="fulfil", error_code="DRIVER_UNAVAILABLE", changed_after=since
    )
    assert [j.id for j in found.jobs] == [tenant_job, recent]
    assert (found.more, found.scan_capped) == (False, False)

    earlier = await jobs.select(error_code="DRIVER_UNAVAILABLE", changed_before=since)
    assert [j.id for j in earlier.jobs] == [old]
    one_tenant = await jobs.select(error_code="DRIVER_UNAVAILABLE", tenant_id="acme")
    assert [j.id for j in one_tenant.jobs] == [tenant_job]
    assert (await jobs.select(state="ready", error_code="DRIVER_UNAVAILABLE")).jobs == []


async def test_select_says_when_it_stopped_at_its_limit_or_its_scan(
    jobs: Jobs, clock: ManualClock
) -> None:
    ids = [await dead(jobs.driver, "E") for _ in range(5)]
    await dead(jobs.driver, "OTHER")

    capped = await jobs.select(error_code="E", limit=3)
    assert [j.id for j in capped.jobs] == ids[::-1][:3]
    assert capped.more and not capped.scan_capped

    # The newest row does not match; two rows read find one match and stop short of the rest.
    short = await jobs.select(error_code="E", scan_limit=2)
    assert [j.id for j in short.jobs] == [ids[-1]]
    assert (short.more, short.scanned, short.scan_capped) == (False, 2, True)

    whole = await jobs.select(error_code="E")
    assert len(whole.jobs) == 5 and whole.scanned == 6 and not whole.scan_capped


async def test_select_refuses_out_of_bounds_arguments(jobs: Jobs) -> None:
    for arguments in ({"limit": 0}, {"changed_after": -1}, {"error_code": ""}, {"scan_limit": 0}):
        try:
            await jobs.select(**arguments)
        except InvalidArgumentError:
            continue
        raise AssertionError(f"{arguments} was accepted")
