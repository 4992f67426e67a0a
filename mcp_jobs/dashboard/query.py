"""A page's query parameters read as the tools read their arguments: a name the page does not
take, or one given twice, is refused (INVALID_ARGUMENT) rather than dropped, since a dropped
filter shows a wider list than the one asked for (every tenant's, every state's)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request

from engine.errors import InvalidArgumentError
from engine.meant import meant_as
from mcp_jobs.dashboard.html import path


def read_query(request: Request, prefix: str, page: str, known: Sequence[str]) -> dict[str, str]:
    """Each of `known` the URL gives, once, by name ("" when not given). Refused with the
    page's URL as its fix: the one meant in place of an unknown name, or each name once.
    `page` is the path under the prefix (`jobs`, `queues/pause`)."""
    parts = page.split("/")
    given = request.query_params.multi_items()
    names = [name for name, _ in given]
    first: dict[str, str] = {}
    for name, value in given:
        first.setdefault(name, value)
    for name, value in given:
        if name not in known:
            meant = meant_as(name, known, given=names)
            mended = {k: v for k, v in first.items() if k in known}
            if meant is not None:
                mended[meant] = value
            hint = f" (meant {meant}?)" if meant is not None else ""
            raise InvalidArgumentError(
                name,
                value,
                f"left out: /{page} takes {', '.join(known) or 'no parameter'}{hint}",
                fix=path(prefix, *parts, query=mended),
            )
        if names.count(name) > 1:
            values = [v for n, v in given if n == name]
            raise InvalidArgumentError(
                name,
                values,
                f"given once (/{page} filters by one {name})",
                fix=path(prefix, *parts, query={k: v for k, v in first.items() if k in known}),
            )
    return {name: first.get(name, "") for name in known}
