"""README "Testing your jobs": the test in its code block passes as written, saved as a file and
run by pytest in an empty directory (no project configuration: pytest-asyncio in strict mode)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.readme import own_environment, python_block


@pytest.mark.timeout(300)
def test_the_readme_testing_example_passes_as_written(tmp_path: Path) -> None:
    example = python_block("### Testing your jobs")
    (tmp_path / "test_welcome.py").write_text(example + "\n", encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_welcome.py"],
        cwd=tmp_path,
        env=own_environment(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout, ran.stdout
