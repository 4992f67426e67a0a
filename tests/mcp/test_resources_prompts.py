"""Resources (descriptors, runs, backfills, stats) and the two prompts."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, GetPromptResult, TextContent, TextResourceContents

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry
from mcp_jobs.config import Settings
from mcp_jobs.server.apps_ui import DASHBOARD_URI as APP_URI
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller


def _text(prompt: GetPromptResult) -> str:
    (message,) = prompt.messages
    assert isinstance(message.content, TextContent)
    return message.content.text


async def _json(mcp: Caller, uri: str) -> object:
    result = await mcp.client.read_resource(uri)
    (content,) = result.contents
    assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
    return json.loads(content.text)


async def test_resources_are_listed_and_read(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    r = await jobs.enqueue("greet", {"user_id": 1})
    await Worker(jobs).run_until_idle()
    async with open_mcp() as mcp:
        listed = {str(res.uri) for res in (await mcp.client.list_resources()).resources}
        assert listed == {"jobs://descriptors", "jobs://backfills", "jobs://stats", APP_URI}
        templates = {
            t.uri_template for t in (await mcp.client.list_resource_templates()).resource_templates
        }
        assert templates == {"jobs://descriptors/{name}", "jobs://runs/{job_id}"}

        descriptors = await _json(mcp, "jobs://descriptors")
        assert isinstance(descriptors, list)
        assert [d["name"] for d in descriptors] == ["flaky", "fulfil", "greet", "receipt"]
        one = await _json(mcp, "jobs://descriptors/greet")
        assert isinstance(one, dict) and one["queue"] == "mail"
        run = await _json(mcp, f"jobs://runs/{r.id}")
        assert isinstance(run, dict) and run["job"]["state"] == "done"
        assert "ok" not in run  # the resource is the payload, not an envelope
        stats = await _json(mcp, "jobs://stats")
        assert isinstance(stats, dict) and stats["queues"][0]["done"] == 1
        backfills = await _json(mcp, "jobs://backfills")
        assert isinstance(backfills, dict)
        assert [b["name"] for b in backfills["backfills"]] == ["normalize_emails"]


async def test_a_missing_descriptor_or_run_is_resource_not_found(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        for uri in ("jobs://descriptors/nope", f"jobs://runs/{'0' * 32}"):
            with pytest.raises(MCPError) as caught:
                await mcp.client.read_resource(uri)
            assert caught.value.error.code == INVALID_PARAMS


async def test_a_name_no_run_or_descriptor_can_have_is_fixed_by_the_line_that_lists_them(
    open_mcp: OpenMcp,
) -> None:
    """An empty job id or name: the fix said "pass job_id as a non-empty str …", prose; now the
    command that lists what there is to name."""
    async with open_mcp() as mcp:
        for uri, lists in (("jobs://runs/", "jobs ls"), ("jobs://descriptors/", "jobs describe")):
            with pytest.raises(MCPError) as caught:
                await mcp.client.read_resource(uri)
            message = caught.value.error.message
            # The fix line may start with the environment an app imported earlier declares.
            fix = message.partition("(fix: ")[2]
            assert "INVALID_ARGUMENT" in message and f"mcp-jobs {lists} --json" in fix, message


async def test_an_unknown_resource_names_the_ones_there_are_and_echoes_the_uri_cut(
    open_mcp: OpenMcp,
) -> None:
    """The SDK answered "Unknown resource: <uri>" with the URI whole in the message and again in
    the data: a 1 MB URI cost a 2 MB answer, and named nothing the caller could read instead."""
    async with open_mcp() as mcp:
        for uri in ("jobs://nosuch", "jobs://nosuch/" + "x" * 1_000_000, "jobs://runs/%00"):
            with pytest.raises(MCPError) as caught:
                await mcp.client.read_resource(uri)
            error = caught.value.error
            assert error.code == INVALID_PARAMS
            assert error.message.startswith("unknown resource 'jobs://"), error.message
            assert "jobs://stats" in error.message and "jobs://runs/{job_id}" in error.message
            assert len(error.message) < 1_000 and len(json.dumps(error.data)) < 1_000


async def test_the_prompts_walk_an_agent_through_the_procedure(
    backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    async with open_mcp() as mcp:
        prompts = {p.name: p for p in (await mcp.client.list_prompts()).prompts}
        assert set(prompts) == {"diagnose_stalled_jobs", "run_backfill_safely"}
        backfill_args = prompts["run_backfill_safely"].arguments or []
        assert [(a.name, a.required) for a in backfill_args] == [("name", True)]

        diagnose = await mcp.client.get_prompt("diagnose_stalled_jobs", {"queue": "mail"})
        (message,) = diagnose.messages
        text = message.content.text  # type: ignore[union-attr]
        assert message.role == "user" and '"queue": "mail"' in text
        for tool in ("diagnose_queue", "inspect_job", "retry_job", "wait_for_job"):
            assert tool in text
        everywhere = await mcp.client.get_prompt("diagnose_stalled_jobs", {})
        assert "every queue" in everywhere.messages[0].content.text  # type: ignore[union-attr]

        safely = await mcp.client.get_prompt("run_backfill_safely", {"name": "normalize_emails"})
        text = safely.messages[0].content.text  # type: ignore[union-attr]
        assert '"name": "normalize_emails"' in text
        assert "blocked_by" in text and '"write": true' in text


async def test_a_prompts_arguments_are_names_bounded_and_quoted(open_mcp: OpenMcp) -> None:
    """A prompt writes its argument into its text: a 1 MB queue name made a 2 MB prompt (5 MB
    for a backfill's), an echo of an unknown prompt's name kept all of it in the error's data,
    and a name with a quote in it broke the JSON of the calls the prompt spells out."""
    huge = "x" * 1_000_000
    async with open_mcp() as mcp:
        for prompt, argument in (
            ("diagnose_stalled_jobs", "queue"),
            ("run_backfill_safely", "name"),
        ):
            for value in (huge, "a\x00b"):
                with pytest.raises(MCPError) as caught:
                    await mcp.client.get_prompt(prompt, {argument: value})
                error = caught.value.error
                assert (
                    error.code == INVALID_PARAMS
                    and f"prompt {prompt}: {argument}=" in error.message
                )
                assert len(error.message) < 1_000
        for name, arguments in ((huge, {}), ("run_backfill_safely", {"name": "n", huge: "1"})):
            with pytest.raises(MCPError) as caught:
                await mcp.client.get_prompt(name, arguments)
            assert len(json.dumps(caught.value.error.data)) < 1_000
        # A blank optional argument (a client's empty form field) is no argument.
        blank = await mcp.client.get_prompt("diagnose_stalled_jobs", {"queue": ""})
        assert "every queue" in _text(blank)
        # A name with a quote is no backfill's (a declaration refuses it): the prompt refuses it.
        with pytest.raises(MCPError) as caught:
            await mcp.client.get_prompt("run_backfill_safely", {"name": 'say "hi"'})
        assert isinstance(caught.value.error.data, dict)
        assert caught.value.error.data["code"] == "BACKFILL_UNKNOWN"


async def test_both_prompts_refuse_a_name_nothing_has_with_the_one_meant(
    backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    """A procedure about a queue or a backfill nothing has would fail at its first call: each
    prompt refuses the name alike (the code, and the name it plainly stands for)."""
    customers.declare(backfill_registry)
    async with open_mcp() as mcp:
        for prompt, argument, value, code, meant in (
            ("diagnose_stalled_jobs", "queue", "mial", "QUEUE_UNKNOWN", "mail"),
            (
                "run_backfill_safely",
                "name",
                "normalise_emails",
                "BACKFILL_UNKNOWN",
                "normalize_emails",
            ),
        ):
            with pytest.raises(MCPError) as caught:
                await mcp.client.get_prompt(prompt, {argument: value})
            error = caught.value.error
            assert error.code == INVALID_PARAMS and isinstance(error.data, dict), error
            assert error.data["code"] == code and error.message.startswith(f"prompt {prompt}: ")
            assert (error.data["prompt"], error.data["argument"]) == (prompt, argument)
            assert error.data["meant"] == meant and f"meant {meant}?" in error.message
        # A paused queue nothing else knows is one diagnose_queue reports on: it is no slip.
        await mcp.ok("pause_queue", {"queue": "quiet"})
        paused = await mcp.client.get_prompt("diagnose_stalled_jobs", {"queue": "quiet"})
        assert '"queue": "quiet"' in _text(paused)


async def test_read_only_drops_the_prompt_that_ends_in_a_write(open_mcp: OpenMcp) -> None:
    async with open_mcp(Settings(read_only=True)) as mcp:
        prompts = {p.name for p in (await mcp.client.list_prompts()).prompts}
        assert prompts == {"diagnose_stalled_jobs"}
        diagnose = await mcp.client.get_prompt("diagnose_stalled_jobs", {})
        text = diagnose.messages[0].content.text  # type: ignore[union-attr]
        assert "read-only" in text and "mcp-jobs jobs retry <job_id>" in text
        stats = await _json(mcp, "jobs://stats")
        assert isinstance(stats, dict) and stats["queues"] == []
