"""The Redis reads that once fetched every record they looked at. The stats read none: the live
rows are folded by one script on the server and the dead and failed rows are counted by their
groups' sets (engine/drivers/redis/stats.py); these check that the counts are still
rules.queue_stats's through every move into and out of those groups, and that rows stored
before the groups existed are counted and then regrouped. A filtered list reads only the records
it answers (reads.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from engine import Jobs, ManualClock, rules
from engine.drivers.base import AckWrite
from engine.retention import DEFAULT_POLICY, plan
from engine.rules import SETTLING_STATES as SETTLING
from schemas.jobs import EnqueueRequest, JobFilter, JobRecord, NackOptions

pytest.importorskip("redis", reason="the redis extra is not installed")

from engine.drivers.redis import RedisDriver
from engine.drivers.redis.codec import failing_group
from engine.drivers.redis.store import Store

FILTERS: list[tuple[list[str] | None, str | None]] = [
    (None, None),
    (["a"], None),
    (["b", "nowhere"], None),
    (None, "t"),
    (None, "nobody"),
    (["a"], "t"),
]


def _request(n: int, now: int, queue: str, tenant: str | None, run_at: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{5000 + n:032x}",
        name="work",
        queue=queue,
        tenant_id=tenant,
        idempotency_key=f"k{n}",
        input={},
        run_at=run_at,
        max_attempts=3,
    )


def _store(driver: RedisDriver) -> Store:
    return cast(Store, driver._store)  # pyright: ignore[reportPrivateUsage]


class _RecordReads:
    """Counts the job records a reading fetched (every record read goes through these)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = 0
        many, one = store.hgetall_many, store.hgetall

        async def hgetall_many(keys: Sequence[str]) -> list[dict[str, str]]:
            self.read += len(keys)
            return await many(keys)

        async def hgetall(key: str) -> dict[str, str]:
            self.read += 1
            return await one(key)

        monkeypatch.setattr(store, "hgetall_many", hgetall_many)
        monkeypatch.setattr(store, "hgetall", hgetall)


async def _every_kind(driver: RedisDriver, clock: ManualClock) -> list[str]:
    """Rows of every state over queues a and b and tenants t, u and none; answers their ids."""
    now = clock.now_ms()
    shape = [(q, t) for q in ("a", "b") for t in ("t", "u", None)]
    requests = [_request(n, now, *shape[n % len(shape)], now - 100 * n) for n in range(24)]
    requests.append(_request(24, now, "a", "t", now + 60_000))  # delayed
    await driver.enqueue(requests)
    claimed = {c.record.id: c.token for c in await driver.claim("w", 18, 600_000)}
    ids = sorted(claimed)
    clock.advance(5)
    for i in ids[:5]:
        await driver.nack(i, claimed[i], NackOptions(fail=True))
    for i in ids[5:10]:
        await driver.nack(i, claimed[i], NackOptions(dead_letter=True))
    await driver.ack_many([AckWrite(i, claimed[i], None) for i in ids[10:13]])
    await driver.nack(ids[13], claimed[ids[13]], NackOptions(park=True, delay_ms=5))
    # Out of the groups again: a failed and a dead job retried.
    await driver.retry(ids[0], None, False, "op")
    await driver.retry(ids[5], None, False, "op")
    clock.advance(10)  # the parked row is due; leases of the rest have 600 s to run
    return [r.id for r in requests]


async def _prune_failed_and_dead(driver: RedisDriver, clock: ManualClock) -> None:
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), states=("failed", "dead"))
    assert sum(c.rows for c in await driver.prune(cutoffs, 100)) == 8


async def _agree(driver: RedisDriver, clock: ManualClock, ids: list[str]) -> None:
    records: list[JobRecord] = []
    for i in ids:
        try:
            records.append(await driver.get(i, None))
        except Exception:  # pruned
            continue
    for queues, tenant in FILTERS:
        expected = rules.queue_stats(records, clock.now_ms(), queues=queues, tenant_id=tenant)
        assert await driver.stats(queues, tenant_id=tenant) == expected, (queues, tenant)


