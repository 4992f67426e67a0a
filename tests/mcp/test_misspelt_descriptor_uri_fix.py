"""`resources/read jobs://descriptors/gret` is JOB_UNKNOWN "meant greet?", and its fix was the CLI
line that describes every job; a run's URI holding an id in another shape is fixed by the read
of that run. A descriptor's misspelt name is fixed the same way: the read of the name meant."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from tests.mcp.conftest import OpenMcp


@pytest.mark.parametrize("name", ["gret", "Greet"])
async def test_a_misspelt_descriptor_name_is_fixed_by_the_read_of_the_name_meant(
    open_mcp: OpenMcp, name: str
) -> None:
    async with open_mcp() as mcp:
        with pytest.raises(MCPError) as caught:
            await mcp.client.read_resource(f"jobs://descriptors/{name}")
        error = caught.value.error
        assert error.code == INVALID_PARAMS
        assert isinstance(error.data, dict) and error.data["code"] == "JOB_UNKNOWN"
        fix = error.data["fix"]
        assert fix == 'resources/read {"uri": "jobs://descriptors/greet"}', fix
        read = await mcp.client.read_resource(json.loads(fix.split(" ", 1)[1])["uri"])
        assert json.loads(read.contents[0].text)["name"] == "greet"  # type: ignore[union-attr]


async def test_a_name_standing_for_none_keeps_the_listing_fix(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        with pytest.raises(MCPError) as caught:
            await mcp.client.read_resource("jobs://descriptors/zzzzzz")
        assert isinstance(caught.value.error.data, dict)
        assert "jobs describe --json" in caught.value.error.data["fix"]
