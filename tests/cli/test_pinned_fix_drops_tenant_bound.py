"""`jobs ls --tenant acme --tenant-id globex --cursor C`: TENANT_PINNED's fix is the line with
the pinned tenant, without the cursor, which goes with the filters of the call that returned it
(tenant_id among them): kept, the fix exited 1 CURSOR_INVALID (exploreA2). The same rule as the
MCP call's (`mcp_jobs.tenant_bound`)."""

from __future__ import annotations

import json

import pytest

from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli_json, shop, words_of
from tests.support.fix_lines import run_fix

__all__ = ["shop"]  # the fixture, used by name


@pytest.mark.parametrize("spelt", ["apart", "joined"])
def test_the_pinned_line_leaves_another_tenants_cursor_out_and_runs(
    shop: str, capsys: pytest.CaptureFixture[str], spelt: str
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    for order in range(1, 4):
        receipt = json.dumps({"order_id": order, "email": "a@b.co"})
        enqueue = ("jobs", "enqueue", "send_receipt", "--input", receipt)
        code, made = cli_json(capsys, *enqueue, "--tenant", "globex", *db)
        assert code == 0, made
    code, page = cli_json(capsys, "jobs", "ls", "--tenant-id", "globex", "--limit", "1", *db)
    cursor = page["next_cursor"]
    assert code == 0 and cursor
    typed = ["--cursor", cursor] if spelt == "apart" else [f"--cursor={cursor}"]
    pinned = ("jobs", "ls", "--tenant", "acme", "--tenant-id", "globex", "--state", "ready")
    code, refused = cli_json(capsys, *pinned, *typed, *db)
    error = refused["error"]
    assert code == 1 and error["code"] == "TENANT_PINNED", error
    assert "--cursor" in error["cause"], error
    words = words_of(error["fix"])
    assert not any(word.startswith("--cursor") for word in words), error
    assert words[words.index("--tenant-id") + 1] == "acme", error
    assert words[words.index("--state") + 1] == "ready", error
    listed = json.loads(run_fix(error["fix"]))
    assert listed["ok"] and listed["jobs"] == [], listed
