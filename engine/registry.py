"""One registry of declarations by name, specialised for jobs, cron tasks and backfills.

A kind says three things: what counts as one of its declarations, when a second declaration
under a taken name is a clash (a module re-import declares the same thing again and is not),
and the error for a name nobody declared. Everything else is shared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, TypeVar

from engine.errors import JobsError


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


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
