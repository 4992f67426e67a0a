"""`python -m benchmarks.prune_during_drain --dsn …`: does a drain keep its pace while the
background pruner deletes a large expired history? (#21: ≥ 0.8× of the drain without it.)

In one process, on one fresh database: before every measured drain, `--settled` expired jobs
(one step each) are written straight into the tables (`benchmarks.history`) and `--drain` no-op
jobs are enqueued (neither timed). The drain is one `Worker` at `--concurrency` run until idle;
"with pruner" runs the real `engine.pruner.Pruner` beside it (its loop, under its lease), with
the pause between batches given by `--pauses`; on SQLite, whose one write lock a batch holds,
each pause is at least as long as the batch before it took (`engine.pruner.batch_pause_ms`), and
the mode says so. The modes alternate, round after round, in a
rotated order; whatever the drain left expired is then pruned untimed, so every drain starts
from the same table. The report gives each mode's median rate and its ratio to the median
without pruning.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchmarks import history
from benchmarks.databases import add_database_arguments, dsn_missing, fresh_database
from engine import Enqueue, JobContext, JobRegistry, Jobs, Worker, connect, job
from engine.pruner import DEFAULT_PAUSE_MS, ONE_WRITER_KINDS, PrunePass, Pruner, prune_all
from engine.retention import DEFAULT_POLICY, plan

REGISTRY = JobRegistry()
WITHOUT = "without pruner"


class Item(BaseModel):
    i: int


def _key(item: Item) -> str:
    return str(item.i)


@job(registry=REGISTRY, name="drained", queue="drain", idempotency_key=_key)
async def drained(input: Item, ctx: JobContext) -> None:
    return None


def _mode(pause_ms: int | None, kind: str) -> str:
    """The mode's label: the pause `batch_pause_ms` takes on a `kind` driver."""
    if pause_ms is None:
        return WITHOUT
    if kind in ONE_WRITER_KINDS:
        return f"pruner, pause max({pause_ms} ms, the batch's time)"
    return f"pruner, pause {pause_ms} ms"


async def _expired(jobs: Jobs) -> int:
    counts = await jobs.driver.prune_counts(plan(DEFAULT_POLICY, jobs.clock.now_ms()))
    return sum(c.rows for c in counts)


async def one_drain(
    jobs: Jobs,
    url: str,
    *,
    tag: str,
    settled: int,
    drain: int,
    offset: int,
    concurrency: int,
    pause_ms: int | None,
) -> dict[str, Any]:
    now = jobs.clock.now_ms()
    # Finished 31 to 61 days ago: past every default retention, so the pruner takes all of it.
    await history.seed(
        url, history.Seed(settled, now - 31 * history.DAY_MS, 30 * history.DAY_MS, tag)
    )
    for lo in range(0, drain, 1_000):
        await jobs.enqueue_many(
            [Enqueue(drained, Item(i=offset + i)) for i in range(lo, min(drain, lo + 1_000))]
        )
    await history.analyze(url)
    worker = Worker(jobs, concurrency=concurrency, prune=False, scheduler=False, outbox_relay=False)
    pruner: Pruner | None = None
    passes: list[tuple[float, PrunePass]] = []
    started = time.perf_counter()
    if pause_ms is not None:
        pruner = Pruner(jobs, pause_ms=pause_ms, interval_ms=3_600_000, holder=f"bench-{tag}")
        pruner.add_listener(lambda report: passes.append((time.perf_counter(), report)))
    async with asyncio.TaskGroup() as tg:
        if pruner is not None:
            tg.create_task(pruner.run())
        ran = await worker.run_until_idle()
        drain_s = time.perf_counter() - started
        left = await _expired(jobs)
        # A pass that ended before the drain did; a stop below ends any other one early.
        finished = list(passes)
        if pruner is not None:
            pruner.stop()
    if ran != drain:
        raise RuntimeError(f"the worker ran {ran} jobs, expected {drain}")
    pass_s = finished[0][0] - started if finished else None
    # Untimed: what the pass left, so the next drain starts from the same table.
    await prune_all(jobs, plan(DEFAULT_POLICY, jobs.clock.now_ms()), batch_size=5_000)
    return {
        "mode": _mode(pause_ms, jobs.driver.kind),
        "pause_ms": pause_ms,
        "drain_s": drain_s,
        "jobs_per_s": drain / drain_s,
        "pruned_during_drain": settled - left if pruner is not None else 0,
        "prune_pass_s": pass_s,
    }


