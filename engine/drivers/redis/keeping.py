"""What the Redis server keeps of the jobs: whether its `maxmemory-policy` may drop their keys,
and whether anything survives a restart of the server (AOF, or RDB save points). Read at every
open, which logs a warning when jobs can be lost that way, and shown by `db report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

# The policy that keeps every key: at maxmemory, writes are refused (STORAGE_FULL) instead.
KEEPS_KEYS = "noeviction"


def evicts_jobs(policy: str) -> bool:
    """Whether Redis under `policy` may drop a job's keys to make room: the allkeys-* policies
    pick from every key; the volatile-* ones only from keys with a TTL, which no job's key has."""
    return policy.startswith("allkeys-")


def policy_line(policy: str) -> str:
    if evicts_jobs(policy):
        return (
            f"maxmemory-policy: {policy} (drops any key when memory runs short, jobs among "
            f"them: set {KEEPS_KEYS})"
        )
    if policy.startswith("volatile-"):
        return f"maxmemory-policy: {policy} (drops only keys with a TTL, which no job's key has)"
    return f"maxmemory-policy: {policy}"


@dataclass(frozen=True)
class Keeping:
    """`policy`: the maxmemory-policy ('' when the server does not say). `aof`: appendonly.
    `save_points`: the `save` setting ('' for none); None when the server does not say (an ACL
    without CONFIG, a managed server that renamed it). `persistence`: INFO persistence."""

    policy: str
    aof: bool
    save_points: str | None
    persistence: Mapping[str, Any]

    @classmethod
    def of(
        cls, memory: Mapping[str, Any], persistence: Mapping[str, Any], save_points: str | None
    ) -> Keeping:
        aof = bool(int(persistence.get("aof_enabled", 0) or 0))
        policy = str(memory.get("maxmemory_policy", ""))
        return cls(policy, aof, save_points, persistence)

    @property
    def forgets_on_restart(self) -> bool:
        """Neither AOF nor RDB save points: a restarted server comes back empty, jobs and all
        (unless someone runs SAVE by hand). Unknown save points say nothing."""
        return bool(self.persistence) and not self.aof and self.save_points == ""

    def persistence_line(self) -> str:
        info = self.persistence
        if self.forgets_on_restart:
            return (
                "persistence: appendonly no, no RDB save points: nothing is kept on disk, a "
                "restart of the server empties it, every job with it (set appendonly yes)"
            )
        if self.save_points is None:
            points = "RDB save points unknown (CONFIG GET refused)"
        elif self.save_points:
            points = f"RDB save points {self.save_points}"
        else:
            points = "no RDB save points"
        aof = f"appendonly {'yes' if self.aof else 'no'}"
        if self.aof:
            aof += f" (last write {info.get('aof_last_write_status', 'n/a')})"
        return f"persistence: {aof}, {points}, last save {info.get('rdb_last_bgsave_status')}"

    def warnings(self, report_fix: str) -> list[str]:
        """The warning lines an open logs: each a way the server loses jobs, with its fix."""
        found = []
        if evicts_jobs(self.policy):
            found.append(
                f"Redis maxmemory-policy is {self.policy}: when memory runs short the server "
                f"drops keys, jobs among them; set maxmemory-policy {KEEPS_KEYS} in its "
                f"configuration ({report_fix} shows it)"
            )
        if self.forgets_on_restart:
            found.append(
                "Redis keeps nothing on disk (appendonly no, no RDB save points): a restart of "
                "the server empties it, every job with it; set appendonly yes in its "
                f"configuration (CONFIG SET appendonly yes turns it on at once; {report_fix} "
                "shows it)"
            )
        return found


async def read(client: Redis) -> Keeping:
    """What the server says; what an ACL refuses is left unknown (`db report` says what it
    can)."""
    try:
        memory = await client.info("memory")
        persistence = await client.info("persistence")
    except ResponseError:
        memory, persistence = {}, {}
    return Keeping.of(memory, persistence, await save_points(client))


async def save_points(client: Redis) -> str | None:
    try:
        found = await client.config_get("save")
    except ResponseError:  # NoPermissionError (an ACL), or CONFIG renamed away
        return None
    value = found.get("save")
    return None if value is None else str(value)


__all__ = ["KEEPS_KEYS", "Keeping", "evicts_jobs", "policy_line", "read", "save_points"]
