"""`mcp-jobs events send` refuses an event name or key with a control character (its fix the
command with them dropped, which runs), and `mcp-jobs limits --tenant` bounds the tenant's
length as every other tenant input is bounded."""

from __future__ import annotations

import pytest

from engine.bounds import MAX_TENANT_BYTES
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


@pytest.mark.parametrize(
    "argv",
    [
        ["paid\x1b[31m", "5"],
        ["paid", "5\nFAKE"],
        ["--paid", "5"],
        ["paid", "5", "--tenant", "acme\x07"],
    ],
)
def test_events_send_refuses_a_bad_name_and_its_fix_runs(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    migrated(url)
    words = ["events", "send", "--database-url", url, "--json"]
    if argv[0].startswith("-"):
        words.append("--")
    code, refused = run(capsys, *words, *argv)
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
    fix = command_words(refused["error"]["fix"])
    assert fix is not None and fix[0] == "mcp-jobs", refused["error"]["fix"]
    code, sent = run(capsys, *fix[1:], "--json")
    assert code == 0, (refused["error"]["fix"], sent)


def test_limits_bounds_the_tenant(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    tenant = "t" * (MAX_TENANT_BYTES + 1)
    code, refused = run(capsys, "limits", "--database-url", url, "--tenant", tenant, "--json")
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
    assert tenant not in refused["error"]["cause"]
    assert refused["error"]["retryable"] is False
