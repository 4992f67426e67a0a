"""Strict arguments on a live in-process server (issue #22 item 3): every tool takes a boolean only
from a JSON boolean and a number only from a JSON number of its kind, never text parsed into
one; every numeric argument publishes its range and a breach is INVALID_ARGUMENT (LIMIT_EXCEEDED
over a server cap), naming the argument; a job's input refuses unknown fields; a second cancel
is ok; an unknown tool or prompt, or a prompt missing its argument, is JSON-RPC -32602 and logs
no traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp import MCPError
from mcp.types import INVALID_PARAMS

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry
from engine.bounds import MAX_DELAY_MS
from engine.errors import ECHO_LIMIT
from mcp_jobs.cli.entry import main
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.errors import example_call
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller

# A valid value of every required argument, so that the argument under test is the only wrong
# one. The arguments are refused before any tool runs: these need not name real things.
REQUIRED: dict[str, Any] = {
    "job_id": "f" * 32,
    "name": "greet",
    "input": {"user_id": 1},
    "key": "k",  # send_event
}
# An argument that is taken only beside another (runs page the runs of one backfill; a wait
# follows the pass a write starts).
COMPANIONS: dict[str, dict[str, Any]] = {
    "runs_limit": {"name": "greet"},
    "wait_seconds": {"write": True},
}
# A bound that moves with the clock (run_at: ten years ahead): the schema publishes a fixed one
# beyond it, the engine refuses what lies past the moving one, and its fix is the call there.
MOVING_BOUNDS: dict[tuple[str, str], Callable[[Jobs], int]] = {
    ("enqueue_job", "run_at"): lambda jobs: jobs.clock.now_ms() + MAX_DELAY_MS
}
ARGUMENT_REFUSALS = {"INVALID_ARGUMENT", "LIMIT_EXCEEDED", "TOOL_ARGUMENTS_INVALID"}
# The bounds that are the server's own limits (ServerLimits), over which LIMIT_EXCEEDED.
SERVER_CAPS = {
    ("list_jobs", "limit"),
    ("describe_jobs", "limit"),
    ("queue_stats", "limit"),
    ("wait_for_job", "timeout_seconds"),
    ("run_backfill", "wait_seconds"),
}


def _kinds(schema: dict[str, Any]) -> set[str]:
    return {s.get("type", "") for s in schema.get("anyOf", [schema])} - {"null"}


def _wrong_values(schema: dict[str, Any]) -> list[Any]:
    """Values a lax validator would coerce into `schema`'s kind, and a strict one refuses."""
    kinds = _kinds(schema)
    wrong: list[Any] = []
    if "boolean" in kinds:
        wrong += ["yes", "true", 1, 0]
    if "integer" in kinds:
        # Text is a kind of its own where the argument also takes it (run_at's ISO 8601 time).
        wrong += ([] if "string" in kinds else ["5"]) + [5.5, True]
    elif "number" in kinds:
        wrong += ["5", True]
    if "array" in kinds:
        wrong += ['["failed"]']
    if "object" in kinds:
        wrong += ['{"user_id": 1}']
    if kinds == {"string"} or (not kinds and "enum" in schema):
        wrong += [5]
    return wrong


async def _schemas(mcp: Caller) -> dict[str, dict[str, Any]]:
    return {t.name: t.input_schema for t in (await mcp.client.list_tools()).tools}


def _call(schema: dict[str, Any], argument: str, value: Any) -> dict[str, Any]:
    call = {n: REQUIRED[n] for n in schema.get("required", []) if n != argument}
    return {**call, **COMPANIONS.get(argument, {}), argument: value}


async def test_every_argument_of_every_tool_is_strict(open_mcp: OpenMcp, jobs: Jobs) -> None:
    checked = 0
    async with open_mcp() as mcp:
        for tool, schema in (await _schemas(mcp)).items():
            for argument, prop in schema["properties"].items():
                for value in _wrong_values(prop):
                    error = await mcp.fails(
                        tool, _call(schema, argument, value), "TOOL_ARGUMENTS_INVALID"
                    )
                    (entry,) = [e for e in error["details"]["errors"] if e["loc"][0] == argument]
                    assert entry["expected"] and argument in error["cause"], (tool, argument)
                    # The place in the value given, never the union member pydantic tried.
                    assert entry["loc"] == [argument], (tool, argument, entry)
                    assert error["retryable"] is False
                    checked += 1
    # write, force, include_cancelled, pending_only, prune's write; the limits; input; state …
    assert checked >= 40
    assert (await jobs.list()).jobs == []


