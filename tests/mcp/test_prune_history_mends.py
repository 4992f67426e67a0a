"""`prune_history`'s refusals mend to a call that runs: a duration in years read by the one
rule for words (engine.durations), states as the settled ones plainly meant, a fraction of a
second as the nearest whole number."""

from __future__ import annotations

import pytest

from mcp_jobs.errors import example_call
from tests.mcp.conftest import OpenMcp

YEAR_S = 365 * 86_400


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ({"older_than_seconds": "1 year"}, {"older_than_seconds": YEAR_S}),
        ({"older_than_seconds": "1y"}, {"older_than_seconds": YEAR_S}),
        ({"older_than_seconds": "2 weeks"}, {"older_than_seconds": 14 * 86_400}),
        # Past ten years: the bound in one hop, as the CLI's --older-than and the variables.
        ({"older_than_seconds": "20 years"}, {"older_than_seconds": 10 * YEAR_S}),
        ({"older_than_seconds": "7300d"}, {"older_than_seconds": 10 * YEAR_S}),
    ],
)
async def test_a_duration_in_words_or_years_is_mended_to_seconds(
    open_mcp: OpenMcp, given: dict[str, object], meant: dict[str, object]
) -> None:
    async with open_mcp() as mcp:
        error = await mcp.fails("prune_history", given, "TOOL_ARGUMENTS_INVALID")
        assert error["fix"] == f"prune_history {example_call(meant)}", error
        await mcp.ok("prune_history", meant)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ({"states": ["done"] * 5}, {"states": ["done"]}),
        ({"states": ["ready", "dead"]}, {"states": ["dead"]}),
        ({"states": ["ready"]}, {"states": ["<state>"]}),
        ({"states": []}, {"states": ["<state>"]}),
        ({"older_than_seconds": 1.5}, {"older_than_seconds": 2}),
        ({"older_than_seconds": 1.4}, {"older_than_seconds": 1}),
    ],
)
async def test_a_refused_call_is_mended_to_one_that_runs(
    open_mcp: OpenMcp, given: dict[str, object], meant: dict[str, object]
) -> None:
    async with open_mcp() as mcp:
        answer = await mcp.call("prune_history", given)
        error = answer.data["error"]
        assert error["fix"] == f"prune_history {example_call(meant)}", error
        if "<state>" not in str(meant):
            await mcp.ok("prune_history", meant)
