"""`mcp-jobs events send NAME KEY [--payload JSON]`: wake the jobs waiting for an event.

The same operation as the `send_event` tool (mcp_jobs/operations/events.py), so `--json` prints
the tool's envelope. `--tenant` sends the event for that tenant: only its jobs' waits see it.
"""

from __future__ import annotations

import argparse
from typing import Any

from engine import bounds
from engine.errors import NOTHING_NEAR, InvalidArgumentError
from engine.fix_lines import END_OF_OPTIONS
from mcp_jobs.cli.commands import guarded, open_jobs, scope_of
from mcp_jobs.cli.json_flag import json_value
from mcp_jobs.cli.mend import refusal_context
from mcp_jobs.cli.render import TEXT, notice_lines
from mcp_jobs.config import Settings
from mcp_jobs.operations.events import (
    PAYLOAD_EXPECTED,
    EventPayload,
    checked_payload,
    send_event,
)
from mcp_jobs.operations.models import Envelope


def _payload(text: str | None) -> EventPayload | None:
    """The `--payload` typed, parsed and checked as the tool's payload is (`checked_payload`).
    No JSON object is plainly meant by text that is not one, so the fix is the help: text that
    is no JSON (an empty `--payload "$P"`, P unset, too) is not sent as a string, `null` not as
    no payload, and an object naming a key twice not as its last value."""
    if text is None:
        return None
    value = json_value("--payload", text, PAYLOAD_EXPECTED)
    if value is None:  # `null` typed: no object (leaving --payload out sends none)
        raise InvalidArgumentError("--payload", text, f"{PAYLOAD_EXPECTED}, or left out")
    return checked_payload(value, "--payload")


def _positionals(args: argparse.Namespace, settings: Settings) -> None:
    """NAME and KEY checked as the engine checks them, refused with the command mended (the
    characters the rule refuses dropped): no flag carries them for the usual mend to find."""
    for argument, check in (("name", bounds.event_name), ("key", bounds.key)):
        given = getattr(args, argument)
        try:
            check(argument, given)
        except InvalidArgumentError as exc:
            if exc.nearest is NOTHING_NEAR:
                raise
            mended = {"name": args.name, "key": args.key, argument: str(exc.nearest)}
            flags = [("--payload", args.payload), ("--tenant", args.tenant)]
            words = [w for flag, value in flags if value is not None for w in (flag, value)]
            # A KEY starting with '-' is a positional only after `--` (a flag before it).
            positionals = [mended["name"], mended["key"]]
            if any(p.startswith("-") for p in positionals):
                positionals.insert(0, END_OF_OPTIONS)
            fix = refusal_context(settings).command("events", "send", *words, *positionals)
            raise InvalidArgumentError(
                argument, given, exc.expected, fix=fix, nearest=exc.nearest
            ) from None


async def events_command(args: argparse.Namespace, settings: Settings) -> int:
    async def run() -> Envelope:
        _positionals(args, settings)
        if args.tenant is not None:  # a flag: the usual mend writes the command with it mended
            bounds.tenant("--tenant", args.tenant)
        payload = _payload(args.payload)
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, "events send")
            return await send_event(scope, args.name, args.key, payload)

    return await guarded("send_event", args.json, run, settings)


def _sent(env: dict[str, Any]) -> str:
    woke = env["woken"]
    sent = f"event {env['event_id']} sent; woke {woke} waiting job{'' if woke == 1 else 's'}"
    return "\n".join([sent, *notice_lines(env)])


# Text for this answer, beside the other commands' (render.TEXT, keyed by answer kind).
TEXT.update({"send_event": _sent})
