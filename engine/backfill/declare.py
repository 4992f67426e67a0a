"""A backfill declaration: what to count, how to read the next batch after a cursor, how to handle
a batch, how fast, where, and after what. Validated when declared, checksummed for the ledger.

Paging is by keyset (`read(after, limit)` returns the rows after the cursor `after`), never by
offset, so a batch stays stable while the app writes concurrently and a resumed pass starts
exactly after the last batch it completed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.backfill.errors import BackfillDeclarationInvalidError
from engine.backfill.rate import interval_ms
from engine.bounds import MAX_DELAY_MS, MAX_DELAY_SECONDS
from engine.declare import description_declared, whole_declared
from engine.errors import JobsError

CountFn = Callable[[], Awaitable[int]]
ReadFn = Callable[[Any, int], Awaitable[Sequence[Any]]]
KeyFn = Callable[[Any], Any]
HandleFn = Callable[[list[Any]], Awaitable[Any]]
RequiresFn = Callable[[], Awaitable[str | None]]

# The name reaches shell commands in every `fix` line and the pass's idempotency key, so it is
# kept to characters that need no quoting anywhere.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")

# The slowest `rate`: one batch per longest wait a duration may name (bounds.MAX_DELAY_SECONDS),
# so the pass's sleep between batches is bounded like every other wait.
MIN_RATE = 1 / MAX_DELAY_SECONDS
RATE_EXPECTED = (
    f"None or batches per second, finite, at least 1/{MAX_DELAY_SECONDS} (one per 10 years)"
)

# Proof that `declare()` built (and validated) a definition: the registry accepts nothing else.
_ORIGIN = object()


@dataclass(frozen=True, eq=False)
class BackfillDefinition:
    name: str
    count: CountFn
    read: ReadFn
    key: KeyFn
    handle: HandleFn
    batch_size: int
    rate: float | None
    environments: tuple[str, ...]
    requires: RequiresFn | None
    requires_fix: str | None
    description: str | None
    checksum: str
    origin: object = field(default=None, repr=False)

    @property
    def qualified_name(self) -> str:
        """Where the declaration lives, named by its handler."""
        return f"{self.handle.__module__}.{getattr(self.handle, '__qualname__', self.name)}"

    def same_as(self, other: BackfillDefinition) -> bool:
        """Whether `other` declares exactly this (a module imported twice), by everything
        declared: what the checksum covers and the two texts it does not."""
        return (
            self.qualified_name == other.qualified_name
            and self.checksum == other.checksum
            and self.requires_fix == other.requires_fix
            and self.description == other.description
        )

    def applies_to(self, environment: str) -> bool:
        """An empty `environments` means every environment."""
        return not self.environments or environment in self.environments

    def batches_for(self, rows: int) -> int:
        return math.ceil(rows / self.batch_size) if rows > 0 else 0

    async def count_rows(self) -> int:
        """`count()`, checked: a negative or non-integer count would make every plan a lie."""
        value = await self.count()

        def refuse(expected: str) -> JobsError:
            return BackfillDeclarationInvalidError(self.name, "count()", value, expected)

        whole_declared(refuse, "count()", value, 0)
        return value

    async def read_batch(self, after: Any, limit: int) -> list[Any]:
        rows = await self.read(after, limit)
        if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
            raise BackfillDeclarationInvalidError(
                self.name, "read()", type(rows).__name__, "a list of rows"
            )
        return list(rows)

    def key_of(self, row: Any) -> Any:
        """The row's cursor value, checked to survive the JSON round trip a step result takes."""
        value = self.key(row)
        try:
            if json.loads(json.dumps(value)) != value:
                raise ValueError("changes across a JSON round trip")
        except (TypeError, ValueError) as exc:
            raise BackfillDeclarationInvalidError(
                self.name, "key(row)", value, "a JSON value (int, str, or a list of them)"
            ) from exc
        return value


def mended_name(name: object) -> str | None:
    """A valid name for a refused one (`a b` -> `a_b`, ` production ` -> `production`): its
    other characters as `_`, trimmed to start alphanumeric; None when nothing of it is left."""
    mended = re.sub(r"[^A-Za-z0-9_.:-]+", "_", str(name).strip()).lstrip("_.:-")[:128]
    return mended if NAME_PATTERN.fullmatch(mended) else None


def is_environment_name(value: object) -> bool:
    """The one rule for an environment's name, in `environments=` and in MCP_JOBS_ENV alike."""
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None