async def test_a_whole_number_sent_as_a_float_is_taken_as_the_integer(
    open_mcp: OpenMcp, jobs: Jobs, clock: ManualClock
) -> None:
    """JSON Schema's "integer" admits 5.0, and so does every integer argument: a client that
    checks its call against the published schema, or writes every number as a float, is not
    refused for the type. 5.5 still is; a range breach or an engine refusal of such a value is
    mended as the integer."""
    job = await jobs.enqueue("greet", {"user_id": 1})
    checked = 0
    async with open_mcp() as mcp:
        for tool, schema in (await _schemas(mcp)).items():
            for argument, prop in schema["properties"].items():
                kinds = _kinds(prop)
                if "integer" not in kinds:
                    continue
                bounds = next(s for s in prop.get("anyOf", [prop]) if s.get("type") != "null")
                value = float(bounds["minimum"])
                answer = await mcp.call(tool, _call(schema, argument, value))
                code = answer.data.get("error", {}).get("code")
                assert code not in ARGUMENT_REFUSALS, (tool, argument, answer.data)
                checked += 1
        assert checked >= 8
        listed = await mcp.ok("list_jobs", {"limit": 1.0})
        assert [j["id"] for j in listed["jobs"]] == [job.id]
        over = await mcp.fails("list_jobs", {"limit": 500.0}, "LIMIT_EXCEEDED")
        assert over["next_call"] == {"tool": "list_jobs", "arguments": {"limit": 200}}, over
        # The engine refuses a run_at past its moving bound: the fix is the call at that bound.
        later = clock.now_ms() + MAX_DELAY_MS
        greet = {"name": "greet", "input": {"user_id": 2}}
        given = {**greet, "run_at": float(later + 60_000)}
        error = await mcp.fails("enqueue_job", given, "INVALID_ARGUMENT")
        call = {**greet, "run_at": later}
        assert error["next_call"] == {"tool": "enqueue_job", "arguments": call}, error
        error = await mcp.fails("list_jobs", {"limit": 2.5}, "TOOL_ARGUMENTS_INVALID")
        assert "next_call" not in error and "a whole number" in error["cause"]
    assert [j.id for j in (await jobs.list()).jobs] == [job.id]


async def test_null_for_an_optional_argument_is_the_argument_left_out(
    open_mcp: OpenMcp, jobs: Jobs
) -> None:
    """A client that turns each tool's schema into strict function calling (OpenAI's) sends
    every argument, the unset ones as null. An optional argument's null is taken as left out:
    the call answers as the same call without it. A required argument's null is refused."""
    checked = 0
    async with open_mcp() as mcp:
        for tool, schema in (await _schemas(mcp)).items():
            required = set(schema.get("required", []))
            for argument in schema["properties"]:
                call = _call(schema, argument, None)
                if argument in required:
                    await mcp.fails(tool, call, "TOOL_ARGUMENTS_INVALID")
                    continue
                without = {k: v for k, v in call.items() if k != argument}
                given, left_out = await mcp.call(tool, call), await mcp.call(tool, without)
                codes = [a.data.get("error", {}).get("code") for a in (given, left_out)]
                # (pause_queue without either argument is INVALID_ARGUMENT both ways.)
                assert codes[0] == codes[1] != "TOOL_ARGUMENTS_INVALID", (
                    tool,
                    argument,
                    given.data,
                )
                checked += 1
        assert checked >= 40
        listed = await mcp.ok("list_jobs", {"limit": None, "state": None, "cursor": None})
        assert listed["jobs"] and listed["jobs"] == (await mcp.ok("list_jobs", {}))["jobs"]
        # Beside a misspelt argument, the null one stays left out and the fix runs.
        error = await mcp.fails("list_jobs", {"limit": None, "lmit": 5}, "TOOL_ARGUMENTS_INVALID")
        assert error["fix"] == 'list_jobs {"limit": 5}', error


