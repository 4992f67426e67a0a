"""`mcp-jobs worker --queues orders,emails`: argparse takes one queue named "orders,emails",
which no job is in, and the worker served it (its start line read like two queues) while the
jobs stayed ready. Refused, with the line typed, the names apart, as the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.fix_lines import command_words
from mcp_jobs.cli.mend import with_value

APP = """
from pydantic import BaseModel
from engine import job

class P(BaseModel):
    n: int

@job(idempotency_key=lambda i: str(i.n), queue="orders")
async def q_order(data: P, ctx) -> None: ...

@job(idempotency_key=lambda i: str(i.n), queue="emails")
async def q_email(data: P, ctx) -> None: ...
"""


@pytest.mark.parametrize("typed", [["--queues", "orders,emails"], ["--queues=orders,emails"]])
def test_queues_joined_by_a_comma_are_refused_with_the_names_apart(
    tmp_path: Path, typed: list[str]
) -> None:
    (tmp_path / "joined_app.py").write_text(APP)
    url = f"sqlite:///{tmp_path}/jobs.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    cli = [sys.executable, "-m", "mcp_jobs.cli"]

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, *words], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )

    assert run("db", "migrate", "--database-url", url).returncode == 0
    refused = run(
        "worker", "--app", "joined_app", *typed, "--concurrency", "4", "--database-url", url
    )
    assert refused.returncode == 1
    text = refused.stdout + refused.stderr
    assert "INVALID_ARGUMENT" in text
    (fix,) = [line.split("fix:", 1)[1].strip() for line in text.splitlines() if "fix:" in line]
    words = command_words(fix)
    assert words is not None
    at = words.index("--queues")
    assert words[at : at + 3] == ["--queues", "orders", "emails"]
    assert "--concurrency" in words and "joined_app" in words  # the rest of the line kept
    assert json.dumps(fix).count("orders,emails") == 0


def test_a_flag_of_several_words_is_mended_where_the_value_stands() -> None:
    argv = ["worker", "--queues", "billing", "a,b", "--concurrency", "4"]
    assert with_value(argv, {"--queues"}, "a,b", ["a", "b"]) == [
        "worker", "--queues", "billing", "a", "b", "--concurrency", "4",
    ]  # fmt: skip
    assert with_value(["worker", "--queues=a,b"], {"--queues"}, "a,b", ["a", "b"]) == [
        "worker", "--queues", "a", "b",
    ]  # fmt: skip
