"""Which declared name an unknown one was meant as (`states` for `state`, `--tenant_id` for
`--tenant-id`, `orderId` for `order_id`): one rule for a tool's arguments and name, a prompt's,
the command line's flags and choices, and a job input's fields."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Collection, Iterable, Sequence

# A name longer than this is no slip of a declared one; only its start is read.
_READ_CHARS = 200


def meant_as(
    unknown: str,
    declared: Iterable[str],
    *,
    given: Collection[str] = (),
    required: Collection[str] = (),
) -> str | None:
    """The declared name, among those not given, that `unknown` plainly stands for: the same
    words in another spelling (`jobId`, `states`), one's words within the other's (`tenant`
    for `tenant_id`, `idempotency_key` for `key`) or a slip of the keys (`nmae`). Only one
    such name, or of several the one that is required; else None."""
    free = [name for name in declared if name not in given]
    words = _words(unknown)
    if not words:
        return None
    found = [name for name in free if _words(name) == words]
    if not found:
        # An empty set is within every set: a name of no words (`🚀`) is meant by none.
        found = [
            name
            for name in free
            if _words(name) and (_words(name) <= words or words <= _words(name))
        ]
        if words <= _QUALIFIERS:
            # `id` alone is in many names (`tenant_id` of retry_jobs for its `ids`): it stands
            # only for the one the call cannot do without (`job_id` of inspect_job).
            found = [name for name in found if name in required]
    if not found:
        found = _closest(_snake(unknown), free)
    if len(found) > 1:
        found = [name for name in found if name in required]
    return found[0] if len(found) == 1 else None


def meant_choices(pieces: Iterable[str], declared: Sequence[str]) -> tuple[list[str], bool] | None:
    """The declared values `pieces` stand for (a state, a choice of a flag): each itself, in
    another spelling ("Dead"), or a slip of the keys ("deda"); and whether any was only a slip,
    so a guess. None when a piece stands for none."""
    chosen: list[str] = []
    guessed = False
    for piece in (p.strip() for p in pieces):
        meant = piece if piece in declared else meant_as(piece, declared)
        if meant is None:
            return None
        guessed = guessed or not (meant == piece or same_words(piece, meant))
        chosen.append(meant)
    return (chosen, guessed) if chosen else None


def same_words(one: str, other: str) -> bool:
    """Whether two names are the same words in another spelling (`tenantId`, `tenant_id`)."""
    return bool(_words(one)) and _words(one) == _words(other)


def _closest(unknown: str, names: list[str]) -> list[str]:
    """The name most like `unknown` when it is alike enough (a ratio of 0.7) and clearly more
    alike than the next (by 0.1): `bench_nop` is `bench_noop`, not `bench_steps`."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, unknown, _snake(name)).ratio(), name) for name in names),
        reverse=True,
    )
    if not scored or scored[0][0] < _ALIKE:
        return []
    if len(scored) > 1 and scored[0][0] - scored[1][0] < _CLEARER:
        return [scored[0][1], scored[1][1]]
    return [scored[0][1]]


# Words that qualify a name rather than name a thing.
_QUALIFIERS = frozenset({"id"})
_ALIKE = 0.7
_CLEARER = 0.1


def _words(name: str) -> frozenset[str]:
    """A name's words, whatever its spelling or script: `jobIds`, `job-ids` and `job_id` are
    {job, id}; `очередь-🚀` is {очередь}. A name of no letters or digits has none."""
    return frozenset(w.removesuffix("s") for w in _snake(name).split("_")) - {""}


def _snake(name: str) -> str:
    """`name` as lower-case words joined by `_`: split at anything not a letter, digit or mark
    of any script (`ー` and the virama of `क्यू` are in words), and where a lower-case letter
    or digit meets an upper-case one (`jobId`)."""
    words: list[str] = []
    word = ""
    for char in name[:_READ_CHARS]:
        if unicodedata.category(char)[0] not in "LMN":
            words.append(word)
            word = ""
            continue
        if word and char.isupper() and (word[-1].islower() or word[-1].isdigit()):
            words.append(word)
            word = ""
        word += char
    words.append(word)
    return "_".join(w.lower() for w in words if w)


def meant_note(unknown: str, declared: Iterable[str]) -> tuple[str, dict[str, str]]:
    """For an error about `unknown`: " (meant X?)" for its cause and {"meant": X} for its
    details when `declared` holds the one it plainly stands for, else ("", {})."""
    meant = meant_as(unknown, declared)
    return ("", {}) if meant is None else (f" (meant {meant}?)", {"meant": meant})
