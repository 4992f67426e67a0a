"""`jobs enqueue Send_Receipt … --key zz`: JOB_UNKNOWN's fix, the line with the job meant,
kept `--key zz`, which that job refuses (it computes its own key), and exited 1 INVALID_ARGUMENT
(exploreA2). The line is now mended as the meant job takes it, by the same check as the MCP
call's (`operations.meant_job`): `--key` the one it computes, `--input`'s fields renamed where
plain; where it still refuses the input, the cause says so and the line is the command's help,
as a guessed enqueue's is (`plan_only`)."""

from __future__ import annotations

import json

import pytest

from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli_json, shop, words_of
from tests.support.fix_lines import run_fix

__all__ = ["shop"]  # the fixture, used by name

RECEIPT = {"order_id": 7, "email": "a@b.co"}


@pytest.mark.parametrize(
    "typed",
    [
        ("--input", json.dumps(RECEIPT), "--key", "zz"),
        ("--input", json.dumps({"orderId": 7, "email": "a@b.co"}), "--key=zz"),
    ],
)
def test_the_line_is_mended_as_the_meant_job_takes_it_and_runs(
    shop: str, capsys: pytest.CaptureFixture[str], typed: tuple[str, ...]
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    argv = ("jobs", "enqueue", "Send_Receipt", *typed, "--tenant", "acme", *db)
    code, refused = cli_json(capsys, *argv)
    error = refused["error"]
    assert code == 1 and error["code"] == "JOB_UNKNOWN", error
    words = words_of(error["fix"])
    assert words[:3] == ["jobs", "enqueue", "send_receipt"], error
    assert "zz" not in " ".join(words) and "receipt:7" in " ".join(words), error
    done = json.loads(run_fix(error["fix"]))
    assert done["ok"] and done["state"] == "ready", done
    code, shown = cli_json(capsys, "jobs", "show", done["job_id"], "--tenant", "acme", *db)
    assert shown["job"]["input"] == RECEIPT and shown["job"]["idempotency_key"] == "receipt:7"


def test_an_input_the_meant_job_refuses_is_said_and_the_line_is_its_help(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    typed = ("--input", '{"colour": "red"}', "--key", "zz", "--tenant", "acme")
    code, refused = cli_json(capsys, "jobs", "enqueue", "Send_Receipt", *typed, *db)
    error = refused["error"]
    assert code == 1 and error["code"] == "JOB_UNKNOWN", error
    assert 'input for "send_receipt" is invalid' in error["cause"], error
    assert words_of(error["fix"])[:3] == ["jobs", "enqueue", "--help"], error
    code, listed = cli_json(capsys, "jobs", "ls", *db)
    assert listed["jobs"] == []