async def test_stats_read_no_job_record_and_count_what_rules_count(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    ids = await _every_kind(driver, clock)
    records = [await driver.get(i, None) for i in ids]
    assert {r.state for r in records} == {
        "ready",
        "delayed",
        "running",
        "suspended",
        "done",
        "failed",
        "dead",
    }
    reads = _RecordReads(_store(driver), monkeypatch)
    for queues, tenant in FILTERS:
        expected = rules.queue_stats(records, clock.now_ms(), queues=queues, tenant_id=tenant)
        assert await driver.stats(queues, tenant_id=tenant) == expected, (queues, tenant)
    assert reads.read == 0
    # Retention takes the failed and dead rows: their groups count them no more.
    clock.advance(31 * 86_400_000)
    await _prune_failed_and_dead(driver, clock)
    await _agree(driver, clock, ids)
    reads.read = 0
    assert [(s.failed, s.dead) for s in await driver.stats()] == [(0, 0), (0, 0)]
    assert reads.read == 0


async def test_rows_stored_before_their_groups_are_counted_then_regrouped_by_migrate(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    keys = store.keys
    ids = await _every_kind(driver, clock)
    client: Any = store.client
    groups = await client.smembers(keys.failing_groups)
    assert groups
    # As an older build left them: no group sets, and an id in `failing` that is done now.
    await client.delete(keys.failing_groups, *(keys.failing_group(g) for g in groups))
    records = [await driver.get(i, None) for i in ids]
    done = next(r.id for r in records if r.state == "done")
    await client.sadd(keys.failing, done)
    reads = _RecordReads(store, monkeypatch)
    await _agree(driver, clock, ids)
    assert reads.read > 0  # counted from the rows
    # A list of dead jobs walks every id meanwhile, and finds them all.
    dead = sorted((r.id for r in records if r.state == "dead"), reverse=True)
    assert [j.id for j in (await driver.list_jobs(JobFilter(states=("dead",)))).jobs] == dead
    await driver.migrate()
    held = {failing_group(r.state, r.tenant_id, r.queue) for r in records if r.state in SETTLING}
    assert held == groups  # a retry forgot the groups it emptied: nothing older to drop
    assert await client.smembers(keys.failing_groups) == held
    assert not await client.sismember(keys.failing, done)
    reads.read = 0
    await _agree(driver, clock, ids)
    assert reads.read == len(ids)  # _agree's own gets; the stats read none
    # An older build left emptied groups listed: the next migrate forgets them.
    await client.sadd(keys.failing_groups, failing_group("dead", None, "gone"))
    await driver.migrate()
    assert await client.smembers(keys.failing_groups) == held


async def test_a_group_leaves_the_list_the_reads_walk_once_it_is_empty(
    jobs: Jobs, clock: ManualClock
) -> None:
    """`failgroups` lists exactly the groups that hold jobs after every move out of them (a
    retry, a settle out of failed, retention), so the stats and dead/failed lists walk the
    groups that hold jobs, not every (state, tenant, queue) that ever failed."""
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    client: Any = store.client
    ids = await _every_kind(driver, clock)

    async def listed_groups_are_the_held_ones() -> set[str]:
        held: set[str] = set()
        for i in ids:
            try:
                r = await driver.get(i, None)
            except Exception:  # pruned
                continue
            if r.state in SETTLING:
                held.add(failing_group(r.state, r.tenant_id, r.queue))
        assert await client.smembers(store.keys.failing_groups) == held
        return held

    held = await listed_groups_are_the_held_ones()
    # Every failed job retried and settled done: the failed groups empty and go.
    failed = [i for i in ids if (await driver.get(i, None)).state == "failed"]
    assert failed
    for i in failed:
        await driver.retry(i, None, False, "op")
    claimed = await driver.claim("w", 100, 600_000)
    await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in claimed])
    now_held = await listed_groups_are_the_held_ones()
    assert now_held < held and all(g.startswith('"dead"') for g in now_held)
    # Retention takes the dead rows: no group is left listed.
    clock.advance(31 * 86_400_000)
    cutoffs = plan(DEFAULT_POLICY, clock.now_ms(), states=("failed", "dead"))
    assert sum(c.rows for c in await driver.prune(cutoffs, 100)) > 0
    assert await listed_groups_are_the_held_ones() == set()


