"""Completions with a real third-party client: the TypeScript SDK client (npm
`@modelcontextprotocol/sdk`) asks `mcp-jobs serve --app examples.shop` over stdio for the values
of the resource templates' and the prompts' arguments (`tests/node/run_scenario.mjs`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.mcp.tsclient_support import run_over

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]  # a cold `npm ci` fits in it

TIMEOUT = 50


def complete(step_id: str, ref: dict[str, str], name: str, value: str | dict[str, str]) -> Any:
    return {
        "id": step_id,
        "op": "complete",
        "params": {"ref": ref, "argument": {"name": name, "value": value}},
    }


DESCRIPTOR = {"type": "ref/resource", "uri": "jobs://descriptors/{name}"}
RUN = {"type": "ref/resource", "uri": "jobs://runs/{job_id}"}
DIAGNOSE = {"type": "ref/prompt", "name": "diagnose_stalled_jobs"}
BACKFILL = {"type": "ref/prompt", "name": "run_backfill_safely"}
JOB_ID = {"$ref": "enqueue.result.structuredContent.job_id"}
ORDER = {"order_id": 1, "sku": "tea-green", "quantity": 2}

STEPS: list[dict[str, Any]] = [
    {"id": "caps", "op": "capabilities"},
    {
        "id": "enqueue",
        "op": "callTool",
        "params": {"name": "enqueue_job", "arguments": {"name": "fulfil_order", "input": ORDER}},
    },
    complete("job_names", DESCRIPTOR, "name", "f"),
    complete("job_id", RUN, "job_id", JOB_ID),
    complete("queues", DIAGNOSE, "queue", ""),
    complete("backfills", BACKFILL, "name", "norm"),
    complete("unknown_prompt", {"type": "ref/prompt", "name": "nope"}, "queue", ""),
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    with run_over("stdio", tmp_path_factory.mktemp("shop"), lambda shop: STEPS, TIMEOUT) as done:
        by_id: dict[str, dict[str, Any]] = done["by_id"]
        return by_id


def completion(answers: dict[str, dict[str, Any]], step_id: str) -> dict[str, Any]:
    step = answers[step_id]
    assert step["ok"], step
    found: dict[str, Any] = step["result"]["completion"]
    return found


def test_the_server_declares_completions(answers: dict[str, dict[str, Any]]) -> None:
    assert answers["caps"]["ok"] and "completions" in answers["caps"]["result"]


def test_job_names_queues_and_backfills_complete(answers: dict[str, dict[str, Any]]) -> None:
    assert completion(answers, "job_names")["values"] == ["fulfil_order"]
    queues = completion(answers, "queues")
    assert {"orders", "catalog", "emails"} <= set(queues["values"])
    assert queues["total"] == len(queues["values"]) and queues["hasMore"] is False
    assert completion(answers, "backfills")["values"] == ["normalize_emails"]


def test_the_enqueued_job_id_completes(answers: dict[str, dict[str, Any]]) -> None:
    job_id = answers["enqueue"]["result"]["structuredContent"]["job_id"]
    assert completion(answers, "job_id")["values"] == [job_id]


def test_an_unknown_prompt_is_invalid_params(answers: dict[str, dict[str, Any]]) -> None:
    step = answers["unknown_prompt"]
    assert not step["ok"] and step["error"]["code"] == -32602
