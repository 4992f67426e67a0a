"""The exit statuses of `mcp-jobs`: what a shell script or cron wrapper reads, with no `--json` to
parse, to tell a failure worth running again as is from one that will fail again as given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# mcp_jobs.errors.InternalError.code, written out: this module is imported before a Ctrl-C is
# handled (mcp_jobs.cli), so it imports nothing heavy (a test pins the two together).
INTERNAL = "INTERNAL"

# A failure that will fail again as given (bad input, not found, a conflict): fix it first.
FAILED_EXIT = 1
# A command line the parser refused, as argparse's, kept for scripts that test it.
USAGE_EXIT = 2
# A failure whose error is retryable (DRIVER_UNAVAILABLE, STORAGE_FULL, a pass still live): the
# same command may succeed later. EX_TEMPFAIL of sysexits.h, which mail tools and queue runners
# read as "try again later".
TRY_AGAIN_EXIT = 75
# An unexpected failure (INTERNAL: a defect, its traceback kept where the error says): retryable
# for an agent, which may meet a passing race, but a retry loop would run a bug again and again.
# EX_SOFTWARE of sysexits.h.
SOFTWARE_EXIT = 70
# `backfill NAME --write --wait` whose wait ended before the pass settled, as timeout(1)'s: the
# pass may still complete, and a deploy script must not go on as if it had.
WAIT_ENDED_EXIT = 124
# `jobs drain` that ran every due job, one or more of them to a dead or failed end (its notices
# name them): a test or deploy script must not go on as if the work had succeeded.
JOBS_FAILED_EXIT = 3
# A command stopped by Ctrl-C or SIGTERM, as the shell's own (128 + SIGINT).
INTERRUPTED_EXIT = 130
# A reader that closed the pipe early (`mcp-jobs jobs ls --json | head`): what it read is what it
# wanted, and the status says the pipe closed, as a shell's own tools do (128 + SIGPIPE, 13).
BROKEN_PIPE_EXIT = 141


def exit_status(envelope: Mapping[str, Any]) -> int:
    """The exit status of a command that answered `envelope`: 0 for a success, else by the
    `retryable` its error prints, so the status never disagrees with what `--json` says; an
    unexpected failure is SOFTWARE_EXIT whatever it prints."""
    if envelope["ok"]:
        return 0
    if envelope["error"]["code"] == INTERNAL:
        return SOFTWARE_EXIT
    return TRY_AGAIN_EXIT if envelope["error"]["retryable"] is True else FAILED_EXIT


__all__ = [
    "BROKEN_PIPE_EXIT",
    "FAILED_EXIT",
    "INTERRUPTED_EXIT",
    "JOBS_FAILED_EXIT",
    "SOFTWARE_EXIT",
    "TRY_AGAIN_EXIT",
    "USAGE_EXIT",
    "WAIT_ENDED_EXIT",
    "exit_status",
]
