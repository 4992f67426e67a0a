"""An error leaving `Backfills` carries its client's database in its `mcp-jobs …` fix, as the
client's own errors do: it named none, so run in a shell it acted on ./.mcp-jobs/jobs.db."""

from __future__ import annotations

import pytest

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry, Backfills
from engine.errors import JobsError
from engine.fix_lines import command_words
from tests.backfill.support import Customers

pytestmark = pytest.mark.drivers("sqlite", reason="a file a shell elsewhere can open")


async def test_backfill_applied_names_the_clients_database_file(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    with pytest.raises(JobsError) as caught:
        await backfills.write("normalize_emails")
    words = command_words(caught.value.fix)
    assert words is not None and words[:2] == ["mcp-jobs", "backfill"], caught.value.fix
    database = words[words.index("--database-url") + 1]
    assert database.startswith("sqlite:////") and database.endswith("/jobs.db"), database