async def run(
    url: str,
    *,
    settled: int,
    drain: int,
    rounds: int,
    concurrency: int,
    pauses: Sequence[int],
    echo: Any = print,
) -> dict[str, Any]:
    modes: list[int | None] = [None, *pauses]
    jobs = await connect(url, registry=REGISTRY, migrate=True)
    steps: list[dict[str, Any]] = []
    offset = 0
    try:
        # Warm-up: a small drain, not counted.
        await one_drain(
            jobs, url, tag="w", settled=0, drain=2_000, offset=10**9, concurrency=concurrency,
            pause_ms=None,
        )  # fmt: skip
        for r in range(rounds):
            order = modes[r % len(modes) :] + modes[: r % len(modes)]
            for pause in order:
                step = await one_drain(
                    jobs, url, tag=f"r{r}p{pause}", settled=settled, drain=drain,
                    offset=offset, concurrency=concurrency, pause_ms=pause,
                )  # fmt: skip
                offset += drain
                step["round"] = r
                steps.append(step)
                passed = step["prune_pass_s"]
                echo(
                    f"round {r} · {step['mode']:<22} {step['jobs_per_s']:8,.0f} jobs/s"
                    + (
                        f" · pruned {step['pruned_during_drain']:,} during the drain"
                        + (f", pass done in {passed:.1f} s" if passed is not None else "")
                        if pause is not None
                        else ""
                    )
                )
    finally:
        await jobs.close()
    return {"steps": steps, "summary": summarize(steps)}


def summarize(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_mode.setdefault(step["mode"], []).append(step)
    base = statistics.median(s["jobs_per_s"] for s in by_mode.get(WITHOUT, [])) or None
    out = []
    for mode, group in by_mode.items():
        rate = statistics.median(s["jobs_per_s"] for s in group)
        passes = [s["prune_pass_s"] for s in group if s["prune_pass_s"] is not None]
        out.append(
            {
                "mode": mode,
                "runs": len(group),
                "median_jobs_per_s": rate,
                "ratio": rate / base if base else None,
                "rates": [s["jobs_per_s"] for s in group],
                "median_pruned_during_drain": statistics.median(
                    s["pruned_during_drain"] for s in group
                ),
                "median_pass_s": statistics.median(passes) if passes else None,
            }
        )
    return out


def render(summary: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| mode | runs | median jobs/s | ÷ without | rates | pruned during drain | pass s |",
        "|---|--:|--:|--:|---|--:|--:|",
    ]
    for s in summary:
        rates = " / ".join(f"{r:,.0f}" for r in s["rates"])
        passed = "—" if s["median_pass_s"] is None else f"{s['median_pass_s']:.1f}"
        ratio = "—" if s["ratio"] is None else f"{s['ratio']:.2f}"
        lines.append(
            f"| {s['mode']} | {s['runs']} | {s['median_jobs_per_s']:,.0f} | {ratio} | {rates} "
            f"| {s['median_pruned_during_drain']:,.0f} | {passed} |"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prune_during_drain")
    add_database_arguments(parser)
    parser.add_argument("--settled", type=int, default=200_000, help="expired rows per drain")
    parser.add_argument("--drain", type=int, default=20_000, help="no-op jobs per drain")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--pauses",
        default=str(DEFAULT_PAUSE_MS),
        help=f"comma-separated pauses (ms) to measure (default {DEFAULT_PAUSE_MS}; 0 = none); "
        "on SQLite each is at least as long as the batch before it took",
    )
    parser.add_argument("--json", type=Path, help="write the steps and summary here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if dsn_missing(args):
        return 2
    pauses = [int(p) for p in args.pauses.split(",") if p.strip()]

    async def go() -> dict[str, Any]:
        async with fresh_database(args.dsn, args.backend, "prune_during_drain") as url:
            return await run(
                url,
                settled=args.settled,
                drain=args.drain,
                rounds=args.rounds,
                concurrency=args.concurrency,
                pauses=pauses,
            )

    try:
        import uvloop
    except ImportError:
        document = asyncio.run(go())
    else:
        document = uvloop.run(go())
    document["meta"] = {
        "settled": args.settled,
        "drain": args.drain,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "backend": args.backend,
        "load_avg": os.getloadavg()[0],
    }
    print()
    print(render(document["summary"]))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
