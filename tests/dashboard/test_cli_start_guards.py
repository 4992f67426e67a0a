"""`mcp-jobs dashboard` bounds a request's headers as `serve` does: past the bound it is answered
a typed 431 before any page is built (a 20 KB header was served)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2

from tests.dashboard.test_cli import started


async def test_oversized_headers_get_a_typed_431_and_the_dashboard_keeps_serving(
    tmp_path: Path,
) -> None:
    argv = ["--database-url", f"sqlite:///{tmp_path}/jobs.db", "--port", "0"]
    with anyio.fail_after(40):
        async with started(argv, tmp_path) as address, httpx2.AsyncClient(timeout=20) as http:
            big = await http.get(address, headers={"X-Big": "x" * 20_000})
            small = await http.get(address)
    assert big.status_code == 431, big.text
    assert "HTTP_HEADERS_TOO_LARGE" in big.text
    assert small.status_code == 200
