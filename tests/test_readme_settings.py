"""README's *Configuration* table and `config.SETTING_VARIABLES` (what a misspelt variable is
measured against) name the same variables, and every variable the code reads is one of them:
a setting added to one list and not the other would be refused as a slip, or never told of."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_jobs.config import SETTING_VARIABLES

_ROOT = Path(__file__).resolve().parent.parent
_NAME = re.compile(r"`(MCP_JOBS_[A-Z_]+|…_[A-Z_]+)`")
_READ = re.compile(r"\"(MCP_JOBS_[A-Z_]+)\"")


def _readme_variables() -> set[str]:
    text = (_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Configuration\n", 1)[1].split("\n### ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ", 1)[0]
        stem = ""
        for name in _NAME.findall(first):
            if name.startswith("…"):
                name = stem + name.removeprefix("…")  # `…_AUDIENCE` after MCP_JOBS_OAUTH_ISSUER
            else:
                stem = name.rsplit("_", 1)[0]
            names.add(name)
    return names


def _read_by_the_code() -> set[str]:
    found: set[str] = set()
    for package in ("engine", "mcp_jobs"):
        for path in (_ROOT / package).rglob("*.py"):
            found.update(_READ.findall(path.read_text(encoding="utf-8")))
    return found


def test_readme_table_and_the_slip_check_name_the_same_variables() -> None:
    documented = _readme_variables()
    assert "MCP_JOBS_OAUTH_AUDIENCE" in documented and "MCP_JOBS_RETAIN_AUDIT" in documented
    assert documented == set(SETTING_VARIABLES)


def test_every_variable_the_code_reads_is_a_documented_setting() -> None:
    read = _read_by_the_code()
    assert "MCP_JOBS_DATABASE_URL" in read
    assert read <= set(SETTING_VARIABLES), sorted(read - set(SETTING_VARIABLES))
