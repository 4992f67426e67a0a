"""MCP Inspector 2.12's `--cli --strict` on `tools/list` over stdio: 0 errors and 0 warnings.

`--strict` lints every tool's input and output schema for portability (a schema with no type
accepts anything; some clients map schemas onto dialects that cannot say what it means). With
`--format json` the findings come back in the result envelope as `schemaFindings`, absent when
there are none; the text report on stderr ends in "N errors, M warnings across K tools.".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.tsclient_support import INSPECTOR, make_shop, toolchain

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]  # a cold `npm ci` fits in it

# The Inspector starts a stdio server with a minimal environment plus what `-e` adds: the shop's
# database, and the Python path this test runs with (so it checks the code under test).
PASSED_ENV = ("SHOP_DB", "PYTHONPATH")
SUMMARY = re.compile(r"(\d+) errors?, (\d+) warnings? across \d+ tools?")


def findings(envelope: dict[str, Any]) -> list[str]:
    return [
        f"{f['severity']}: {tool['toolName']} {f['schema']}.{f['path']}: {f['issue']}"
        for tool in envelope.get("schemaFindings", [])
        for f in tool["findings"]
    ]


def test_inspector_strict_finds_no_error_and_no_warning_in_tools_list(tmp_path: Path) -> None:
    tools = toolchain()
    if tools.inspector_node is None:
        pytest.skip(tools.inspector_skip)
    shop = make_shop(tmp_path)
    node_bin = str(Path(tools.inspector_node).parent)
    env = {
        **os.environ,
        # The launcher starts the CLI with whichever `node` is first on PATH: the new one.
        "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "MCP_CATALOG_PATH": str(tmp_path / "inspector-catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(tmp_path / "inspector-client.json"),
    }
    argv = [
        tools.inspector_node,
        str(INSPECTOR),
        "--cli",
        "--strict",
        "--format",
        "json",
        "--method",
        "tools/list",
        "--cwd",
        str(shop.root),
        *(
            arg
            for name in PASSED_ENV
            if name in shop.env
            for arg in ("-e", f"{name}={shop.env[name]}")
        ),
        "--",
        *shop.serve_argv(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, f"inspector exited {done.returncode}: {done.stderr[-4000:]}"
    envelope = json.loads(done.stdout)
    assert envelope["result"]["tools"], "tools/list answered no tools"
    found = findings(envelope)
    assert not found, "\n".join(found)
    # The text report agrees (it is printed only when there is something to report).
    summary = SUMMARY.search(done.stderr)
    assert summary is None or summary.groups() == ("0", "0"), done.stderr[-4000:]
