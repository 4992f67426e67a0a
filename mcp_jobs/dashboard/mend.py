"""A refusal of what the page's own URL holds, mended into the page as meant: an id written with
a space, a word or capitals around it, a state in another spelling (`Dead`), a queue or job name
one key off. The fix is then that URL, one click away, as the CLI's is the command as meant
(`cli/mend.py`); a value that stands for nothing keeps the fix it came with."""

from __future__ import annotations

from starlette.requests import Request

from engine.errors import (
    NAMED,
    CursorInvalidError,
    InvalidArgumentError,
    JobNotFoundError,
    JobsError,
)
from engine.meant import meant_choices
from mcp_jobs.dashboard.html import path
from schemas.states import JOB_STATES

# The query parameters a page reads whose value is one of a fixed list (a page's `state`).
_CHOICES = {"state": JOB_STATES}


def mended(exc: Exception, request: Request, prefix: str) -> Exception:
    """`exc` with the page as meant for its fix when the request's URL holds the slip, else
    `exc` unchanged."""
    parts = request.url.path.removeprefix(prefix).strip("/").split("/")
    query = dict(request.query_params)
    if isinstance(exc, JobNotFoundError):
        inner = exc.meant_id
        if inner is None or parts.count(exc.job_id) != 1:
            return exc
        exc.fix = path(prefix, *[inner if p == exc.job_id else p for p in parts], query=query)
        exc.next_call = None  # the listing's call is no longer the way on: the page is
        return exc
    if isinstance(exc, CursorInvalidError) and "cursor" in query:
        # A cursor that goes with other filters (an edited URL) or none: the cause says to
        # start again from the first page, which is this page without it.
        del query["cursor"]
        exc.fix, exc.next_call = path(prefix, *parts, query=query), None
        return exc
    if type(exc) is InvalidArgumentError and exc.argument in _CHOICES:
        value = query.get(exc.argument)
        found = meant_choices([value], _CHOICES[exc.argument]) if value else None
        if value != exc.value or found is None or len(found[0]) != 1:
            return exc  # a state repeated or near nothing: the listing or help stands
        query[exc.argument] = found[0][0]
        return exc.mended(path(prefix, *parts, query=query))
    if isinstance(exc, JobsError) and exc.code in NAMED:
        details = exc.details or {}
        given, meant = details.get(NAMED[exc.code]), details.get("meant")
        named = [k for k, v in query.items() if v == given]
        if not isinstance(meant, str) or len(named) != 1:
            return exc
        query[named[0]] = meant
        exc.fix, exc.next_call = path(prefix, *parts, query=query), None
    return exc
