"""The plain-text output never writes a control character from a stored value to the terminal
(an ESC that recolours it, a newline that splits a row): each is shown escaped, as `\\x1b` or
`\\n`. `--json` prints the values as stored, and a fix line is printed as it must be run."""

from __future__ import annotations

import io
from typing import Any

from mcp_jobs.cli.render import print_error, print_text

ESC = "\x1b[31m"
NEWLINE = "t\n1"


def _job(**fields: Any) -> dict[str, Any]:
    job = {
        "id": "01a2478fe31d00003383719f16c3c0ed",
        "name": "echo",
        "queue": "mail",
        "tenant_id": ESC,
        "state": "dead",
        "attempt": 1,
        "max_attempts": 3,
        "priority": 0,
        "input": {"s": ESC},
        "created_at": 0,
        "updated_at": 0,
        "last_error": {"code": "JOB_FAILED", "cause": f"boom {ESC}\nsecond", "fix": "fix it"},
    }
    return {**job, **fields}


def _text(kind: str, envelope: dict[str, Any]) -> str:
    out = io.StringIO()
    print_text(kind, envelope, out)
    return out.getvalue()


def _raw_controls(text: str) -> set[str]:
    return {c for c in text if not c.isprintable() and c != "\n"}


def test_a_listed_tenant_with_an_escape_or_a_newline_stays_on_its_row() -> None:
    text = _text("list_jobs", {"jobs": [_job(), _job(tenant_id=NEWLINE)]})
    assert not _raw_controls(text)
    assert len(text.strip().split("\n")) == 3
    assert "\\x1b[31m" in text and "t\\n1" in text


def test_a_shown_job_writes_no_control_character() -> None:
    text = _text("inspect_job", {"job": _job(name=f"n{ESC}", queue=f"q{NEWLINE}")})
    assert not _raw_controls(text), repr(text)
    first = text.split("\n")[0]
    assert "\\x1b[31m" in first and "qt\\n1" in first  # name, queue, tenant on the one line


def test_an_error_cause_is_escaped_and_its_fix_left_to_run() -> None:
    out = io.StringIO()
    fix = "mcp-jobs jobs show 01a2 --tenant 'a b'"
    print_error(
        {"code": "JOB_NOT_FOUND", "title": "t", "cause": f"in tenant {ESC}", "fix": fix}, out
    )
    text = out.getvalue()
    assert not _raw_controls(text)
    assert "in tenant \\x1b[31m" in text
    assert f"fix:   {fix}" in text
