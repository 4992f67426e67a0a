"""`mcp-jobs queues pause|resume|ls`: pause a queue or a job name, lift it, list what is paused.

The same operations as the `pause_queue` / `resume_queue` tools (mcp_jobs/operations/pauses.py),
so `--json` prints the tool's envelope. A pause spans every tenant, so `--tenant` is refused with
TENANT_SCOPE_EXCEEDED (listing is allowed: it shows why work waits).
"""

from __future__ import annotations

import argparse
from typing import Any

from engine.errors import InvalidArgumentError, JobsError
from mcp_jobs.cli.commands import guarded, open_jobs, scope_of
from mcp_jobs.cli.exit_status import FAILED_EXIT, USAGE_EXIT
from mcp_jobs.cli.mend import refusal_context
from mcp_jobs.cli.render import TEXT, notice_lines, one_line, table, when
from mcp_jobs.config import Settings
from mcp_jobs.errors import CommandLineInvalidError
from mcp_jobs.operations.known import known_queues
from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.pauses import list_pauses, pause_queue, pauses_in_force, resume_queue

# The names a refusal of `queues pause|resume` naming nothing lists at most.
SHOWN_NAMES = 10


async def queues_command(args: argparse.Namespace, settings: Settings) -> int:
    action: str = args.action
    kind = {"pause": "pause_queue", "resume": "resume_queue", "ls": "list_pauses"}[action]

    async def run() -> Envelope:
        if action != "ls" and args.queue is None and args.job is None:
            raise await _nothing_named(settings, args.prog, action, args.json)
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, f"queues {action}")
            if action == "pause":
                try:
                    return await pause_queue(scope, args.queue, args.job, args.reason)
                except InvalidArgumentError as exc:
                    raise _queue_mended(exc, args, settings) from None
            if action == "resume":
                return await resume_queue(scope, args.queue, args.job)
            return await list_pauses(scope)

    code = await guarded(kind, args.json, run, settings)
    # Naming nothing is a line the parser refuses (its wording says so): its status, as for
    # `jobs show` with no id.
    if code == FAILED_EXIT and action != "ls" and args.queue is None and args.job is None:
        return USAGE_EXIT
    return code


def _queue_mended(
    exc: InvalidArgumentError, args: argparse.Namespace, settings: Settings
) -> InvalidArgumentError:
    """`exc`, or where it refuses the QUEUE typed for a name near it, the same refusal whose
    fix is the command with that name: no flag carries QUEUE for the usual mend to find."""
    if exc.argument != "queue" or exc.value != args.queue or not isinstance(exc.nearest, str):
        return exc
    reason = [] if args.reason is None else ["--reason", args.reason]
    fix = refusal_context(settings).command("queues", "pause", *reason, exc.nearest)
    return exc.mended(fix)


async def _nothing_named(
    settings: Settings, command: str, action: str, json: bool
) -> CommandLineInvalidError:
    """`queues pause|resume` with neither QUEUE nor --job: refused as the parser refuses a
    missing argument, in the command line's words (the operation's refusal spells the tool's
    arguments, `queue=None`), with the names it could take: the known queues to pause, the
    pauses in force to resume. Its fix lists them (`jobs stats`, `queues ls`; `--json` where it
    was typed). A usage mistake
    whatever the database's state: when the names cannot be read, it says so and stays one."""
    what = "known queues" if action == "pause" else "paused now"
    try:
        async with open_jobs(settings) as jobs:
            scope = scope_of(jobs, settings, f"queues {action}")
            if action == "pause":
                names = await known_queues(scope)
            else:
                names = [f"{p.kind} {p.name}" for p in await pauses_in_force(scope)]
    except JobsError as exc:
        if not exc.retryable:
            raise
        shown = f"not read: {exc.title}"
    else:
        shown = ", ".join(one_line(name) for name in names[:SHOWN_NAMES]) or "none"
        if len(names) > SHOWN_NAMES:
            shown += f" and {len(names) - SHOWN_NAMES} more"
    message = f"the following arguments are required: QUEUE, or --job NAME ({what}: {shown})"
    listing = ("jobs", "stats") if action == "pause" else ("queues", "ls")
    fix = refusal_context(settings).command(*listing, *(["--json"] if json else []))
    return CommandLineInvalidError(command, message, fix=fix)


def _what(pause: dict[str, Any]) -> str:
    return f"{pause['kind']} {one_line(pause['name'])}"


def _paused(env: dict[str, Any]) -> str:
    pause = env["pause"]
    if env["already_paused"]:
        since = when(pause.get("paused_at"))
        return (
            f"{_what(pause)} was already paused (since {since}); resume: {one_line(env['resume'])}"
        )
    return "\n".join(
        [f"{_what(pause)} paused; resume: {one_line(env['resume'])}", *notice_lines(env)]
    )


def _resumed(env: dict[str, Any]) -> str:
    if not env["was_paused"]:
        return "\n".join(["nothing to resume: it was not paused", *notice_lines(env)])
    return f"{_what(env['pause'])} resumed"


def _listed(env: dict[str, Any]) -> str:
    rows = [
        [
            p["kind"],
            p["name"],
            p.get("paused_by") or "-",
            when(p.get("paused_at")),
            p.get("reason") or "",
        ]
        for p in env["pauses"]
    ]
    if not rows:
        return "nothing is paused"
    return table(rows, ["kind", "name", "paused by", "since", "reason"])


# Text for these answers, beside the other commands' (render.TEXT, keyed by answer kind).
TEXT.update({"pause_queue": _paused, "resume_queue": _resumed, "list_pauses": _listed})
