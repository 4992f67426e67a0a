"""The systems under test, one module each, loaded lazily so a missing peer costs nothing."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from benchmarks.systems.base import Backend, System


@dataclass(frozen=True)
class Entry:
    key: str
    label: str
    target: str  # "module:Class"
    requires: str | None  # the peer package it imports (None: always available)
    workloads: frozenset[int]  # the workloads (by number) it takes part in
    backend: Backend = "postgres"


SYSTEMS: dict[str, Entry] = {
    e.key: e
    for e in (
        Entry(
            "mcp-jobs-pg",
            "mcp-jobs (PostgreSQL)",
            "benchmarks.systems.mcpjobs:McpJobs",
            None,
            frozenset({1, 2, 3, 4, 5, 6, 7}),
        ),
        Entry(
            "mcp-jobs-pg-priority",
            "mcp-jobs (PostgreSQL, mixed priorities)",
            "benchmarks.systems.mcpjobs:McpJobsPriorities",
            None,
            frozenset({1, 2, 3, 4}),
        ),
        Entry(
            "mcp-jobs-pg-ratelimit",
            "mcp-jobs (PostgreSQL, a rate limit configured)",
            "benchmarks.systems.mcpjobs:McpJobsRateLimited",
            None,
            frozenset({1, 2, 3, 4}),
        ),
        Entry(
            "mcp-jobs-sqlite",
            "mcp-jobs (SQLite)",
            "benchmarks.systems.mcpjobs:McpJobs",
            None,
            frozenset({1, 2, 3, 4, 5, 6, 7}),
            backend="sqlite",
        ),
        # The Redis driver has no MCP history builder (workload 7 writes SQL tables directly).
        Entry(
            "mcp-jobs-redis",
            "mcp-jobs (Redis)",
            "benchmarks.systems.mcpjobs:McpJobs",
            None,
            frozenset({1, 2, 3, 4, 5, 6}),
            backend="redis",
        ),
        # NATS JetStream: mcp-jobs' KV-bucket driver and taskiq on a JetStream stream (#28).
        Entry(
            "mcp-jobs-nats",
            "mcp-jobs (NATS)",
            "benchmarks.systems.mcpjobs:McpJobs",
            "nats",
            frozenset({1, 2, 3, 4, 5, 6}),
            backend="nats",
        ),
        Entry(
            "taskiq-nats",
            "taskiq (taskiq-nats JetStream)",
            "benchmarks.systems.taskiq_nats:TaskiqNats",
            "taskiq_nats",
            frozenset({1, 2, 3, 4, 6}),
            backend="nats",
        ),
        Entry(
            "arq",
            "arq",
            "benchmarks.systems.arq_queue:ArqQueue",
            "arq",
            frozenset({1, 2, 3, 4, 6}),
            backend="redis",
        ),
        Entry(
            "procrastinate",
            "Procrastinate",
            "benchmarks.systems.procrastinate_queue:ProcrastinateQueue",
            "procrastinate",
            frozenset({1, 2, 3, 4, 6}),
        ),
        Entry(
            "pgqueuer",
            "PgQueuer",
            "benchmarks.systems.pgqueuer_queue:PgQueuerQueue",
            "pgqueuer",
            frozenset({1, 2, 3, 4, 6}),
        ),
        Entry(
            "dbos",
            "DBOS Transact",
            "benchmarks.systems.dbos_transact:DbosTransact",
            "dbos",
            frozenset({5}),
        ),
        # The SQLite peers of mcp-jobs-sqlite: each run on its own file in a fresh temp dir.
        Entry(
            "huey-sqlite",
            "huey (SqliteStorage)",
            "benchmarks.systems.huey_sqlite:HueySqlite",
            "huey",
            frozenset({1, 2, 3, 4, 6}),
            backend="sqlite",
        ),
        Entry(
            "dbos-sqlite",
            "DBOS Transact (SQLite)",
            "benchmarks.systems.dbos_sqlite:DbosSqlite",
            "dbos",
            frozenset({1, 2, 3, 4, 5}),
            backend="sqlite",
        ),
        Entry(
            "floor",
            "raw asyncpg floor",
            "benchmarks.systems.floor:Floor",
            None,
            frozenset({1, 2, 3, 4, 5, 6}),
        ),
    )
}


def available(key: str) -> bool:
    """True when the system's package is importable here (peers come from the `bench` extra)."""
    entry = SYSTEMS[key]
    return entry.requires is None or importlib.util.find_spec(entry.requires) is not None


def load(key: str) -> System:
    module_name, _, class_name = SYSTEMS[key].target.partition(":")
    cls: type[System] = getattr(importlib.import_module(module_name), class_name)
    return cls(SYSTEMS[key].backend)


__all__ = ["SYSTEMS", "Entry", "System", "available", "load"]
