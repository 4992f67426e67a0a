"""A command line the CLI guessed for its caller (a slip of the keys in a name, an action moved
under the one command that has it) in the form that writes nothing: a guess is shown, never
acted on. A command that writes comes back as its plan (`db prune --dry-run`, `jobs retry-all`
without `--yes`, `backfill NAME` without `--write`); one that writes and has no plan to show
comes back as None, for the caller to hand out the command's `--help` instead. The same
table says which commands write at all (`writes`): a store guessed from a URL gets no write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.fix_lines import END_OF_OPTIONS


@dataclass(frozen=True)
class Plan:
    """How a writing command's line shows its plan only: `drop` the flags that act (with the
    value of those in `valued`), `add` the flags that plan."""

    drop: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    add: tuple[str, ...] = ()


# Each command that writes, by its words, and its plan-only form; None: it has none.
WRITES: dict[tuple[str, ...], Plan | None] = {
    ("db", "prune"): Plan(add=("--dry-run",)),
    ("jobs", "retry-all"): Plan(drop=frozenset({"--yes"})),
    ("jobs", "cancel-all"): Plan(drop=frozenset({"--yes"})),
    # --wait follows the write: left alone it is refused (no use without --write).
    ("backfill",): Plan(drop=frozenset({"--write", "--wait"}), valued=frozenset({"--wait"})),
    ("db", "migrate"): None,
    ("jobs", "enqueue"): None,
    ("jobs", "retry"): None,
    ("jobs", "cancel"): None,
    ("jobs", "drain"): None,
    ("queues", "pause"): None,
    ("queues", "resume"): None,
    ("events", "send"): None,
    ("worker",): None,  # runs the jobs it claims
}


def command_of(words: Sequence[str]) -> tuple[str, ...]:
    """The command of `WRITES` that `words` (a line without the program) runs, as its key:
    `("db", "prune")`, `("backfill",)`; else its first word."""
    return tuple(words[:2]) if tuple(words[:2]) in WRITES else tuple(words[:1])


def writes(words: Sequence[str]) -> bool:
    """Whether the command `words` runs is one of `WRITES` (a `backfill` line may yet only
    list or rehearse: its plan is the line itself)."""
    return command_of(words) in WRITES


def planned(words: Sequence[str]) -> list[str] | None:
    """`words` as a line that writes nothing: itself for a command that only reads, its plan
    for one that writes, None for one that writes and shows no plan first."""
    if not writes(words):
        return list(words)
    command = command_of(words)
    plan = WRITES[command]
    if plan is None:
        return None
    kept: list[str] = []
    skip = False
    for at, word in enumerate(words):
        flag = word.partition("=")[0]
        if word == END_OF_OPTIONS:  # past it every word is a name (`queues pause -- --yes`)
            kept += words[at:]
            break
        if skip:
            skip = False
        elif flag in plan.drop:
            skip = flag in plan.valued and "=" not in word
        else:
            kept.append(word)
    # Right after the command's words, where it reads first and before any `--`.
    added = [flag for flag in plan.add if flag not in kept]
    return [*kept[: len(command)], *added, *kept[len(command) :]]
