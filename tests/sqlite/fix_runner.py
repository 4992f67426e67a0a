"""Run an error's fix line as a user would on a slim image: from an empty directory, with only
PATH and HOME set, and no program on PATH but python3 (no sqlite3 shell, lsof or fuser)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio


def bare_place() -> Path:
    """A new directory holding only `home/` and `bin/python3`; outside pytest's private tmp and
    mode 755, so that another user can run a line there too."""
    place = Path(tempfile.mkdtemp(prefix="mcp-jobs-fix-"))
    (place / "bin").mkdir()
    (place / "home").mkdir()
    (place / "bin" / "python3").symlink_to(os.path.realpath(sys.executable))
    for directory in (place, place / "bin", place / "home"):
        directory.chmod(0o755)
    return place


async def run_fix(
    fix: str, *, python3: str | None = None, user: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`fix` run by /bin/sh in a bare place; `python3` replaces the interpreter on PATH and
    `user` runs it as that uid (and gid) instead of this process's."""
    place = bare_place()
    try:
        if python3 is not None:
            (place / "bin" / "python3").unlink()
            (place / "bin" / "python3").symlink_to(python3)
        env = {"PATH": str(place / "bin"), "HOME": str(place / "home")}
        with anyio.fail_after(60):
            return await anyio.run_process(
                ["/bin/sh", "-c", fix],
                cwd=place / "home",
                env=env,
                check=False,
                user=user,
                group=user,
                extra_groups=None if user is None else [],
            )
    finally:
        shutil.rmtree(place)
