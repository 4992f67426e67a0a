"""A benchmark child's peak memory is its own, not the launcher's high-water mark (Linux keeps
`ru_maxrss` across exec: every system once printed the launcher's 51.7 MB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_MB = 256


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_child_reports_its_own_peak_not_its_launcher_s() -> None:
    ballast = bytearray(LAUNCHER_MB * 1024 * 1024)  # the launcher's high-water mark
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
    shown = subprocess.run(
        [sys.executable, "-c", "from benchmarks.child import peak_rss_mb; print(peak_rss_mb())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    del ballast
    assert 5 < float(shown) < LAUNCHER_MB / 2
