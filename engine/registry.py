"""One registry of declarations by name, specialised for jobs, cron tasks and backfills.

A kind says three things: what counts as one of its declarations, when a second declaration
under a taken name is a clash (a module re-import declares the same thing again and is not),
and the error for a name nobody declared. Everything else is shared.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from engine.errors import JobsError


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Site(NamedTuple):
    """Where a declaration is: what it runs (`module:qualname`), the declaring call and the
    first line of the function it runs (`file:line` each). Running the same lines again (a
    module imported again) gives the same site; a copied block or another module gives another,
    though the qualname alone may agree (every lambda of a module is `<lambda>`)."""

    declared_by: str
    call: str
    body: str

    def __str__(self) -> str:
        return f"{self.declared_by} (declared at {self.call})"


def caller_line(depth: int) -> str:
    """`file:line` of the call `depth` frames above the caller of this (1: the line that
    called the declaring function)."""
    caller = sys._getframe(depth + 1)
    return f"{caller.f_code.co_filename}:{caller.f_lineno}"


def site(fn: Callable[..., Any], call: str) -> Site:
    """The site of a declaration of `fn` made at `call` (`caller_line`)."""
    return Site(declared_by(fn), call, first_line(fn))


def declared_by(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


def first_line(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:  # a partial, a callable object: its declaring call tells it apart
        return ""
    return f"{code.co_filename}:{code.co_firstlineno}"


class Registry(ABC, Generic[T]):
    """Declarations of one kind by name, iterated in name order."""

    def __init__(self) -> None:
        self._by_name: dict[str, T] = {}

    @abstractmethod
    def check(self, definition: object) -> T:
        """`definition` if it is one of this registry's declarations; else raise."""

    @abstractmethod
    def clash(self, existing: T, definition: T) -> JobsError | None:
        """The error when `definition` takes `existing`'s name, or None when it is the same."""

    @abstractmethod
    def unknown(self, name: str, known: Sequence[str]) -> JobsError:
        """The error for a name nobody declared, naming the ones that were."""

    def add(self, definition: T) -> None:
        checked = self.check(definition)
        existing = self._by_name.get(checked.name)
        if existing is not None:
            error = self.clash(existing, checked)
            if error is not None:
                raise error
        self._by_name[checked.name] = checked

    def get(self, name: str) -> T | None:
        return self._by_name.get(name)

    def require(self, name: str) -> T:
        found = self._by_name.get(name)
        if found is None:
            raise self.unknown(name, list(self._by_name))
        return found

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def remove(self, name: str) -> None:
        self._by_name.pop(name, None)

    def __iter__(self) -> Iterator[T]:
        return iter([self._by_name[n] for n in sorted(self._by_name)])

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
