"""Independent reads of one answer, run at once.

Each is read to its end before the first failure is raised as it came (a typed error, not an
exception group, which the envelope would report as an internal error): nothing is left running
behind a refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar, cast, overload

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
T = TypeVar("T")


@overload
async def together(a: Awaitable[A], b: Awaitable[B], /) -> tuple[A, B]: ...
@overload
async def together(a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], /) -> tuple[A, B, C]: ...
@overload
async def together(
    a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], d: Awaitable[D], /
) -> tuple[A, B, C, D]: ...
async def together(*reads: Awaitable[Any]) -> tuple[Any, ...]:
    """The results of `reads`, in their order."""
    return tuple(await each(reads))


async def each(reads: Iterable[Awaitable[T]]) -> list[T]:
    """The results of `reads`, in their order."""
    outcomes = await asyncio.gather(*(_outcome(read) for read in reads))
    for _, refused in outcomes:
        if refused is not None:
            raise refused
    return [cast(T, value) for value, _ in outcomes]  # none refused: each is a value


async def _outcome(read: Awaitable[T]) -> tuple[T | None, Exception | None]:
    # Caught here rather than by gather's return_exceptions, which could not tell a refusal
    # from a read whose value is an exception.
    try:
        return await read, None
    except Exception as refused:
        return None, refused
