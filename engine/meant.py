"""Which declared name an unknown one was meant as (`states` for `state`, `--tenant_id` for
`--tenant-id`, `orderId` for `order_id`): one rule for a tool's arguments and name, a prompt's,
the command line's flags and choices, and a job input's fields."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable

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
        found = [name for name in free if _words(name) <= words or words <= _words(name)]
    if not found:
        snaked = {_snake(name): name for name in free}
        close = difflib.get_close_matches(_snake(unknown), snaked, n=2, cutoff=0.7)
        found = [snaked[name] for name in close]
    if len(found) > 1:
        found = [name for name in found if name in required]
    return found[0] if len(found) == 1 else None


def _words(name: str) -> frozenset[str]:
    """A name's words, whatever its spelling: `jobIds`, `job-ids` and `job_id` are {job, id}."""
    return frozenset(w.removesuffix("s") for w in _snake(name).split("_")) - {""}


def _snake(name: str) -> str:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name[:_READ_CHARS])
    return "_".join(w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w)
