"""Which time zones a task may name: every zone of the tz database, by its exact name."""

from __future__ import annotations

import functools
from zoneinfo import available_timezones

EXAMPLE_ZONE = "America/New_York"
# What zoneinfo lists but is no zone a task can mean: the host's own link (another zone on each
# machine) and the tz database's placeholder for a zone not set.
NOT_ZONES = frozenset({"localtime", "Factory"})
# The fix line of TASK_TIMEZONE_INVALID: it prints exactly the names `zone_ids` holds.
LIST_ZONES = (
    'python3 -c "import zoneinfo; print(*sorted(zoneinfo.available_timezones() - {'
    + ", ".join(repr(z) for z in sorted(NOT_ZONES))
    + "}), sep='\\n')\""
)


@functools.cache
def zone_ids() -> frozenset[str]:
    """Region/City ids, UTC, and the legacy names alike (US/Eastern, EST5EDT; EST is UTC-5 all
    year): what the tz database names, a zone. Case counts: a case-blind disk (macOS) loads "utc"
    too, and a declaration must be taken or refused alike on every machine."""
    return frozenset(available_timezones()) - NOT_ZONES
