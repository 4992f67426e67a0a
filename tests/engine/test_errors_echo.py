"""A name a caller gave comes back in a cause quoted and escaped, and bounded: a newline or an
ANSI escape in a job name cannot start a forged line, or recolour a terminal, in a log or a CLI
answer, and a 1 MB name does not come back whole."""

from __future__ import annotations

from engine.errors import ECHO_LIMIT, JobUnknownError


def test_an_unknown_job_name_is_echoed_escaped() -> None:
    cause = JobUnknownError("send\x1b[31m_mail\nERROR forged", ["send_mail"]).cause
    assert "\x1b" not in cause and "\n" not in cause
    assert '"send\\u001b[31m_mail\\nERROR forged"' in cause


def test_a_plain_name_reads_as_before_and_a_huge_one_is_cut() -> None:
    assert 'no job named "ghost" is registered here' in JobUnknownError("ghost", []).cause
    cause = JobUnknownError("x" * 1_000_000, []).cause
    assert len(cause) < 2 * ECHO_LIMIT + 200 and "1000000 characters in all" in cause
