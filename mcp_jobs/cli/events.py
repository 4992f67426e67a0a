"""`mcp-jobs events send NAME KEY [--payload JSON]`: wake the jobs waiting for an event.

The same operation as the `send_event` tool (mcp_jobs/operations/events.py), so `--json` prints
the tool's envelope. `--tenant` sends the event for that tenant: only its jobs' waits see it.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from engine.errors import NOTHING_NEAR, InvalidArgumentError
from mcp_jobs.cli.commands import guarded, open_jobs, scope_of
from mcp_jobs.cli.render import TEXT
from mcp_jobs.config import Settings
from mcp_jobs.operations.events import send_event
from mcp_jobs.operations.models import Envelope


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    events = commands.add_parser("events", help="send an event to the jobs waiting for it")
    actions = events.add_subparsers(dest="action", required=True, metavar="ACTION")
    send = actions.add_parser(
        "send",
        parents=[common],
        help="store event NAME with KEY and wake every job waiting for it (--tenant: its jobs)",
    )
    send.add_argument("name", metavar="NAME", help="the event name jobs wait for")
    send.add_argument("key", metavar="KEY", help="the key they match")
    send.add_argument("--payload", metavar="JSON", help="a JSON value the waiting jobs receive")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e309: JSON, but no number a payload can store
        raise ValueError(f"{text} is past a float's range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON value")  # NaN, Infinity: Python's, not JSON's


def _payload(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except ValueError as exc:
        # Text that is no JSON most plainly means that text, as a JSON string; unless it was
        # meant as JSON (an object, a list, a number, a quoted string) and went wrong.
        expected = f"a JSON value ({exc})"
        nearest = NOTHING_NEAR if _meant_as_json(text) else json.dumps(text)
        raise InvalidArgumentError("--payload", text, expected, nearest=nearest) from exc


def _meant_as_json(text: str) -> bool:
    start = text.lstrip()[:1]
    return start in ("{", "[", '"', "-") or start.isdigit() or text.strip() in ("NaN", "Infinity")


async def events_command(args: argparse.Namespace, settings: Settings) -> int:
    async def run() -> Envelope:
        payload = _payload(args.payload)
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, "events send")
            return await send_event(scope, args.name, args.key, payload)

    return await guarded("send_event", args.json, run, settings)


def _sent(env: dict[str, Any]) -> str:
    woke = env["woken"]
    return f"event {env['event_id']} sent; woke {woke} waiting job{'' if woke == 1 else 's'}"


# Text for this answer, beside the other commands' (render.TEXT, keyed by answer kind).
TEXT.update({"send_event": _sent})
