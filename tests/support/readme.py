"""The README's code blocks as the tests that run them as written read them."""

from __future__ import annotations

import os
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent.parent / "README.md"
# The variables that would point a snippet at another database or app than its own.
OURS = ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TENANT", "MCP_JOBS_ENV")


def python_block(heading: str) -> str:
    """The first python block under `heading` (the whole line, `## Quickstart (Python)`), up
    to the next second-level heading."""
    section = README.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    found = re.findall(r"```python\n(.*?)\n```", section, flags=re.DOTALL)
    assert found, f"{heading} has no python block"
    block: str = found[0]
    return block


def own_environment() -> dict[str, str]:
    """This process's environment without `OURS`: a snippet runs on its own database."""
    return {k: v for k, v in os.environ.items() if k not in OURS}
