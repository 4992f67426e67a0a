"""Which event loop `mcp-jobs worker` runs on: uvloop when it is installed, else asyncio's own.

uvloop runs the same asyncio program with less worker CPU per job (benchmarks/README.md).
`MCP_JOBS_EVENT_LOOP=asyncio` keeps the standard loop; `uvloop` insists on uvloop; `auto` (the
default) takes it when it is there.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys

from engine.errors import InvalidArgumentError
from engine.extras import install_line
from engine.meant import meant_choices

EVENT_LOOP_ENV = "MCP_JOBS_EVENT_LOOP"
CHOICES = ("auto", "asyncio", "uvloop")


def uvloop_installed() -> bool:
    return sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None


def backend_options(choice: str | None = None) -> dict[str, bool]:
    """anyio's asyncio backend options for `choice` (default: the environment, else auto)."""
    raw = choice if choice is not None else os.environ.get(EVENT_LOOP_ENV, "")
    value = raw.strip().lower() or "auto"
    if value not in CHOICES:
        # The loop a slip plainly names (`uv-loop`), else the default.
        found = meant_choices([value.replace("-", "").replace("_", "")], sorted(CHOICES))
        meant = found[0][0] if found is not None else "auto"
        raise InvalidArgumentError(
            EVENT_LOOP_ENV, raw, "auto, asyncio or uvloop", fix=f"export {EVENT_LOOP_ENV}={meant}"
        )
    installed = uvloop_installed()
    if value == "uvloop" and not installed:
        raise InvalidArgumentError(
            EVENT_LOOP_ENV,
            raw,
            f"auto or asyncio: uvloop is not installed ({install_line('uvloop')})",
            fix=install_line("uvloop"),
        )
    return {"use_uvloop": value == "uvloop" or (value == "auto" and installed)}


def loop_name() -> str:
    """ "uvloop" or "asyncio": what the running loop is, for the worker's first log line."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
