"""Delete markers on NATS: the pruner's pass purges each an hour after its delete (on the
injected clock), never a value written after it, scans each message once, and leaves a stream
that a new process replays without the markers of everything ever deleted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from engine import Jobs, ManualClock
from engine.drivers import open_driver
from engine.drivers.base import TOMBSTONES, AckWrite
from engine.pruner import TOMBSTONE_KEEP_MS, Pruner
from engine.retention import Policy, Retention, plan
from engine.rules import dedupe_key

pytest.importorskip("nats", reason="the nats extra is not installed")

import nats.js.errors

from engine.drivers.nats import NatsDriver, keys
from engine.drivers.nats.store import Store
from tests.nats.test_driver import _request

HOUR = TOMBSTONE_KEEP_MS


async def _settle_and_prune(driver: NatsDriver, clock: ManualClock, ns: range) -> list[str]:
    """Jobs `ns` run and are pruned: the keys their deletes left a marker on."""
    await driver.enqueue([_request(n, clock.now_ms()) for n in ns])
    claimed = await driver.claim("w", len(ns), 60_000)
    await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in claimed])
    clock.advance(2)
    await driver.prune(plan(Policy(1, 1, 1, 1), clock.now_ms()), 100)
    return [k for n in ns for k in (keys.job(f"{n:032x}"), _dedupe(n))]


def _dedupe(n: int) -> str:
    return keys.dedupe(dedupe_key("work", None, f"k{n}"))


async def _last(store: Store, key: str) -> str | None:
    """What the stream holds last for `key`: 'DEL' or 'PURGE' (a marker), 'value', or None."""
    try:
        msg = await store.js.get_last_msg(store.replica.stream, f"$KV.{store.kv._name}.{key}")
    except nats.js.errors.NotFoundError:
        return None
    return str((msg.headers or {}).get("KV-Operation", "value"))


async def _messages(store: Store) -> int:
    return (await store.js.stream_info(store.replica.stream)).state.messages


def _forget(driver: NatsDriver, clock: ManualClock) -> Awaitable[int]:
    return driver.forget_tombstones(clock.now_ms() - HOUR, 1_000)


async def test_only_nats_keeps_markers_to_forget(jobs: Jobs) -> None:
    assert TOMBSTONES.offered_by(jobs.driver)


async def test_markers_go_an_hour_after_their_delete_and_younger_ones_stay(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()
    old = await _settle_and_prune(driver, clock, range(3))
    assert {await _last(store, k) for k in old} == {"DEL"}
    assert await _forget(driver, clock) == 0  # none is an hour old; this pass marks the stream

    clock.advance(HOUR // 2)
    young = await _settle_and_prune(driver, clock, range(3, 5))
    assert await _forget(driver, clock) == 0

    clock.advance(HOUR // 2)
    assert await _forget(driver, clock) == len(old)
    assert [await _last(store, k) for k in old] == [None] * len(old)
    assert {await _last(store, k) for k in young} == {"DEL"}

    clock.advance(HOUR // 2 + 1_000)
    assert await _forget(driver, clock) == len(young)
    assert [await _last(store, k) for k in young] == [None] * len(young)
    # What a new process replays: the keys that hold a value and the purge's own record.
    kept = set(await store.kv.keys())
    assert keys.TOMBSTONES in kept
    assert await _messages(store) == len(kept)


async def test_a_value_written_after_its_marker_stays_though_it_races_the_purge(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job 0's settle freed its dedupe key (a marker); an enqueue of the same key writes it
    anew between the scan that found the marker and the purge: the purge takes the marker
    only, so the key still names the new job and a repeat is answered by it."""
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()
    await _settle_and_prune(driver, clock, range(1))
    assert await _last(store, _dedupe(0)) == "DEL"
    await _forget(driver, clock)
    clock.advance(HOUR + 1)
    again = _request(100, clock.now_ms(), key="k0")
    purge = store.js.purge_stream

    async def racing_purge(*args: Any, **kwargs: Any) -> bool:
        if kwargs.get("subject", "").endswith(_dedupe(0)):
            await driver.enqueue([again])
        return await purge(*args, **kwargs)

    monkeypatch.setattr(store.js, "purge_stream", racing_purge)
    assert await _forget(driver, clock) >= 1
    assert await _last(store, _dedupe(0)) == "value"
    (result,) = await driver.enqueue([_request(101, clock.now_ms(), key="k0")])
    assert result.id == again.id and result.deduped


async def test_each_message_is_scanned_once_and_a_new_pruner_goes_on_from_there(
    jobs: Jobs, database_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = cast(NatsDriver, jobs.driver)
    old = await _settle_and_prune(driver, clock, range(4))
    store = await driver._open()
    scanned_before = (await store.js.stream_info(store.replica.stream)).state.last_seq
    await _forget(driver, clock)
    clock.advance(HOUR + 1)
    assert await driver.forget_tombstones(clock.now_ms() - HOUR, 3) == 3  # a batch at a time
    assert await _forget(driver, clock) == len(old) - 3
    assert await _forget(driver, clock) == 0

    other = cast(NatsDriver, open_driver(database_url, clock=clock))
    await other.migrate()
    try:
        store = await other._open()
        scans: list[int] = []
        subscribe: Callable[..., Awaitable[Any]] = store.js.pull_subscribe

        async def counted(*args: Any, **kwargs: Any) -> Any:
            scans.append(kwargs["config"].opt_start_seq)
            return await subscribe(*args, **kwargs)

        monkeypatch.setattr(store.js, "pull_subscribe", counted)
        assert await _forget(other, clock) == 0
        assert scans == []  # the cursor is stored: nothing below it is read again
        await _settle_and_prune(other, clock, range(10, 12))
        clock.advance(HOUR + 1)
        await _forget(other, clock)  # marks the stream after the new deletes
        clock.advance(HOUR + 1)
        assert await _forget(other, clock) == 4
        assert scans and scans == sorted(set(scans)) and scans[0] > scanned_before
    finally:
        await other.close()


async def test_the_pruners_pass_purges_the_markers_its_deletes_left(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(NatsDriver, jobs.driver)
    store = await driver._open()
    pruner = Pruner(jobs, retention=Retention(done=1), holder="w1", pause_ms=0, environ={})
    await driver.enqueue([_request(n, clock.now_ms()) for n in range(5)])
    claimed = await driver.claim("w", 5, 60_000)
    await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in claimed])
    clock.advance(2_000)
    assert sum((await pruner.pass_once()).by_state().values()) == 5
    gone = [keys.job(f"{n:032x}") for n in range(5)]
    assert {await _last(store, k) for k in gone} == {"DEL"}

    clock.advance(HOUR + 1)
    await pruner.pass_once()
    assert [await _last(store, k) for k in gone] == [None] * 5
    assert await _messages(store) == len(set(await store.kv.keys()))
