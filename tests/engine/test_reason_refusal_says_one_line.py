"""A pause's reason is prose on one line, not a name: its refusal says so (the README's
"a pause's reason is one line of prose"), and its nearest value has a space for each break."""

from __future__ import annotations

import pytest

from engine import bounds
from engine.errors import InvalidArgumentError


def test_a_reason_with_a_line_break_is_refused_as_one_line_of_text() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        bounds.optional_line("reason", "smtp down\nsee INC-1", 1024)
    assert refused.value.expected.startswith("one line of text with no control character")
    assert "a name" not in refused.value.cause
    assert refused.value.nearest == "smtp down see INC-1"
