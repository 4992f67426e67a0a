"""What every module of the driver shares: the client, the keys, the clock, and guarded writes.

A guarded write (`Write`) is a list of guards and a list of commands run by the APPLY script in
one atomic step: the commands run only when every guard still holds. The settles and operator
actions (ack, nack, heartbeat, cancel, retry) do not use it: each is one script that reads and
writes the row (settle_scripts.py). A write built in Python from a row it read is guarded by
what it read (the token for a holder, the write counter `ver` otherwise); a guard that fails
means the row moved, and the caller reads again or answers the fence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, ResponseError

from engine.clock import Clock
from engine.drivers.redis.keys import Keys
from engine.drivers.redis.lost import LostJobs
from engine.drivers.redis.scripts import APPLY_SCRIPT, Script
from engine.drivers.redis.wake import WakeListener

# How often an operator's transition reads again when its row moved under it before giving up
# with the row's last state: each retry follows a write that did land, so this is never reached
# in practice.
MOVED_RETRIES = 50


@dataclass
class Write:
    guards: list[list[str]] = field(default_factory=list[list[str]])
    ops: list[list[str]] = field(default_factory=list[list[str]])

    def guard_eq(self, key: str, name: str, value: str) -> None:
        self.guards.append(["eq", key, name, value])

    def guard_absent_or(self, key: str, name: str, value: str) -> None:
        self.guards.append(["absent_or", key, name, value])

    def guard_exists(self, key: str) -> None:
        self.guards.append(["exists", key])

    def op(self, *parts: Any) -> None:
        self.ops.append([str(p) for p in parts])

    def args(self) -> list[str]:
        return [json.dumps({"g": self.guards, "o": self.ops}, separators=(",", ":"))]


@dataclass
class Store:
    client: Redis
    keys: Keys
    clock: Clock
    wake: WakeListener
    lost: LostJobs

    async def apply(self, write: Write) -> int:
        """Run one guarded write: -(index of the failed guard), else the count of `!hdel_if`
        ops that deleted."""
        return int(await APPLY_SCRIPT(self.client, write.args()))

    async def apply_many(self, writes: Sequence[Write]) -> list[int]:
        """Guarded writes in one round trip, each atomic on its own."""
        return [int(r) for r in await self.pipelined(APPLY_SCRIPT, [w.args() for w in writes])]

    async def pipelined(self, script: Script, calls: Sequence[Sequence[Any]]) -> list[Any]:
        """`script` once per argument list, in one pipeline; the calls the server had forgotten
        the script for (NOSCRIPT: nothing ran) are sent again once it is loaded."""
        if not calls:
            return []
        results = await self._send(script, calls)
        missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
        if missing:
            await script.load(self.client)
            again = await self._send(script, [calls[i] for i in missing])
            for i, r in zip(missing, again, strict=True):
                results[i] = r
        for r in results:
            if isinstance(r, ResponseError):
                raise r
        return results

    async def _send(self, script: Script, calls: Sequence[Sequence[Any]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for args in calls:
            script.queue(pipe, args)
        return list(await pipe.execute(raise_on_error=False))

    async def hgetall_many(self, keys: Sequence[str]) -> list[dict[str, str]]:
        if not keys:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        return list(await pipe.execute())

    # Typed reads: the client answers str (decode_responses=True), which its types cannot say.

    async def hgetall(self, key: str) -> dict[str, str]:
        return cast(dict[str, str], await self.client.hgetall(key))

    async def hget(self, key: str, name: str) -> str | None:
        return cast(str | None, await self.client.hget(key, name))

    async def hset(self, key: str, mapping: dict[str, str]) -> None:
        await self.client.hset(key, mapping=cast(dict[Any, Any], mapping))

    async def zrangebyscore(self, key: str, upper: str, start: int, num: int) -> list[str]:
        return cast(list[str], await self.client.zrangebyscore(key, "-inf", upper, start, num))

    async def zrevrangebyscore(self, key: str, top: str, num: int) -> list[str]:
        answer = await self.client.zrevrangebyscore(key, top, "-inf", start=0, num=num)
        return cast(list[str], answer)
