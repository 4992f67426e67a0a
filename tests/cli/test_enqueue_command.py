"""`mcp-jobs jobs enqueue NAME --input JSON`: an agent with a shell enqueues as `enqueue_job`
does (before, it had to write Python). `--json` is the tool's envelope; every refusal's fix runs
as given: a job name slipped (the command's help: a guessed line never writes), an input
written as Python (`{'order_id': 1}`, the same value), a tenant's job without `--tenant`."""

from __future__ import annotations

import json

import pytest

from tests.cli.databases import migrated
from tests.cli.test_cli import APP, assert_tool_shape, cli, cli_json, shop, words_of
from tests.support.fix_lines import run_fix

__all__ = ["shop"]  # the fixture, used by name

RECEIPT = '{"order_id": 7, "email": "a@b.co"}'


def test_an_enqueue_answers_the_tools_envelope_and_a_second_dedupes(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    argv = ("jobs", "enqueue", "send_receipt", "--input", RECEIPT, "--tenant", "acme", *db)
    code, first = cli_json(capsys, *argv)
    assert code == 0 and first["state"] == "ready" and first["tenant_id"] == "acme", first
    assert_tool_shape("enqueue_job", first)
    code, out, _ = cli(capsys, *argv)
    assert code == 0 and out.startswith(f"a live job of this key already: job {first['job_id']}")
    code, shown = cli_json(capsys, "jobs", "show", first["job_id"], "--tenant", "acme", *db)
    assert shown["job"]["input"] == json.loads(RECEIPT)


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        (("send_reciept", "--input", RECEIPT, "--tenant", "acme"), "JOB_UNKNOWN"),
        (("send_receipt", "--input", "{'order_id': 7, 'email': 'a@b.co'}", "--tenant", "acme"), ""),
        (("send_receipt", "--input", RECEIPT), "JOB_TENANT_REQUIRED"),
    ],
)
def test_a_refused_enqueue_stores_nothing_and_its_fix_enqueues(
    shop: str, capsys: pytest.CaptureFixture[str], typed: tuple[str, ...], why: str
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    code, refused = cli_json(capsys, "jobs", "enqueue", *typed, *db)
    error = refused["error"]
    assert code == 1 and not error["retryable"], error
    assert error["code"] == (why or "INVALID_ARGUMENT"), error
    code, listed = cli_json(capsys, "jobs", "ls", *db)
    assert listed["jobs"] == []
    if why == "JOB_TENANT_REQUIRED":
        # The tenant is the caller's to name: the line with the flag that gives it (the
        # engine's own fix is a Python call).
        words = words_of(error["fix"])
        assert words[words.index("--tenant") + 1] == "TENANT", error
        assert words[:3] == ["jobs", "enqueue", "send_receipt"], error
        return
    if why == "JOB_UNKNOWN":
        # A slip of the keys is a guess, and a guessed line never writes (cli/plan_only.py): an
        # enqueue has no plan to show, so its help; the cause names the job meant.
        assert "meant send_receipt?" in error["cause"], error
        assert words_of(error["fix"])[:3] == ["jobs", "enqueue", "--help"], error
        return
    assert words_of(error["fix"])[:3] == ["jobs", "enqueue", "send_receipt"], error
    done = json.loads(run_fix(error["fix"]))
    assert done["ok"] and done["state"] == "ready", done


def test_an_input_that_is_no_object_is_refused(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ("--database-url", migrated(shop), "--app", APP)
    for text in ("[1]", "7", "not json", '{"a": 1, "a": 2}'):
        code, refused = cli_json(capsys, "jobs", "enqueue", "send_receipt", "--input", text, *db)
        assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
