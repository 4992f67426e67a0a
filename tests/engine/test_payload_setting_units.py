"""MCP_JOBS_MAX_PAYLOAD_BYTES written with a unit (`2MiB`, `1GB`) is refused, as before, with
the bytes it says (within the bound) as the fix: it was mended to the default, 1 MiB, which
undid the raise the operator meant."""

from __future__ import annotations

import pytest

from engine import bounds
from engine.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("2MiB", 2 * 1024**2), ("512k", 512 * 1024), ("1.5MB", 1_572_864), ("1GB", 128 * 1024**2)],
)
def test_a_size_with_a_unit_is_mended_to_its_bytes(typed: str, meant: int) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        bounds.payload_limit(None, {bounds.PAYLOAD_ENV: typed})
    assert refused.value.fix == f"export {bounds.PAYLOAD_ENV}={meant}"
    assert bounds.payload_limit(None, {bounds.PAYLOAD_ENV: str(meant)}) == meant


def test_a_value_of_no_unit_is_mended_to_the_default() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        bounds.payload_limit(None, {bounds.PAYLOAD_ENV: "lots"})
    assert refused.value.fix == f"export {bounds.PAYLOAD_ENV}={bounds.DEFAULT_MAX_PAYLOAD_BYTES}"
