"""The grammar of the commands whose handlers have modules of their own (`queues`, `dashboard`,
`limits`, `events`). Apart from the handlers, so the grammar (mcp_jobs/cli/parser.py) is read
without them: fix_context reads every option from it, and the handlers import fix_context."""

from __future__ import annotations

import argparse

from mcp_jobs.config import DEFAULT_HOST, add_allowed_host

DEFAULT_DASHBOARD_PORT = 8766


def add_queues(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    queues = commands.add_parser("queues", help="pause and resume a queue or a job name")
    actions = queues.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in (
        ("pause", "stop workers claiming QUEUE's jobs (or --job NAME's), every tenant's"),
        ("resume", "let workers claim them again"),
    ):
        each = actions.add_parser(action, parents=[common], help=what)
        each.add_argument("queue", nargs="?", metavar="QUEUE", help="or --job NAME")
        each.add_argument("--job", metavar="NAME", help="a job name, in every queue")
        if action == "pause":
            each.add_argument("--reason", help="why, shown to whoever finds the pause")
    actions.add_parser("ls", parents=[common], help="the queues and job names paused now")


def add_dashboard(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    dashboard = commands.add_parser(
        "dashboard", parents=[common], help="serve the web dashboard (queues, jobs, dead letters)"
    )
    dashboard.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"bind address ({DEFAULT_HOST}: no token asked); beyond loopback a token of at "
        "least 32 characters, $MCP_JOBS_TOKEN or --token-file",
    )
    dashboard.add_argument(
        "--port",
        type=int,
        default=DEFAULT_DASHBOARD_PORT,
        help=f"port ({DEFAULT_DASHBOARD_PORT}; 0: any free one, printed at start)",
    )
    dashboard.add_argument(
        "--token-file", metavar="PATH", help="read the token from this file (beyond loopback)"
    )
    add_allowed_host(dashboard)
    dashboard.add_argument(
        "--read-only", action="store_true", help="no retry, cancel, pause or resume actions"
    )
    dashboard.add_argument("--log-format", choices=("text", "json"), default="text")
    dashboard.add_argument("--log-level", default="INFO")


def add_limits(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    commands.add_parser(
        "limits",
        parents=[common],
        help="rate limits: each key's rate and, while it holds work back, its next start",
    )


def add_events(
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
    send.add_argument(
        "--payload", metavar="JSON", help="a JSON object the waiting jobs receive ('{\"a\": 1}')"
    )
