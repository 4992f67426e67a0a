"""Durability under server faults, on servers these tests start themselves (skipped, with the
reason, when no nats-server binary is installed):

- one file-storage server SIGKILLed and restarted mid-drain: no acknowledged settle is lost,
  and the drain finishes;
- a 3-node cluster (three local servers, R3 bucket) with one node SIGKILLed mid-drain: no
  acknowledged settle is lost and the drain continues on the two left.

A drain claims and acks in batches on a manual clock; a claim or ack that fails while the
server is gone raises DRIVER_UNAVAILABLE and is tried again. A claim whose reply was lost
leaves its jobs leased to nobody: when nothing is claimable, the clock moves past the lease
(rule 13) and they come back. Every wait is bounded. With MCP_JOBS_NATS_FAULT_FIGURES set,
each test appends what it measured there (JSON lines); figures never decide a pass.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers import open_driver
from engine.drivers.base import AckWrite
from schemas.jobs import EnqueueRequest
from tests.nats.server import NatsServer, binary_or_skip
from tests.support.answering import answered
from tests.support.ports import free_port

pytest.importorskip("nats", reason="the nats extra is not installed")

from engine.drivers.nats import NatsDriver

JOBS = 400
BATCH = 10
LEASE_MS = 30_000
KILL_AFTER = 120
DRAIN_TIMEOUT_S = 120
FIGURES_ENV = "MCP_JOBS_NATS_FAULT_FIGURES"
# Between attempts while the server is away: a retry pace, not a wait for time to pass.
RETRY_PAUSE_S = 0.05
ELECTION_TIMEOUT_S = 60
ELECTION_POLL_S = 0.2
# Until JetStream has elected its leaders (at first, or after a node was killed) it answers
# 503: DRIVER_UNAVAILABLE, which is retryable.
_ELECTION = {"within": ELECTION_TIMEOUT_S, "every": ELECTION_POLL_S}


@pytest.fixture
def binary() -> str:
    return binary_or_skip()


# Past any finish time: an interval that counts every settled row.
EVER = 2**62


def _requests(now: int) -> list[EnqueueRequest]:
    return [
        EnqueueRequest(
            id=f"{n + 1:032x}",
            run_id=f"{100_000 + n:032x}",
            name="work",
            queue="default",
            idempotency_key=f"k{n}",
            input={"n": n},
            run_at=now,
            max_attempts=100,
        )
        for n in range(JOBS)
    ]


@dataclass
class Drain:
    acked: set[str] = field(default_factory=set[str])
    unavailable: int = 0
    killed_at: float | None = None
    first_ack_after_kill: float | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None


async def _done(driver: NatsDriver) -> int:
    # Every done row (the stats count only a recent window's newest 1,000).
    return sum(c.done for c in (await driver.settled_counts(0, EVER)).values())


async def drain(driver: NatsDriver, clock: ManualClock, fault: Callable[[], None]) -> Drain:
    """Claim and ack every job; call `fault` once KILL_AFTER acks are acknowledged."""
    run = Drain()
    with anyio.fail_after(DRAIN_TIMEOUT_S):
        while True:
            try:
                claimed = await driver.claim("drainer", BATCH, LEASE_MS)
                if not claimed:
                    if await _done(driver) == JOBS:
                        break
                    clock.advance(LEASE_MS + 1)  # jobs leased by a claim whose reply was lost
                    continue
                writes = [
                    AckWrite(c.record.id, c.token, {"n": c.record.input["n"]}) for c in claimed
                ]
                outcomes = await driver.ack_many(writes)
            except DriverUnavailableError:
                run.unavailable += 1
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            for write, outcome in zip(writes, outcomes, strict=True):
                if outcome is None:
                    run.acked.add(write.job_id)
                    if run.killed_at is not None and run.first_ack_after_kill is None:
                        run.first_ack_after_kill = time.monotonic()
            if run.killed_at is None and len(run.acked) >= KILL_AFTER:
                run.killed_at = time.monotonic()
                fault()
    run.finished = time.monotonic()
    return run


async def _settled(driver: NatsDriver, run: Drain) -> None:
    """Every acknowledged ack is there, and every job is done."""
    for job_id in sorted(run.acked):
        job = await answered(functools.partial(driver.get, job_id), **_ELECTION)
        assert job.state == "done", job_id
    assert await answered(lambda: _done(driver), **_ELECTION) == JOBS


def _record(name: str, run: Drain, **extra: object) -> None:
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    assert run.finished is not None and run.killed_at is not None
    figures = {
        "test": name,
        "jobs": JOBS,
        "acked_before_kill": KILL_AFTER,
        "drain_s": round(run.finished - run.started, 3),
        "kill_to_first_ack_s": round((run.first_ack_after_kill or run.finished) - run.killed_at, 3),
        "unavailable_errors": run.unavailable,
        **extra,
    }
    with Path(path).open("a") as out:
        out.write(json.dumps(figures) + "\n")


async def _open(url: str, clock: ManualClock) -> NatsDriver:
    driver = cast(NatsDriver, open_driver(url, clock=clock))
    await answered(driver.migrate, **_ELECTION)
    return driver


@pytest.fixture
def single(binary: str, tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(binary, tmp_path / "store", name="single")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_a_server_killed_and_restarted_mid_drain_loses_no_acknowledged_settle(
    single: NatsServer,
) -> None:
    clock = ManualClock()
    driver = await _open(f"{single.url}/faults?storage=file", clock)
    restarted: list[asyncio.Task[None]] = []
    try:
        await driver.enqueue(_requests(clock.now_ms()))

        def crash() -> None:
            single.kill()
            # Back on the same port and store while the drain keeps trying.
            restarted.append(asyncio.create_task(asyncio.to_thread(single.start)))

        run = await drain(driver, clock, crash)
        await restarted[0]
        await _settled(driver, run)
        _record("single_restart", run)
    finally:
        await driver.close()


@pytest.fixture
def cluster(binary: str, tmp_path: Path) -> Iterator[list[NatsServer]]:
    routes = [free_port() for _ in range(3)]
    nodes = [
        NatsServer(binary, tmp_path / f"n{i}", cluster_port=routes[i], routes=routes, name=f"n{i}")
        for i in range(3)
    ]
    for node in nodes:
        node.start()
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


async def test_a_cluster_node_killed_mid_drain_loses_nothing_and_the_drain_continues(
    cluster: list[NatsServer],
) -> None:
    clock = ManualClock()
    hosts = ",".join(n.url.removeprefix("nats://") for n in cluster)
    driver = await _open(f"nats://{hosts}/faults?replicas=3&storage=file", clock)
    try:
        store = await driver._open()
        await driver.enqueue(_requests(clock.now_ms()))
        info = await store.js.stream_info("KV_faults")
        assert info.config.num_replicas == 3
        leader = info.cluster.leader if info.cluster is not None else None
        # The stream's leader: the node whose loss forces an election mid-drain.
        victim = next((n for n in cluster if n.name == leader), cluster[0])
        run = await drain(driver, clock, victim.kill)
        await _settled(driver, run)
        _record("cluster_kill_leader", run, killed=victim.name)
    finally:
        await driver.close()