async def test_a_claim_over_every_queue_walks_only_the_queues_that_hold_jobs(
    jobs: Jobs, clock: ManualClock
) -> None:
    """A claim for every queue forgets a queue it finds empty, and an enqueue (or a retry, or
    a delayed row) keeps or brings it back, so no job becomes unclaimable and the walk costs
    the queues that hold jobs, not every name ever used."""
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    client: Any = store.client
    now = clock.now_ms()
    await driver.enqueue([_request(n, now, f"q{n}", None, now) for n in range(50)])
    await driver.enqueue([_request(50, now, "later", None, now + 60_000)])
    claimed = await driver.claim("w", 100, 600_000)
    assert len(claimed) == 50
    await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in claimed[:49]])
    nacked = claimed[49].record
    await driver.nack(nacked.id, claimed[49].token, NackOptions(fail=True))
    assert await driver.claim("w", 100, 600_000) == []
    # The delayed row's queue stays; the emptied ones are gone.
    assert await client.smembers(store.keys.queues) == {"later"}
    await driver.enqueue([_request(51, now, "q7", None, now)])
    await driver.retry(nacked.id, None, False, "op")
    clock.advance(60_000)
    again = await driver.claim("w", 100, 600_000)
    assert sorted(c.record.id for c in again) == sorted([f"{51:032x}", nacked.id, f"{50:032x}"])
    assert await driver.claim("w", 100, 600_000) == []
    assert await client.smembers(store.keys.queues) == set()


