"""The README's error table lists every registered code, with its retry class, and no other."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from engine.errors import REGISTRY

# Every module that declares error classes; importing them fills the registry.
_DECLARING = (
    "engine.errors",
    "engine.driver_errors",
    "engine.outbox_errors",
    "engine.reruns",
    "engine.descriptors",
    "engine.retention",
    "engine.metrics",
    "engine.tasks.errors",
    "engine.backfill.errors",
    "engine.drivers.sqlite.errors",
    "engine.drivers.postgres.loops",
    "engine.drivers.postgres.outbox",
    "mcp_jobs.errors",
    "mcp_jobs.incidents",
)
_ROW = re.compile(r"^\| `([A-Z_]+)` \| (yes|no) \|")


def _readme_rows() -> dict[str, bool]:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, bool] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2) == "yes"
    return rows


def test_readme_lists_every_error_code_with_its_retry_class() -> None:
    for module in _DECLARING:
        importlib.import_module(module)
    registered = {code: cls.retry == "transient" for code, cls in REGISTRY.items()}
    assert _readme_rows() == registered
