"""`Jobs.select`'s rule: the jobs matching filters the drivers do not apply (the stored
`last_error.code`, a window on `updated_at`), found over pages of `Jobs.list` within a bounded
read that says when it stopped short."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from engine.bounds import MAX_PAGE
from engine.errors import REGISTRY, InvalidArgumentError
from engine.meant import same_words
from schemas.jobs import JobPage, JobRecord

# `Jobs.select` reads at most this many rows by default: a bulk action's plan costs a bounded
# read even when the database's filters (name, queue, tenant, state) leave a long history.
SELECT_SCAN_LIMIT = 20_000


class JobSelection(NamedTuple):
    """What `Jobs.select` found: the matching jobs, newest first, and whether it stopped short."""

    jobs: list[JobRecord]
    # A job past `limit` matched too: the selection is not every match.
    more: bool
    # Rows read to find them.
    scanned: int
    # The read stopped at `scan_limit` rows before the end: matches may lie beyond.
    scan_capped: bool
    # Matches seen, `jobs` and past them (all of them with `count`): at least this many when
    # `scan_capped`.
    matching: int = 0


def stored_error_code(code: str | None) -> str | None:
    """`code`, refused where it is a known code in another spelling (`job_failed`): stored
    codes are matched exactly, so it matched no job and a bulk plan of it planned nothing. An
    app's own codes are not all known here: any other text is taken as it is."""
    if code is None or code in REGISTRY:
        return code
    meant = [known for known in REGISTRY if same_words(code, known)]
    if len(meant) != 1:
        return code
    raise InvalidArgumentError(
        "error_code", code, f"an error code as stored ({meant[0]})", nearest=meant[0]
    )


def _matches(job: JobRecord, error_code: str | None, after: int | None, before: int | None) -> bool:
    if error_code is not None and (job.last_error is None or job.last_error.code != error_code):
        return False
    if after is not None and job.updated_at < after:
        return False
    return before is None or job.updated_at < before


async def select_pages(
    page_of: Callable[[int, str | None], Awaitable[JobPage]],
    error_code: str | None,
    after: int | None,
    before: int | None,
    limit: int,
    scan_limit: int,
    count: bool,
) -> JobSelection:
    """Up to `limit` matches over the pages `page_of(size, cursor)` answers, newest first,
    reading at most `scan_limit` rows (on past `limit` with `count`, to count the matches)."""
    found: list[JobRecord] = []
    scanned = matching = 0
    cursor: str | None = None
    while True:
        page = await page_of(min(MAX_PAGE, scan_limit - scanned), cursor)
        for job in page.jobs:
            scanned += 1
            if not _matches(job, error_code, after, before):
                continue
            matching += 1
            if len(found) < limit:
                found.append(job)
            elif not count:
                return JobSelection(found, True, scanned, False, matching)
        more = matching > len(found)
        if page.next_cursor is None:
            return JobSelection(found, more, scanned, False, matching)
        if scanned >= scan_limit:
            return JobSelection(found, more, scanned, True, matching)
        cursor = page.next_cursor
