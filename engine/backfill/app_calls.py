"""The declaration's own functions (`requires`, `count`, `read`, `key`) called by a dry run or a
write's check: what one of them raises is the app's failure, not the engine's, so it is answered
as BACKFILL_FUNCTION_FAILED naming the call, with a line that makes the same call again.

The pass calls them too; there a raise fails the attempt (JOB_FAILED) under the pass's retry
policy, as a job body's raise does: a database that blinked must not end the sweep.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager

from engine.backfill.errors import BackfillFunctionFailedError
from engine.errors import JobsError
from engine.fix_lines import import_root
from engine.shell_words import shell_word


def again_line(name: str, field: str, fn: object, arguments: str | None) -> str:
    """A line that calls `fn` as the check did (`arguments`: as Python source; None when the
    call cannot be written, such as `key(row)`), from any directory; else the change to make."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if arguments is None or not module or module == "__main__" or not qualname.isidentifier():
        return f'change {field}= of backfill(name="{name}") in {module or "its module"}'
    call = f"f({arguments})"
    if inspect.iscoroutinefunction(fn):
        call = f"asyncio.run({call})"
    line = f'python3 -c "import asyncio; from {module} import {qualname} as f; print({call})"'
    root = import_root(module)
    return f"PYTHONPATH={shell_word(root)} {line}" if root is not None else line


@contextmanager
def app_call(name: str, field: str, fn: object, arguments: str | None) -> Iterator[None]:
    """Turn what `fn` raises (not an error of ours) into BACKFILL_FUNCTION_FAILED."""
    try:
        yield
    except JobsError:
        raise
    except Exception as exc:
        shown = f"{field}({arguments if arguments is not None else 'row'})"
        again = again_line(name, field, fn, arguments)
        raise BackfillFunctionFailedError(name, shown, exc, again) from exc


__all__ = ["again_line", "app_call"]
