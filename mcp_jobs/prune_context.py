"""The context a line that prunes carries: the retention settings that shaped what it prunes.

`mcp-jobs db prune` reads `MCP_JOBS_RETAIN_*` where it runs (engine.retention), so its line, run
from a shell without them, prunes by the defaults: a dry run under `MCP_JOBS_RETAIN_DONE=50d
MCP_JOBS_RETAIN_DEAD=forever` counted 33,330 rows, and its line, run as printed, deleted
173,329, dead letters included (exploreY). A worker (its pruner, and the retention it publishes)
and a server (`prune_history`) read them too. Retention has no configuration file: the code's
`retention=` comes with `--app`, a worker's published policy with the database. `FixContext`
writes these settings in front of such a line, as it writes `PYTHONPATH`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.retention import (
    DEFAULT_POLICY,
    RETAIN_AUDIT_ENV,
    RETAIN_ENV,
    RetentionSettingInvalidError,
    policy_from_env,
)

# The commands that prune by the retention settings of the shell they run in, by their words.
READS_RETENTION = frozenset({("db", "prune"), ("worker",), ("serve",)})
_SETTINGS: tuple[tuple[str, str], ...] = (*RETAIN_ENV.items(), ("audit", RETAIN_AUDIT_ENV))


def reads_retention(words: Sequence[str]) -> bool:
    """Whether `mcp-jobs <words>` prunes by the retention settings where it runs."""
    return tuple(words[:2]) in READS_RETENTION or tuple(words[:1]) in READS_RETENTION


def retention_settings(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The retention settings set in `environ` that differ from the defaults, as `(NAME, value)`
    in a fixed order: what a line that prunes carries (`reads_retention`). A value the rule
    refuses is carried as its refusal's fix sets it (`7`: 7d, never shorter than meant), so the
    line and that fix agree: an `export` of the fix could not undo a value written in the line."""
    carried: list[tuple[str, str]] = []
    for field, name in _SETTINGS:
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        try:
            if policy_from_env(environ={name: raw}, fields=(field,)) == DEFAULT_POLICY:
                continue
        except RetentionSettingInvalidError as exc:
            raw = exc.default
        carried.append((name, raw))
    return tuple(carried)


__all__ = ["READS_RETENTION", "reads_retention", "retention_settings"]
