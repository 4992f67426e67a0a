"""The environment variables an application's code reads, declared where it reads them.

A command handed out to run the app elsewhere (a fix line: `mcp-jobs worker …`) must carry the
same values, or it opens other data: `SHOP_DB` unset in another directory is another shop. An
app declares each variable once, at import, next to the code that reads it:

    SHOP_DB = uses_environment("SHOP_DB", default=".mcp-jobs/shop.db", path=True)

It answers the value the code reads now. `default` is what the code falls back to when the
variable is unset, and `path=True` says the value is a filesystem path that a relative form
resolves against the working directory, so the front end can write the effective value,
absolute, in front of the command.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.errors import InvalidArgumentError

# A POSIX shell variable name: the only names a `NAME=value command` prefix can set.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EnvironmentUse:
    name: str
    default: str | None = None
    path: bool = False

    def effective(self, environ: Mapping[str, str], cwd: Path) -> str | None:
        """The value the app's code sees in `environ` run from `cwd`, made absolute when it is a
        path; None when unset without a default."""
        value = environ.get(self.name) or self.default
        if value is None:
            return None
        if self.path and not Path(value).is_absolute():
            return os.path.normpath(cwd / value)
        return value


_USES: dict[str, EnvironmentUse] = {}


def uses_environment(name: str, *, default: str | None = None, path: bool = False) -> str | None:
    """Declare that the app's code reads the environment variable `name` (once per process; a
    second declaration of the same name replaces the first), and answer its value now: the
    default when unset, absolute with `path=True` (the value the fix lines carry), so an app
    reads it in the same line: `SHOP_DB = uses_environment("SHOP_DB", ...)`."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidArgumentError(
            "name", name, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
        )
    if default is not None and not isinstance(default, str):
        raise InvalidArgumentError("default", default, "a string or None")
    use = _USES[name] = EnvironmentUse(name, default, bool(path))
    return use.effective(os.environ, Path.cwd())


def declared_environment() -> list[EnvironmentUse]:
    """Every declared variable, in declaration order."""
    return list(_USES.values())


def forget_environment(name: str) -> None:
    """Drop a declaration (a test's, once the test is done)."""
    _USES.pop(name, None)


__all__ = [
    "EnvironmentUse",
    "declared_environment",
    "forget_environment",
    "uses_environment",
]
