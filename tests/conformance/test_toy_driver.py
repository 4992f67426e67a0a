"""A driver added without an engine edit runs the whole conformance kit by naming its URL.

The kit runs in a pytest of its own, exactly as a third-party driver's suite would start it: the
kit's plugin, the toy's plugin (tests/conformance/toy.py), and `--mcp-jobs-driver-url=toy://`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine.testing.kit
from engine.drivers import open_driver, register_driver, unregister_driver
from engine.errors import JobsError
from tests.conformance.toy import SCHEME, ToyDriver, open_toy

ROOT = Path(__file__).resolve().parents[2]
KIT = Path(engine.testing.kit.__file__).parent


KIT_RUN = (
    "-m",
    "pytest",
    "-v",
    "-p",
    "no:cacheprovider",
    "-rs",  # the reason of every skip
    "--noconftest",  # only the kit's fixtures and the toy's, as in another project's suite
    "-p",
    "engine.testing.plugin",
    "-p",
    "tests.conformance.toy",
    "--pyargs",
    "engine.testing.kit",
    f"--mcp-jobs-driver-url={SCHEME}://",
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_toy_driver_passes_the_whole_kit() -> None:
    run = subprocess.run(
        [sys.executable, *KIT_RUN], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    summary = lines[-1]
    assert re.search(r" \d+ passed", summary), summary
    # Only the tests of a second driver instance on the same database may skip: the toy's
    # database lives in one instance, as memory's does.
    reasons = [line for line in lines if line.startswith("SKIPPED [")]
    assert all("share no database" in line for line in reasons), reasons
    on_toy = [line for line in lines if f"[{SCHEME}" in line and " PASSED" in line]
    assert len(on_toy) > 100
    ran = {line.split("::", 1)[0].rsplit("/", 1)[-1] for line in on_toy}
    assert ran == {path.name for path in KIT.glob("test_*.py")}


def test_the_toy_scheme_opens_the_toy_driver_and_unknown_schemes_name_it() -> None:
    assert isinstance(open_driver(f"{SCHEME}://"), ToyDriver)
    unregister_driver(SCHEME)
    try:
        with pytest.raises(JobsError) as raised:
            open_driver(f"{SCHEME}://")
        assert raised.value.code == "DATABASE_URL_INVALID"
        assert "toy://" not in raised.value.cause
        assert "memory://" in raised.value.cause and "postgresql://" in raised.value.cause
    finally:
        register_driver(SCHEME, open_toy)
