"""The caller's call, mended one argument at a time, for a refusal's fix and next_call: what
it shows (an argument too long to echo left out, a placeholder where one is required) and when
it is offered to run as given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.tools.base import Tool
from pydantic import ValidationError

from engine.bounds import refused_text
from engine.errors import short_repr
from mcp_jobs.errors import example_call
from mcp_jobs.server.argument_values import (
    LOWER,
    MISSING,
    UPPER,
    json_kinds,
    member_kinds,
    nearest_in_range,
    placeholder,
    slot,
)
from schemas.errors import NextCall

# The argument of a tool that writes only when it is true (the bulk tools, run_backfill,
# prune_history); left out, the call is a dry run.
WRITE = "write"
# An argument value longer than this (as JSON) is left out of a fix line, not echoed back.
_ECHO_CHARS = 200
# The write's token: "" is taken as none (the dry run answers one), so it is left as given.
_CONFIRM = "confirm"


class MendedCall:
    """The caller's call, mended one argument at a time, for a refusal's fix and next_call."""

    def __init__(self, tool: Tool, arguments: Mapping[str, Any]) -> None:
        self.tool = tool
        self.props: Mapping[str, Any] = tool.parameters.get("properties", {})
        self.arguments = dict(arguments)
        self.mended: set[str] = set()
        self.placeholders = False
        self.guessed = False
        self.valid = False

    def set(self, name: str, value: Any) -> None:
        """`value` for `name`; MISSING puts a slot there, "<name>", that no tool takes as
        given (a value of the argument's kind, such as `true` for `write`, would run)."""
        if value is MISSING:
            value = slot(self.props.get(name, {}), name)
            self.placeholders = True
        self.arguments[name] = value
        self.mended.add(name)

    def fill(self, name: str, value: Any) -> None:
        """`value` for `name`, holding "<…>" slots the caller fills in: shown in the fix,
        never offered to run."""
        self.set(name, value)
        self.placeholders = True

    def drop(self, name: str, guessed: bool = True) -> None:
        """`name` taken out (an unknown argument); `guessed`: what it meant is not plain, so
        the mended call is not offered to run."""
        self.arguments.pop(name, None)
        self.guessed = self.guessed or guessed

    def guess(self, name: str, value: Any) -> None:
        """`value` for `name`, what the caller's plainly stood for only by a guess: shown in
        the fix, never offered to run."""
        self.set(name, value)
        self.guessed = True

    def leave_out(self, name: str) -> None:
        """`name` taken out of a call that asks the same without it (`LEFT_OUT`)."""
        self.arguments.pop(name, None)

    def settle(self) -> None:
        """Check the mended call: a mended number still out of range goes to its range's
        nearest end, a mended cursor still refused is left out, and any other mended value
        still refused becomes a placeholder."""
        for _ in range(2):
            try:
                meta = self.tool.fn_metadata
                meta.arg_model.model_validate(meta.pre_parse_json(self.arguments))
            except ValidationError as exc:
                errors = exc.errors(include_url=False)
                for e in fitting_members(errors, self.props, self.arguments):
                    name = str(e["loc"][0]) if e["loc"] else ""
                    if name not in self.mended:
                        continue
                    ranged = e["type"] in LOWER | UPPER and len(e["loc"]) == 1
                    if not ranged and is_cursor(name):
                        self.leave_out(name)  # still no cursor: the first page
                    else:
                        self.set(name, nearest_in_range(e) if ranged else MISSING)
            else:
                self.valid = True
                self._refused_texts()
                return

    def _refused_texts(self) -> None:
        """A text the engine refuses in any argument ("", or holding a NUL or a lone
        surrogate), kept beside the one mended, would refuse the mended call in turn: a slot,
        a cursor left out (the first page), a list's such item left out of the list."""
        for name, value in list(self.arguments.items()):
            if name in self.mended or name == _CONFIRM:
                continue
            if isinstance(value, str) and _refused(value):
                if is_cursor(name):
                    self.leave_out(name)
                else:
                    self.set(name, MISSING)
            elif isinstance(value, list) and any(_refused(item) for item in value):
                kept = [item for item in value if not _refused(item)]
                self.set(name, kept or MISSING)

    def _shown(self) -> dict[str, Any]:
        # An argument too long to echo is left out, or a placeholder when the tool requires it.
        required = self.tool.parameters.get("required", [])
        shown: dict[str, Any] = {}
        for name, given in self.arguments.items():
            if len(short_repr(given, _ECHO_CHARS + 1)) <= _ECHO_CHARS:
                shown[name] = given
            elif name in required:
                shown[name] = placeholder(self.props.get(name, {}), name)
        for name in required:
            if name not in shown:
                shown[name] = placeholder(self.props.get(name, {}), name)
        order = {name: i for i, name in enumerate(self.props)}
        return dict(sorted(shown.items(), key=lambda item: order.get(item[0], len(order))))

    def text(self) -> str:
        return example_call(self._shown())

    def call(self) -> NextCall | None:
        """The mended call, when it runs as given and means what the caller asked: the strict
        model takes it, and nothing in it is a placeholder, a guess, left out or dropped (an unknown
        argument may have been meant as another)."""
        shown = self._shown()
        if not self.valid or self.placeholders or self.guessed or shown != self.arguments:
            return None
        return NextCall(tool=self.tool.name, arguments=shown)


def _refused(value: Any) -> bool:
    return isinstance(value, str) and refused_text(value)


def is_cursor(name: str) -> bool:
    """Whether `name` is a paged tool's cursor (`cursor`, `steps_cursor`, …): one the strict
    model refuses is no page of any list, so a fix starts again without it, at the first."""
    return name == "cursor" or name.endswith("_cursor")


def reads_only(tool: Tool) -> bool:
    """Whether `tool` only reads: a call of it mended by a plain respelling is run as given."""
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def fitting_members(
    errors: list[Any], props: Mapping[str, Any], arguments: Mapping[str, Any]
) -> list[Any]:
    """The errors with each union argument's (`"a" | list["a"]`, `int | str`) narrowed to the
    members the value's JSON kind fits (a list's: which item is wrong; -5's: the integer's
    range), and the member's name (pydantic's `constrained-int`) left out of the place it names,
    so a number out of its range reads as one. A value no member's kind fits keeps every error.
    """
    members: dict[str, list[Any]] = {}
    for e in errors:
        loc = e["loc"]
        name = str(loc[0]) if loc else ""
        choices = [m for m in props.get(name, {}).get("anyOf", ()) if m.get("type") != "null"]
        if len(choices) > 1 and len(loc) > 1 and isinstance(loc[1], str):
            members.setdefault(name, []).append(e)
    out: list[Any] = []
    shown: set[str] = set()
    for e in errors:
        name = str(e["loc"][0]) if e["loc"] else ""
        tried = members.get(name)
        if tried is None:
            out.append(e)
        elif name not in shown:
            shown.add(name)
            fits = _of_kind(tried, props[name]["anyOf"], arguments.get(name, MISSING)) or tried
            out.extend({**t, "loc": (t["loc"][0], *t["loc"][2:])} for t in fits)
    return out


def _of_kind(tried: list[Any], choices: list[Any], value: Any) -> list[Any]:
    """The errors of the union members whose JSON kind `value` has. pydantic reports its
    members in the order the schema lists them (`anyOf`, null apart), so the n-th member
    named among the errors is the n-th choice."""
    schemas = [c for c in choices if c.get("type") != "null"]
    order = list(dict.fromkeys(str(t["loc"][1]) for t in tried))
    if len(order) != len(schemas):
        return []
    kinds = json_kinds(value)
    kind_of = {member: member_kinds(schemas[i]) for i, member in enumerate(order)}
    return [t for t in tried if kind_of[str(t["loc"][1])] & kinds]