def _source_of(fn: object) -> str:
    """A function's source for the checksum; its qualified name when the source is not on disk."""
    try:
        return inspect.getsource(fn)  # type: ignore[arg-type]
    except (OSError, TypeError):
        module = getattr(fn, "__module__", "?")
        return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def checksum_of(
    name: str,
    batch_size: int,
    rate: float | None,
    environments: Sequence[str],
    functions: Sequence[object],
) -> str:
    """A short digest of what the declaration does, recorded on every ledger row so a run can be
    matched to the code that made it. Source text, not bytecode: stable across Python versions,
    and it moves exactly when someone edits the sweep."""
    material = json.dumps(
        {
            "name": name,
            "batch_size": batch_size,
            "rate": rate,
            "environments": list(environments),
            "functions": [_source_of(fn) for fn in functions],
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an instance with an async __call__ counts
    )


def declare(
    *,
    name: str,
    count: CountFn,
    read: ReadFn,
    key: KeyFn,
    handle: HandleFn,
    batch_size: int = 100,
    rate: float | None = None,
    environments: Sequence[str] = (),
    requires: RequiresFn | None = None,
    requires_fix: str | None = None,
    description: str | None = None,
) -> BackfillDefinition:
    """Build a validated definition without registering it (`backfill()` registers)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise BackfillDeclarationInvalidError(
            str(name),
            "name",
            name,
            "1-128 of A-Z a-z 0-9 _ . : - (starting alphanumeric)",
            mended=mended_name(name),
        )
    for label, fn in (("count", count), ("read", read), ("handle", handle)):
        if not _is_async(fn):
            raise BackfillDeclarationInvalidError(name, label, fn, "an async def")
    if requires is not None and not _is_async(requires):
        raise BackfillDeclarationInvalidError(name, "requires", requires, "an async def or None")
    # `requires_fix` is handed out as a fix line, so it is one command, never prose over lines.
    if requires_fix is not None and (
        not isinstance(requires_fix, str) or not requires_fix.strip() or "\n" in requires_fix
    ):
        raise BackfillDeclarationInvalidError(
            name, "requires_fix", requires_fix, "None or one command line to run as given"
        )
    if not callable(key) or _is_async(key):
        raise BackfillDeclarationInvalidError(name, "key", key, "a plain function of a row")

    def refuse(expected: str) -> JobsError:
        return BackfillDeclarationInvalidError(name, "batch_size", batch_size, expected)

    whole_declared(refuse, "batch_size", batch_size, 1)
    if rate is not None and (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not 0 < rate < float("inf")
        # A rate so small its wait between batches outlasts any bound holds a slot forever.
        or interval_ms(rate) > MAX_DELAY_MS
    ):
        raise BackfillDeclarationInvalidError(name, "rate", rate, RATE_EXPECTED)
    if isinstance(environments, str | bytes) or not isinstance(environments, Iterable):
        raise BackfillDeclarationInvalidError(
            name, "environments", environments, 'a tuple of names, e.g. ("production",)'
        )
    envs = tuple(environments)
    for env in envs:
        if not is_environment_name(env):
            raise BackfillDeclarationInvalidError(
                name, "environments", envs, "names of A-Z a-z 0-9 _ . : -"
            )
    if len(set(envs)) != len(envs):
        raise BackfillDeclarationInvalidError(name, "environments", envs, "distinct names")
    description_declared(
        lambda expected: BackfillDeclarationInvalidError(
            name, "description", description, expected
        ),
        description,
    )
    functions: list[object] = [count, read, key, handle]
    if requires is not None:
        functions.append(requires)
    return BackfillDefinition(
        name=name,
        count=count,
        read=read,
        key=key,
        handle=handle,
        batch_size=batch_size,
        rate=float(rate) if rate is not None else None,
        environments=envs,
        requires=requires,
        requires_fix=requires_fix,
        description=description if description is not None else inspect.getdoc(handle),
        checksum=checksum_of(name, batch_size, rate, envs, functions),
        origin=_ORIGIN,
    )


def is_declared(definition: object) -> TypeGuard[BackfillDefinition]:
    """True only for a definition `declare()` built."""
    return isinstance(definition, BackfillDefinition) and definition.origin is _ORIGIN


__all__ = [
    "MIN_RATE",
    "NAME_PATTERN",
    "BackfillDefinition",
    "CountFn",
    "HandleFn",
    "KeyFn",
    "ReadFn",
    "RequiresFn",
    "checksum_of",
    "declare",
    "is_declared",
    "is_environment_name",
    "mended_name",
]