async def test_a_filtered_list_reads_only_the_records_it_answers(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list script applies the filter to four fields on the server, a chunk of ids at a
    time: pages cross chunk edges without a row lost or repeated, and a filter that matches
    few rows reads no record it drops."""
    from engine.drivers.redis import reads

    driver = cast(RedisDriver, jobs.driver)
    ids = await _every_kind(driver, clock)
    odd = [_request(100 + n, clock.now_ms(), 'q "\\ü😀', "t😀", clock.now_ms()) for n in range(3)]
    await driver.enqueue(odd)
    records = [await driver.get(i, None) for i in [*ids, *(r.id for r in odd)]]
    monkeypatch.setattr(reads, "_LIST_CHUNK", 3)
    reading = _RecordReads(_store(driver), monkeypatch)
    filters = [
        JobFilter(limit=4),
        JobFilter(limit=2, states=("dead", "failed")),
        JobFilter(limit=3, queue="a", tenant_id="u"),
        JobFilter(limit=2, queue='q "\\ü😀', tenant_id="t😀"),
        JobFilter(limit=5, name="work", states=("running",)),
        JobFilter(limit=5, tenant_id="nobody"),
        JobFilter(limit=2, states=("dead",)),
        JobFilter(limit=1, states=("failed", "dead"), tenant_id="u"),
        JobFilter(limit=3, states=("dead", "failed"), queue="b", name="work"),
        JobFilter(limit=3, states=("failed",), name="nothing"),
        JobFilter(limit=2, states=("ready", "delayed")),
        JobFilter(limit=3, states=("running",), queue="a"),
        JobFilter(limit=2, states=("ready", "running", "suspended", "delayed"), tenant_id="t"),
        JobFilter(limit=4, states=("suspended",), name="nothing"),
    ]
    walks: list[str] = []
    for script in ("LIST_SCRIPT", "LIST_FAILING_SCRIPT", "LIST_LIVE_SCRIPT"):
        real = getattr(reads, script)

        async def call(client: Any, args: Any, real: Any = real, script: str = script) -> Any:
            walks.append(script)
            return await real(client, args)

        monkeypatch.setattr(reads, script, call)
    for f in filters:
        expected = sorted(
            (
                r.id
                for r in records
                if (f.states is None or r.state in f.states)
                and (f.queue is None or r.queue == f.queue)
                and (f.tenant_id is None or r.tenant_id == f.tenant_id)
                and (f.name is None or r.name == f.name)
            ),
            reverse=True,
        )
        walked: list[str] = []
        reading.read = 0
        walks.clear()
        cursor = None
        while True:
            page = await driver.list_jobs(f.model_copy(update={"cursor": cursor}))
            walked.extend(j.id for j in page.jobs)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert walked == expected, f
        # Each page reads its rows and the one past it that says there is more.
        pages = -(-len(expected) // f.limit) if expected else 1
        assert reading.read <= len(expected) + pages, f
        # A list of dead or failed jobs goes through their groups, one of live jobs through the
        # live set, never through every id.
        if f.states is not None and set(f.states) <= {"dead", "failed"}:
            assert set(walks) == {"LIST_FAILING_SCRIPT"}, f
        elif f.states is not None and set(f.states) <= set(rules.LIVE_STATES):
            # The newest ids first (where a backlog's rows are), then the live set once it is
            # smaller than the ids left.
            assert set(walks) <= {"LIST_SCRIPT", "LIST_LIVE_SCRIPT"}, f
        else:
            assert set(walks) == {"LIST_SCRIPT"}, f

    # With more jobs live than ids left below, a live list keeps walking the ids, and agrees.
    async def never(store: Any, walk: str, upper: str) -> bool:
        return False

    monkeypatch.setattr(reads, "_fewer_live", never)
    walks.clear()
    f = JobFilter(limit=2, states=("ready", "delayed"))
    assert [j.id for j in (await driver.list_jobs(f)).jobs] == sorted(
        (r.id for r in records if r.state in ("ready", "delayed")), reverse=True
    )[:2]
    assert set(walks) == {"LIST_SCRIPT"}


async def test_a_list_of_dead_jobs_pages_through_their_groups_in_id_order(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups merged newest first a chunk at a time: a page stops at the highest of the chunks'
    last ids (below it a fuller group may still hold newer ids than the others gave) and the next
    one goes on from there, so no id is lost or repeated however the groups interleave."""
    from engine.drivers.redis import reads

    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    # The newest twenty in one group, the older ten spread over three: a chunk of the big group
    # ends above ids the small groups give.
    shape = [("a", "t"), ("b", None), ("a", "u")]
    await driver.enqueue(
        [_request(n, now, *(shape[n % 3] if n < 10 else ("a", "t")), now) for n in range(30)]
    )
    claimed = {c.record.id: c.token for c in await driver.claim("w", 30, 600_000)}
    for n, job_id in enumerate(sorted(claimed)):
        how = NackOptions(fail=True) if n % 7 == 0 else NackOptions(dead_letter=True)
        await driver.nack(job_id, claimed[job_id], how)
    records = [await driver.get(i, None) for i in sorted(claimed)]
    monkeypatch.setattr(reads, "_LIST_CHUNK", 2)
    for f in (
        JobFilter(limit=3, states=("dead",)),
        JobFilter(limit=4, states=("dead", "failed")),
        JobFilter(limit=2, states=("failed", "dead"), queue="a"),
        JobFilter(limit=5, states=("dead",), tenant_id="t"),
    ):
        expected = sorted(
            (
                r.id
                for r in records
                if r.state in (f.states or ())
                and (f.queue is None or r.queue == f.queue)
                and (f.tenant_id is None or r.tenant_id == f.tenant_id)
            ),
            reverse=True,
        )
        walked: list[str] = []
        cursor = None
        while True:
            page = await driver.list_jobs(f.model_copy(update={"cursor": cursor}))
            assert len(page.jobs) <= f.limit
            walked.extend(j.id for j in page.jobs)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert walked == expected, f


async def test_outbox_rows_published_before_their_index_are_indexed_once_by_migrate(
    jobs: Jobs, clock: ManualClock
) -> None:
    """Rows an earlier build published are not in `P obpub`: migrate puts them there once (the
    flag `P obpub:built` spares every later connect the walk), and the pruner can find them."""
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    client: Any = store.client
    keys = store.keys
    now = clock.now_ms()
    tx = driver.transaction()
    await driver.outbox_stage(tx, [_request(n, now, "a", None, now) for n in range(3)])
    await tx.execute()
    rows = await driver.outbox_claim("relay", "t", 10, 60_000)
    await driver.outbox_publish("t", rows)
    assert await client.zcard(keys.obpub) == 3
    # As an earlier build left them: published, unindexed, no flag.
    await client.delete(keys.obpub, keys.obpub_built)
    await driver.migrate()
    assert await client.zcard(keys.obpub) == 3 and await client.exists(keys.obpub_built)
    await client.delete(keys.obpub)
    await driver.migrate()  # the flag: no second walk
    assert await client.zcard(keys.obpub) == 0
    await client.delete(keys.obpub_built)
    await driver.migrate()
    assert await driver.outbox_forget_published(now + 1, 10) == 3
    assert not await client.exists(*(keys.outbox_row(r.id) for r in rows))


async def test_a_list_of_live_jobs_below_a_long_history_walks_the_live_set(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three running jobs older than sixty done ones: one chunk of the newest ids finds none, and
    the rest comes from the live set (three) instead of the sixty ids below."""
    from engine.drivers.redis import reads

    driver = cast(RedisDriver, jobs.driver)
    now = clock.now_ms()
    await driver.enqueue([_request(n, now, "a", None, now) for n in range(3)])
    running = await driver.claim("w", 3, 600_000)
    await driver.enqueue([_request(n, now, "b", None, now) for n in range(3, 63)])
    done = await driver.claim("w", 60, 600_000)
    await driver.ack_many([AckWrite(c.record.id, c.token, None) for c in done])
    monkeypatch.setattr(reads, "_LIST_CHUNK", 5)
    walks: list[str] = []
    for script in ("LIST_SCRIPT", "LIST_LIVE_SCRIPT"):
        real = getattr(reads, script)

        async def call(client: Any, args: Any, real: Any = real, script: str = script) -> Any:
            walks.append(script)
            return await real(client, args)

        monkeypatch.setattr(reads, script, call)
    page = await driver.list_jobs(JobFilter(limit=2, states=("running",)))
    expected = sorted((c.record.id for c in running), reverse=True)
    assert [j.id for j in page.jobs] == expected[:2] and page.next_cursor == expected[1]
    assert walks == ["LIST_SCRIPT", "LIST_LIVE_SCRIPT"]
    walks.clear()
    rest = await driver.list_jobs(JobFilter(limit=2, states=("running",), cursor=expected[1]))
    assert [j.id for j in rest.jobs] == expected[2:] and rest.next_cursor is None
    assert walks == ["LIST_SCRIPT"]  # one id left below the cursor: the chunk ends the walk


def _named(n: int, now: int, name: str, tenant: str | None, queue: str = "a") -> EnqueueRequest:
    return _request(n, now, queue, tenant, now)._replace(name=name, idempotency_key=f"{name}{n}")


async def test_a_list_by_name_tenant_or_queue_walks_the_fewest_ids_not_every_id(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three jobs of a name, a tenant and a queue of their own, older than twelve chunks of
    other jobs: a list by any of them pages through the smallest of their id sets, one short
    walk, and finds them."""
    from engine.drivers.redis import reads

    driver = cast(RedisDriver, jobs.driver)
    keys = _store(driver).keys
    monkeypatch.setattr(reads, "_LIST_CHUNK", 5)
    now = clock.now_ms()
    rare = await driver.enqueue([_named(n, now, "rare", "few", "side") for n in range(3)])
    await driver.enqueue([_named(n, now, "work", None) for n in range(10, 70)])
    await driver.enqueue([_named(n, now, "work", "many") for n in range(70, 80)])
    walked: list[str] = []
    real = reads.LIST_SCRIPT

    async def call(client: Any, args: Any) -> Any:
        walked.append(args[0])
        return await real(client, args)

    monkeypatch.setattr(reads, "LIST_SCRIPT", call)
    expected = sorted((r.id for r in rare), reverse=True)
    for f, walk in (
        (JobFilter(limit=10, name="rare"), keys.by_name("rare")),
        (JobFilter(limit=10, tenant_id="few"), keys.by_tenant("few")),
        (JobFilter(limit=10, queue="side"), keys.by_queue("side")),
        (
            JobFilter(limit=10, name="rare", tenant_id="few", states=("ready",)),
            keys.by_name("rare"),
        ),
    ):
        walked.clear()
        assert [j.id for j in (await driver.list_jobs(f)).jobs] == expected, f
        assert walked == [walk], f
    walked.clear()
    page = await driver.list_jobs(JobFilter(limit=4, tenant_id="many"))
    assert [j.id for j in page.jobs] == [f"{n:032x}" for n in range(79, 75, -1)]
    assert set(walked) == {keys.by_tenant("many")}
    # The name "work" holds 70 ids, the queue "side" 3 (none of them named "work").
    walked.clear()
    assert (await driver.list_jobs(JobFilter(limit=10, name="work", queue="side"))).jobs == []
    assert walked == [keys.by_queue("side")]
    # Of "work" (70 ids) and queue "a" (70) with tenant "many" (10): the tenant's ids.
    walked.clear()
    page = await driver.list_jobs(JobFilter(limit=4, name="work", queue="a", tenant_id="many"))
    assert [j.id for j in page.jobs] == [f"{n:032x}" for n in range(79, 75, -1)]
    assert set(walked) == {keys.by_tenant("many")}


async def test_jobs_stored_before_the_name_index_are_indexed_once_by_migrate(
    jobs: Jobs, clock: ManualClock
) -> None:
    driver = cast(RedisDriver, jobs.driver)
    store = _store(driver)
    keys = store.keys
    now = clock.now_ms()
    made = await driver.enqueue([_named(n, now, "old", "t") for n in range(3)])
    await driver.enqueue([_named(n, now, "other", None) for n in range(10, 15)])
    # As an earlier build left them: no name or tenant index, and no record of building one.
    await store.client.delete(
        keys.by_name("old"),
        keys.by_name("other"),
        keys.by_tenant("t"),
        keys.by_queue("a"),
        keys.by_index_built,
    )
    assert (await driver.list_jobs(JobFilter(name="old"))).jobs == []
    await driver.migrate()
    expected = sorted((r.id for r in made), reverse=True)
    assert [j.id for j in (await driver.list_jobs(JobFilter(name="old"))).jobs] == expected
    assert [j.id for j in (await driver.list_jobs(JobFilter(tenant_id="t"))).jobs] == expected
    assert await store.client.zcard(keys.by_name("other")) == 5
    assert await store.client.zcard(keys.by_queue("a")) == 8
    # Once: a database whose index is built is not walked again.
    await store.client.delete(keys.by_name("other"))
    await driver.migrate()
    assert await store.client.zcard(keys.by_name("other")) == 0
    # A database indexed by a build before the queue index (version 1) gets it at its migrate.
    await store.client.delete(keys.by_queue("a"))
    await store.client.set(keys.by_index_built, "1")
    await driver.migrate()
    assert await store.client.zcard(keys.by_queue("a")) == 8
    assert await store.client.get(keys.by_index_built) == "2"
