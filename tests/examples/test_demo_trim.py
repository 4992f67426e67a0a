"""The demo prints answers legibly without changing their shape: a long list is cut, never
given a string item (#22: `sample_keys` read `[1, 2, 3, 5, "… 6 more"]`)."""

from __future__ import annotations

from examples.demo import _trim


def test_a_long_list_is_cut_with_a_note_beside_it_not_inside_it() -> None:
    plan = {"sample_keys": list(range(1, 11)), "rows_remaining": 90, "blocked_by": None}
    shown = _trim({"ok": True, "plan": plan})
    assert shown["plan"]["sample_keys"] == [1, 2, 3, 4]
    assert shown["plan"]["(sample_keys)"] == "4 of 10 shown"
    assert "blocked_by" not in shown["plan"]


def test_a_short_list_is_shown_whole() -> None:
    assert _trim({"keys": [1, 2]}) == {"keys": [1, 2]}