async def test_yes_is_not_true_and_nothing_is_written(
    jobs: Jobs, backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    before = customers.snapshot()
    async with open_mcp() as mcp:
        error = await mcp.fails(
            "run_backfill", {"name": "normalize_emails", "write": "yes"}, "TOOL_ARGUMENTS_INVALID"
        )
        assert error["details"]["errors"][0]["loc"] == ["write"]
        assert "true or false" in error["cause"]
        # A JSON object or list sent as text is not parsed into one.
        await mcp.fails(
            "enqueue_job", {"name": "greet", "input": '{"user_id": 1}'}, "TOOL_ARGUMENTS_INVALID"
        )
        await mcp.fails("list_jobs", {"state": '["failed"]'}, "TOOL_ARGUMENTS_INVALID")
    assert customers.snapshot() == before
    assert (await jobs.list()).jobs == []


async def test_every_numeric_argument_publishes_and_enforces_its_range(
    open_mcp: OpenMcp, jobs: Jobs
) -> None:
    seen: set[tuple[str, str]] = set()
    async with open_mcp() as mcp:
        for tool, schema in (await _schemas(mcp)).items():
            for argument, prop in schema["properties"].items():
                kinds = _kinds(prop)
                if not kinds & {"integer", "number"}:
                    continue
                seen.add((tool, argument))
                bounds = next(s for s in prop.get("anyOf", [prop]) if s.get("type") != "null")
                low, high = bounds.get("minimum"), bounds.get("maximum")
                assert low is not None and high is not None, (tool, argument, prop)
                step = 1 if "integer" in kinds else 0.5
                under = await mcp.fails(
                    tool, _call(schema, argument, low - step), "INVALID_ARGUMENT"
                )
                assert under["details"]["argument"] == argument and under["retryable"] is False
                await _runs_at(mcp, under, tool, _call(schema, argument, low))
                over_code = (
                    "LIMIT_EXCEEDED" if (tool, argument) in SERVER_CAPS else ("INVALID_ARGUMENT")
                )
                over = await mcp.fails(tool, _call(schema, argument, high + step), over_code)
                assert over["details"]["argument"] == argument and over["retryable"] is False
                moving = MOVING_BOUNDS.get((tool, argument))
                end = high if moving is None else moving(jobs)
                await _runs_at(mcp, over, tool, _call(schema, argument, end))
        # Beside an argument too long to echo, the call mended is a fix with a slot (it was
        # prose): no next_call, since the slot does not run.
        given = {"name": "x" * 300, "wait_seconds": -5}
        error = await mcp.fails("run_backfill", given, "INVALID_ARGUMENT")
        assert error["fix"] == 'run_backfill {"name": "<name>", "wait_seconds": 0}', error
        assert "next_call" not in error
    assert seen >= {
        ("list_jobs", "limit"),
        ("inspect_job", "steps_limit"),
        ("inspect_job", "events_limit"),
        ("wait_for_job", "timeout_seconds"),
        ("list_backfills", "runs_limit"),
        ("enqueue_job", "delay_seconds"),
        ("enqueue_job", "run_at"),
        ("run_backfill", "wait_seconds"),
        ("prune_history", "older_than_seconds"),
    }


async def _runs_at(mcp: Caller, error: dict[str, Any], tool: str, call: dict[str, Any]) -> None:
    """The refusal's fix and next_call are the caller's call at the range's nearest end, and
    the arguments pass when it is issued as given (the fake ids may then be unknown)."""
    assert error["next_call"] == {"tool": tool, "arguments": call}, error  # 50 == 50.0
    assert error["fix"] == f"{tool} {example_call(error['next_call']['arguments'])}", error
    answer = await mcp.call(tool, call)
    code = answer.data.get("error", {}).get("code")
    assert code not in ARGUMENT_REFUSALS, (tool, call, answer.data)


async def test_a_refusal_mends_the_callers_call_where_the_mend_is_plain(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """TOOL_ARGUMENTS_INVALID's fix is the caller's own call: a value whose kind is plain ("5"
    for a whole number, "true", a list sent as JSON text, "7d" for seconds, "Dead" or
    "failed,dead" for named values) mended, and its next_call runs; anything else a "<name>"
    slot (so no next_call), an unknown argument dropped or moved to the argument it stands for
    (a guess, or a write: no next_call either)."""
    job = await jobs.enqueue("greet", {"user_id": 1})
    mended = [
        ("inspect_job", {"job_id": job.id, "steps_limit": "5"}, {"steps_limit": 5}),
        ("inspect_job", {"job_id": job.id, "steps_limit": "0"}, {"steps_limit": 1}),
        ("list_jobs", {"state": '["ready"]', "limit": "2"}, {"state": ["ready"], "limit": 2}),
        # A duration as the CLI and the settings write it, for an argument in seconds.
        ("prune_history", {"older_than_seconds": "7d"}, {"older_than_seconds": 604_800}),
        ("prune_history", {"older_than_seconds": "1.5h"}, {"older_than_seconds": 5_400}),
        ("prune_history", {"older_than_seconds": "9999w"}, {"older_than_seconds": 315_360_000}),
        # In words, as a person writes it (was a "<older_than_seconds>" slot).
        ("prune_history", {"older_than_seconds": "7 days"}, {"older_than_seconds": 604_800}),
        ("retry_jobs", {"since_seconds": "2 hours"}, {"since_seconds": 7_200}),
        # Named values in another case, one where a list is taken, a list written with commas.
        ("list_jobs", {"state": "Dead"}, {"state": "dead"}),
        ("list_jobs", {"state": "failed, DEAD"}, {"state": ["failed", "dead"]}),
        ("retry_jobs", {"states": "Failed"}, {"states": ["failed"]}),
        ("list_jobs", {"state": ["Ready"]}, {"state": ["ready"]}),
        # One value where a list of its kind is taken, a list of one where one value is.
        ("queue_stats", {"queues": "mail"}, {"queues": ["mail"]}),
        ("inspect_job", {"job_id": [job.id]}, {"job_id": job.id}),
    ]
    async with open_mcp() as mcp:
        for tool, given, mends in mended:
            error = await mcp.fails(tool, given, "TOOL_ARGUMENTS_INVALID")
            call = {**given, **mends}
            assert error["next_call"] == {"tool": tool, "arguments": call}, error
            assert error["fix"] == f"{tool} {example_call(call)}"
            await mcp.ok(tool, call)
        slots = [
            # A slip of the keys is a guess: in the fix, not run; written, as its dry run.
            ("list_jobs", {"state": "readdy", "limit": 2}, '{"state": "ready", "limit": 2}'),
            ("cancel_jobs", {"states": ["redy"], "write": True}, '{"states": ["ready"]}'),
            # A piece that stands for no state is dropped, the rest kept: a narrower filter,
            # and a guess (a "<state>" slot dropped what the caller got right).
            ("list_jobs", {"state": "failed,zzz"}, '{"state": "failed"}'),
            (
                "cancel_jobs",
                {"states": ["ready", "scheduled", "suspended"]},
                '{"states": ["ready", "suspended"]}',
            ),
            ("list_jobs", {"state": ["zzz", "qqq"]}, '{"state": "<state>"}'),
            ("run_backfill", {"name": "x", "write": "yes"}, '{"name": "x", "write": "<write>"}'),
            (
                "enqueue_job",
                {"input": {"user_id": 1}},
                '{"name": "<name>", "input": {"user_id": 1}}',
            ),
            (  # moved to `key`: the key greet computes, which "k" is not (test_moved_key)
                "enqueue_job",
                {"name": "greet", "input": {"user_id": 2}, "idempotency_key": "k"},
                '{"name": "greet", "input": {"user_id": 2}, "key": "greet:2"}',
            ),
            (  # a respelling, but on a tool that writes: not run for the agent either
                "enqueue_job",
                {"name": "greet", "input": {"user_id": 2}, "Key": "k"},
                '{"name": "greet", "input": {"user_id": 2}, "key": "greet:2"}',
            ),
            ("list_jobs", {"limit": 2, "zzz": 1}, '{"limit": 2}'),
            (  # words that are no number and unit ("7 days" is mended, above)
                "prune_history",
                {"older_than_seconds": "a week"},
                '{"older_than_seconds": "<older_than_seconds>"}',
            ),
            ("list_jobs", {"limit": "2d"}, '{"limit": "<limit>"}'),  # not in seconds
        ]
        for tool, given, fix in slots:
            error = await mcp.fails(tool, given, "TOOL_ARGUMENTS_INVALID")
            assert error["fix"] == f"{tool} {fix}" and "next_call" not in error, error
        # Respelt (`queues` for `queue`) and its list of one unwrapped: a read-only call, run.
        error = await mcp.fails("diagnose_queue", {"queues": ["mail"]}, "TOOL_ARGUMENTS_INVALID")
        assert error["next_call"] == {"tool": "diagnose_queue", "arguments": {"queue": "mail"}}
        await mcp.ok("diagnose_queue", {"queue": "mail"})
    assert [j.id for j in (await jobs.list()).jobs] == [job.id]  # nothing else was written


async def test_an_unknown_argument_that_plainly_stands_for_another_is_moved_there_in_the_fix(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """`states`, `tenant`, `tenantId`, `status`, a slip like `nmae`: each names the argument it
    stands for, and the fix is the call with the value there — not the call without it, which
    for a filter lists every tenant's or every state's jobs. An argument already given, two
    unknown ones meant as one, or a name two arguments share (`queue_name`) moves nothing."""
    job = await jobs.enqueue("greet", {"user_id": 1})
    await jobs.cancel(job.id)
    moved = [
        ("list_jobs", {"states": ["cancelled"]}, "state", {"state": ["cancelled"]}),
        ("list_jobs", {"status": "cancelled"}, "state", {"state": "cancelled"}),
        # The value moved is mended as it would be in its place ("Cancelled" as "cancelled").
        ("list_jobs", {"status": "Cancelled"}, "state", {"state": "cancelled"}),
        ("list_jobs", {"tenant": "t1"}, "tenant_id", {"tenant_id": "t1"}),
        ("list_jobs", {"tenantId": "t1", "limit": 2}, "tenant_id", {"tenant_id": "t1", "limit": 2}),
        ("list_jobs", {"nmae": "greet"}, "name", {"name": "greet"}),
        # Of job_id and run_id, the one the tool requires.
        ("inspect_job", {"id": job.id}, "job_id", {"job_id": job.id}),
    ]
    async with open_mcp() as mcp:
        for tool, given, meant, call in moved:
            error = await mcp.fails(tool, given, "TOOL_ARGUMENTS_INVALID")
            assert error["fix"] == f"{tool} {example_call(call)}", error
            # A respelling on a read-only tool is offered to run; anything else is a guess.
            if next(iter(given)) in ("states", "tenantId"):
                assert error["next_call"] == {"tool": tool, "arguments": call}, error
            else:
                assert "next_call" not in error, error
            unknown = [e for e in error["details"]["errors"] if e["type"] == "extra_forbidden"]
            assert [e["meant"] for e in unknown] == [meant], error
            assert f"(meant as {meant}?)" in unknown[0]["msg"], error
            await mcp.ok(tool, call)  # the fix runs as given
        listed = await mcp.ok("list_jobs", {"state": "cancelled"})
        assert [j["id"] for j in listed["jobs"]] == [job.id]
        kept = [
            ("list_jobs", {"tenant": "t1", "tenant_id": "t2"}, {"tenant_id": "t2"}),
            ("list_jobs", {"status": "dead", "states": ["done"]}, {}),
            ("list_jobs", {"queue_name": "q"}, {}),
            ("list_jobs", {"_": 1, "limit": 2}, {"limit": 2}),
        ]
        for tool, given, call in kept:
            error = await mcp.fails(tool, given, "TOOL_ARGUMENTS_INVALID")
            assert error["fix"] == f"{tool} {example_call(call)}", error
            assert all("meant" not in e for e in error["details"]["errors"]), error


async def test_a_call_wrapped_in_an_argument_of_its_own_is_unwrapped_in_the_fix(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """`list_jobs {"arguments": {"state": "dead"}}`: the call's arguments inside an unknown one.
    The fix is the call unwrapped (each value mended as it would be at the top level), offered
    to run on a read-only tool, shown only for a write; anything else inside leaves it dropped.
    A duration moved to the `*_seconds` argument it stands for is its seconds."""
    job = await jobs.enqueue("greet", {"user_id": 1})
    await jobs.cancel(job.id)
    async with open_mcp() as mcp:
        for wrapped, call in [
            ({"arguments": {"state": "cancelled"}}, {"state": "cancelled"}),
            ({"params": {"state": "Cancelled", "limit": "5"}}, {"state": "cancelled", "limit": 5}),
        ]:
            error = await mcp.fails("list_jobs", wrapped, "TOOL_ARGUMENTS_INVALID")
            assert error["fix"] == f"list_jobs {example_call(call)}", error
            assert error["next_call"] == {"tool": "list_jobs", "arguments": call}, error
            listed = await mcp.ok("list_jobs", call)  # the fix runs as given
            assert [j["id"] for j in listed["jobs"]] == [job.id]
        enqueue = {"name": "greet", "input": {"user_id": 2}}
        error = await mcp.fails("enqueue_job", {"args": enqueue}, "TOOL_ARGUMENTS_INVALID")
        assert error["fix"] == f"enqueue_job {example_call(enqueue)}", error
        assert "next_call" not in error, error
        error = await mcp.fails(
            "list_jobs", {"arguments": {"state": "dead", "x": 1}}, "TOOL_ARGUMENTS_INVALID"
        )
        assert error["fix"] == "list_jobs {}", error
        later = {**enqueue, "delay": "5m"}
        error = await mcp.fails("enqueue_job", later, "TOOL_ARGUMENTS_INVALID")
        assert error["fix"] == f"enqueue_job {example_call({**enqueue, 'delay_seconds': 300})}"
    assert [j.id for j in (await jobs.list()).jobs] == [job.id]  # nothing was enqueued


async def test_a_write_whose_unknown_argument_is_dropped_or_guessed_is_mended_as_a_dry_run(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    """`cancel_jobs {"job_ids": [...], "write": true}`: dropped, `job_ids` was the call's only
    narrowing, and its fix `cancel_jobs {"write": true}` led (through the confirm token it
    answers) to cancelling every live job; so did its dry run's token. Its fix is the one-job
    call (tests/mcp/test_bulk_tool_given_job_ids.py). A write so mended is its dry run; a
    respelling (`Queue`) is the argument itself and keeps the write."""
    job = await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        error = await mcp.fails(
            "cancel_jobs", {"job_ids": [job.id], "write": True}, "TOOL_ARGUMENTS_INVALID"
        )
        assert error["fix"] == f"cancel_job {example_call({'job_id': job.id})}", error
        for given, fix in (
            ({"tenant": "t1", "write": True}, {"tenant_id": "t1"}),
            ({"Queue": "mail", "write": True}, {"queue": "mail", "write": True}),
        ):
            error = await mcp.fails("cancel_jobs", given, "TOOL_ARGUMENTS_INVALID")
            assert error["fix"] == f"cancel_jobs {example_call(fix)}", error
            assert ("leaves out write" in error["cause"]) is ("write" not in fix), error
            if "write" not in fix:
                planned = await mcp.ok("cancel_jobs", fix)  # the fix runs: a dry run
                assert planned["mode"] == "plan", planned
    assert (await jobs.get(job.id)).state == "ready"  # nothing was cancelled


async def test_a_refusal_names_the_wrong_item_of_a_list_not_the_type_pydantic_tried(
    open_mcp: OpenMcp,
) -> None:
    """`state` takes a state or a list of states: a list with one wrong item is refused naming
    that item (`state.1`), a wrong single value naming `state`, and neither names the union
    member pydantic tried (`literal['ready', …]`), which is no place in the caller's call."""
    async with open_mcp() as mcp:
        given = {"state": ["ready", "readdy"]}
        error = await mcp.fails("list_jobs", given, "TOOL_ARGUMENTS_INVALID")
        assert [e["loc"] for e in error["details"]["errors"]] == [["state", 1]], error
        assert error["cause"].startswith("list_jobs: argument state.1: Input should be 'ready'")
        for value in ("readdy", 5, True):
            error = await mcp.fails("list_jobs", {"state": value}, "TOOL_ARGUMENTS_INVALID")
            assert [e["loc"] for e in error["details"]["errors"]] == [["state"]], error
            assert error["cause"].startswith("list_jobs: argument state: Input should be")


async def test_an_argument_the_engine_refuses_comes_back_as_the_callers_call_mended(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    """A bound only the engine can check (a run_at ten years from now, the key the job
    computes, a text's bytes or a NUL) is INVALID_ARGUMENT whose fix is the caller's call with
    the value the engine named, and next_call when that runs as given; else a "<name>" slot."""
    greet = {"name": "greet", "input": {"user_id": 1}}
    later = clock.now_ms() + MAX_DELAY_MS
    mends = [
        ({**greet, "run_at": later + 1}, {"run_at": later}),
        ({**greet, "run_at": 2**70}, {"run_at": later}),
        ({**greet, "key": "mine"}, {"key": "greet:1"}),
    ]
    async with open_mcp() as mcp:
        for given, mend in mends:
            error = await mcp.fails("enqueue_job", given, "INVALID_ARGUMENT")
            call = {**given, **mend}
            assert error["next_call"] == {"tool": "enqueue_job", "arguments": call}, error
            assert error["fix"] == f"enqueue_job {example_call(call)}"
            assert error["details"]["argument"] in mend and error["retryable"] is False
        # Each next_call, issued as given: the first enqueues, the others dedupe onto it.
        first = await mcp.ok("enqueue_job", {**greet, "run_at": later})
        assert (await jobs.get(first["job_id"])).run_at == later
        assert (await mcp.ok("enqueue_job", {**greet, "key": "greet:1"}))["deduped"] is True
        slots = [
            ("enqueue_job", {**greet, "tenant_id": "a\x00b"}, "tenant_id"),
            ("enqueue_job", {**greet, "tenant_id": "é" * 150}, "tenant_id"),
            ("list_jobs", {"queue": "q\x00", "limit": 2}, "queue"),
            ("inspect_job", {"job_id": "x\x00"}, "job_id"),
            # The tool's `name` (the engine checks it as the job's): a slot, not prose.
            ("enqueue_job", {"name": "a\x00", "input": {}}, "name"),
            # A value the engine names by what is wrong with it, not by the value itself.
            ("send_event", {"name": "e", "key": "k", "payload": _nested(70)}, "payload"),
        ]
        for tool, given, name in slots:
            error = await mcp.fails(tool, given, "INVALID_ARGUMENT")
            fix = example_call({**given, name: f"<{name}>"})
            assert error["fix"] == f"{tool} {fix}" and "next_call" not in error, error
            assert ".py" not in error["cause"], error  # says the rule, not where it is written
        # An item of a list that no queue can be named: the list without it asks the same.
        for queues, mended in ((["mail", "q\x00"], {"queues": ["mail"]}), ([""], {})):
            error = await mcp.fails("queue_stats", {"queues": queues}, "INVALID_ARGUMENT")
            assert error["next_call"] == {"tool": "queue_stats", "arguments": mended}, error
            await mcp.ok("queue_stats", mended)
    assert [j.id for j in (await jobs.list()).jobs] == [first["job_id"]]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_a_server_cap_is_published_and_its_fix_is_the_call_at_the_cap(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    job = await jobs.enqueue("greet", {"user_id": 1})
    limits = ServerLimits(max_page_size=3, max_wait_seconds=7)
    async with open_mcp(Settings(limits=limits)) as mcp:
        schemas = await _schemas(mcp)
        assert schemas["list_jobs"]["properties"]["limit"]["maximum"] == 3
        wait = schemas["run_backfill"]["properties"]["wait_seconds"]
        assert (wait["minimum"], wait["maximum"]) == (0, 7)
        error = await mcp.fails("list_jobs", {"state": "ready", "limit": 4}, "LIMIT_EXCEEDED")
        assert error["details"] == {"argument": "limit", "value": 4, "limit": 3, "unit": "rows"}
        assert error["fix"] == 'list_jobs {"state": "ready", "limit": 3}'
        error = await mcp.fails(
            "wait_for_job", {"job_id": job.id, "timeout_seconds": 7.5}, "LIMIT_EXCEEDED"
        )
        assert error["fix"] == f'wait_for_job {{"job_id": "{job.id}", "timeout_seconds": 7}}'
        # The fix runs as given.
        await mcp.ok("wait_for_job", {"job_id": job.id, "timeout_seconds": 0})
        await mcp.fails("run_backfill", {"name": "x", "wait_seconds": -1}, "INVALID_ARGUMENT")


async def test_unknown_input_fields_are_refused_and_the_schema_says_so(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    async with open_mcp() as mcp:
        error = await mcp.fails(
            "enqueue_job",
            {"name": "fulfil", "input": {"order_id": 1, "priority": 5}},
            "JOB_INPUT_INVALID",
        )
        (entry,) = error["details"]["errors"]
        assert entry["loc"] == ["priority"] and entry["type"] == "extra_forbidden"
        assert "priority" in error["cause"]
        (described,) = (await mcp.ok("describe_jobs", {"name": "fulfil"}))["jobs"]
        assert described["input_schema"]["additionalProperties"] is False
        # A field that plainly stands for a declared one is tied to it on both entries; the
        # first, which the cause quotes, says it.
        for given, meant in (("orderId", "order_id"), ("order", "order_id")):
            error = await mcp.fails(
                "enqueue_job", {"name": "fulfil", "input": {given: 1}}, "JOB_INPUT_INVALID"
            )
            missing, extra = error["details"]["errors"]
            assert missing["loc"] == [meant] and extra["meant"] == meant, error
            assert f"Field required (given as '{given}'?)" in error["cause"], error
        error = await mcp.fails(
            "enqueue_job", {"name": "fulfil", "input": {"zzz": 1}}, "JOB_INPUT_INVALID"
        )
        assert all("meant" not in e for e in error["details"]["errors"])
        assert "given as" not in error["cause"]
        await mcp.ok("enqueue_job", {"name": "fulfil", "input": {"order_id": 1}})
    assert [j.name for j in (await jobs.list()).jobs] == ["fulfil"]


async def test_a_second_cancel_is_ok_and_says_already_cancelled(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    live = await jobs.enqueue("greet", {"user_id": 1})
    done = await jobs.enqueue("greet", {"user_id": 2})
    await jobs.cancel(live.id)
    await Worker(jobs).run_until_idle()
    async with open_mcp() as mcp:
        again = await mcp.ok("cancel_job", {"job_id": live.id})
        assert again["already_cancelled"] is True and again["job"]["state"] == "cancelled"
        refused = await mcp.fails("cancel_job", {"job_id": done.id}, "JOB_NOT_CANCELLABLE")
        assert refused["details"]["state"] == "done"
    fresh = await jobs.enqueue("greet", {"user_id": 3})
    async with open_mcp() as mcp:
        first = await mcp.ok("cancel_job", {"job_id": fresh.id})
        assert first["already_cancelled"] is False


@pytest.mark.drivers("sqlite", reason="the CLI opens the database by URL")
async def test_the_cli_shows_a_repeat_cancel(
    jobs: Jobs, app: JobRegistry, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job = await jobs.enqueue("greet", {"user_id": 1})
    await jobs.cancel(job.id)
    # A thread of its own: the CLI runs its own event loop.
    code = await anyio.to_thread.run_sync(
        main, ["jobs", "cancel", job.id, "--database-url", database_url]
    )
    out = capsys.readouterr().out
    assert code == 0 and "was already cancelled" in out, out


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert "Traceback" not in record.getMessage()


async def test_unknown_tool_prompt_and_missing_argument_are_invalid_params(
    open_mcp: OpenMcp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with open_mcp() as mcp:
        with pytest.raises(MCPError) as raised:
            await mcp.client.call_tool("enqueue", {})
        assert raised.value.error.code == INVALID_PARAMS
        assert "unknown tool 'enqueue'" in raised.value.error.message
        assert "enqueue_job" in raised.value.error.message  # the known ones are named
        # The one it plainly stands for is named, as an unknown argument's is; a 100,000-letter
        # name was echoed whole in the error's data.
        for asked, meant in (("enqueue", "enqueue_job"), ("listJobs", "list_jobs")):
            with pytest.raises(MCPError) as raised:
                await mcp.client.call_tool(asked, {})
            assert f"no tool has that name (meant {meant}?)" in raised.value.error.message
            assert raised.value.error.data == {"tool": asked, "meant": meant}
        for asked in ("cancel", "x" * 100_000):  # cancel_job or cancel_jobs: not plain
            with pytest.raises(MCPError) as raised:
                await mcp.client.call_tool(asked, {})
            assert raised.value.error.data == {"tool": asked[:ECHO_LIMIT]}

        with pytest.raises(MCPError) as raised:
            await mcp.client.get_prompt("diagnose", {})
        assert raised.value.error.code == INVALID_PARAMS
        assert "diagnose_stalled_jobs, run_backfill_safely" in raised.value.error.message

        with pytest.raises(MCPError) as raised:
            await mcp.client.get_prompt("run_backfill_safely", {})
        assert raised.value.error.code == INVALID_PARAMS
        assert "missing required argument(s): name" in raised.value.error.message

        with pytest.raises(MCPError) as raised:
            await mcp.client.get_prompt("run_backfill_safely", {"name": "x", "nmae": "y"})
        assert raised.value.error.code == INVALID_PARAMS
        assert "unknown argument(s): 'nmae'" in raised.value.error.message
        # An unknown prompt or argument names the one it plainly stands for.
        with pytest.raises(MCPError) as raised:
            await mcp.client.get_prompt("run_backfill_safely", {"nmae": "y"})
        assert "unknown argument(s): 'nmae' (meant name for 'nmae'?)" in raised.value.error.message
        with pytest.raises(MCPError) as raised:
            await mcp.client.get_prompt("run_backfill", {"name": "x"})
        assert "unknown prompt 'run_backfill' (meant run_backfill_safely?)" in (
            raised.value.error.message
        )
        assert (raised.value.error.data or {}).get("meant") == "run_backfill_safely"

        with pytest.raises(MCPError) as raised:
            await mcp.client.read_resource("jobs://nope/1")
        assert raised.value.error.code == INVALID_PARAMS
        await mcp.ok("list_jobs")  # the session goes on
    _no_traceback(caplog)


async def test_a_read_only_server_says_why_a_mutating_tool_is_unknown(open_mcp: OpenMcp) -> None:
    async with open_mcp(Settings(read_only=True)) as mcp:
        with pytest.raises(MCPError) as raised:
            await mcp.client.call_tool("cancel_job", {"job_id": "x"})
    assert raised.value.error.code == INVALID_PARAMS
    assert "read-only" in raised.value.error.message
