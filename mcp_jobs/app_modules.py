"""Loading the application modules (`--app`, `MCP_JOBS_APP`), whose import registers their jobs,
tasks and backfills with the engine's default registries.

A name `import` could never take is refused before anything is imported, as INVALID_ARGUMENT
with the name meant when one is plain (`examples/shop.py`, `examples.shop:jobs` →
`examples.shop`), so a fix line mends the command; an import that fails is APP_IMPORT_FAILED,
whose fix imports the module again to show the traceback, quoted so no name runs as a command.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import pkgutil
import sys
import sysconfig
from collections.abc import Iterable, Sequence

import engine
import mcp_jobs
import schemas
from engine.errors import NOTHING_NEAR, InvalidArgumentError, JobsError
from engine.shell_words import shell_word
from mcp_jobs.config import APP_ENV
from mcp_jobs.errors import AppImportError

APP_NAME_RULE = "a module's dotted name, as `import` takes it (e.g. examples.shop)"
# How alike a module on the path must be to a missing one to be named as the one meant.
_NEAR_CUTOFF = 0.8


def load_apps(modules: Sequence[str]) -> None:
    """Import each app module so its declarations register. A declaration error (a
    `JobsError`, e.g. `IDEMPOTENCY_REQUIRED`) passes through with its own code."""
    for module in modules:
        # `app.py` is a dotted name too (module `py` of package `app`): where it is a file
        # here, it was typed for the file, and is refused as a file's path is.
        if not is_module_name(module) or (module.endswith(".py") and os.path.isfile(module)):
            raise _refused(modules, module, _meant(module), APP_NAME_RULE)
    for module in modules:
        try:
            importlib.import_module(module)
        except JobsError:
            raise
        except ModuleNotFoundError as exc:
            near = _near_missing(module, exc.name)
            if near is not None:
                found = f"a module that imports from here ({exc}; the nearest found is {near})"
                raise _refused(modules, module, near, found) from exc
            raise AppImportError(module, f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # any import-time failure of user code is reported, not raised
            raise AppImportError(module, f"{type(exc).__name__}: {exc}{_raised_at(exc)}") from exc


def load_apps_quietly(modules: Sequence[str]) -> None:
    """Import the app modules that import, saying nothing of those that do not: done first in
    the command's own process, so that a command refused before it loads them (a flag out of
    range, a mended word) still writes what they declare (`SHOP_DB`) into its fix. The command
    itself then reports an import that fails."""
    with contextlib.suppress(Exception):
        load_apps(modules)


def on_path_here() -> None:
    """Search the working directory for app modules too: an installed `mcp-jobs` script's path
    starts with its own directory, not the working one, so `--app tasks` for ./tasks.py was not
    found. Last on the path, unlike `python -m`: a file there never shadows an installed module
    that this package or the app imports. Called once, by the command's process (cli/entry.py)."""
    here = os.getcwd()
    if not any(os.path.realpath(entry or ".") == os.path.realpath(here) for entry in sys.path):
        sys.path.append(here)


def is_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _meant(name: str) -> str | None:
    """The module a name that is none plainly means: a file's path, or `module:attribute`."""
    head = name.partition(":")[0].strip().removeprefix("./").rstrip("/")
    if head.endswith(".py"):
        head = head[: -len(".py")]
    head = head.replace("/", ".").removesuffix(".__init__")  # a package's own file: the package
    return head if is_module_name(head) else None


# Frames of this package's own code and of the import machinery are never the app's line; the
# standard library's and installed packages' are only when no frame of the app's own is found.
_NOT_THE_APPS = (
    *(
        os.path.join(os.path.dirname(os.path.abspath(package.__file__ or "")), "")
        for package in (engine, mcp_jobs, schemas)
    ),
    "<frozen ",
)
_LIBRARIES = tuple(
    {os.path.join(sysconfig.get_path(name), "") for name in ("stdlib", "purelib", "platlib")}
)


def _raised_at(exc: BaseException) -> str:
    """` (at FILE line N)`: the app's line the failure came from (the innermost frame of code of
    its own, else of any code but this package's), so an agent opens it without running the
    import again; empty for a SyntaxError, whose message names its line."""
    if isinstance(exc, SyntaxError):
        return ""
    own = anywhere = ""
    frames = exc.__traceback__
    while frames is not None:
        filename = frames.tb_frame.f_code.co_filename
        if not filename.startswith(_NOT_THE_APPS):
            anywhere = f" (at {filename} line {frames.tb_lineno})"
            own = anywhere if not filename.startswith(_LIBRARIES) else own
        frames = frames.tb_next
    return own or anywhere


def _near_missing(module: str, missing: str | None) -> str | None:
    """`module` with the part that is not found replaced by the one on the path most like it,
    when that part is the app's own name, not a module the app imports."""
    if missing is None or not (module == missing or module.startswith(missing + ".")):
        return None
    parent, _, part = missing.rpartition(".")
    try:
        # A top-level app is looked for beside the project, not among installed packages.
        path = importlib.import_module(parent).__path__ if parent else [os.getcwd()]
    except (ImportError, AttributeError):
        return None
    found = difflib.get_close_matches(part, _names(path), n=1, cutoff=_NEAR_CUTOFF)
    if not found:
        return None
    near = ".".join(filter(None, [parent, found[0], module[len(missing) + 1 :]]))
    return None if near == module else near  # never the name that failed


def _names(path: Iterable[str]) -> list[str]:
    return [info.name for info in pkgutil.iter_modules(path)]


def _refused(
    modules: Sequence[str], module: str, meant: str | None, expected: str
) -> InvalidArgumentError:
    # The CLI writes the command line with `--app` mended (cli/mend.py); elsewhere the names
    # came from the environment, and the fix sets it.
    fix = None
    if meant is not None:
        apps = ",".join(meant if m == module else m for m in modules)
        fix = f"export {APP_ENV}={shell_word(apps)}"
    return InvalidArgumentError(
        "app", module, expected, fix=fix, nearest=NOTHING_NEAR if meant is None else meant
    )
