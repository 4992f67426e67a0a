"""README "Testing your jobs": the test in its code block passes as written, saved as a file and
run by pytest in an empty directory (no project configuration: pytest-asyncio in strict mode)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
OURS = ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TENANT", "MCP_JOBS_ENV")


def _example() -> str:
    section = README.read_text(encoding="utf-8").split("\n### Testing your jobs\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    found = re.findall(r"```python\n(.*?)\n```", section, flags=re.DOTALL)
    assert found, "the section has no python block"
    block: str = found[0]
    return block


@pytest.mark.timeout(300)
def test_the_readme_testing_example_passes_as_written(tmp_path: Path) -> None:
    (tmp_path / "test_welcome.py").write_text(_example() + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_welcome.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout, ran.stdout
