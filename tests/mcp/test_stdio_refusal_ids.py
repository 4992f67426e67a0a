"""A stdio line that cannot be parsed is answered with the id its text gives, so the client
waiting on that id is freed (it waited forever on an id-null reply): payloads nested past the
JSON reader's depth, a lone surrogate escape, a line over the request bound. JSON nested deeper
than pydantic reads (128) is read by Python's reader, so the tool refuses the value by its depth
as for one a little less deep; a lone surrogate escape is a parse error (no reply could echo it,
nor could the engine store it). Only the top-level object's "id" counts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp.types import JSONRPCError, JSONRPCRequest

from mcp_jobs.config import ServerLimits
from mcp_jobs.server.json_rpc_text import parse_line
from mcp_jobs.server.line_id import top_level_id, trailing_id
from tests.mcp.support import INITIALIZE
from tests.mcp.test_stdio_malformed import Wire

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _call(ident: str | int, arguments: str) -> bytes:
    """A send_event call whose `arguments` are given as JSON text (which json.dumps could not
    write: lone surrogates, depth past its reach)."""
    head = f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "method": "tools/call", "params": '
    return f'{head}{{"name": "send_event", "arguments": {arguments}}}}}'.encode()


def _deep(ident: int, depth: int) -> bytes:
    return _call(
        ident, '{"name": "e", "key": "k", "payload": {"x": ' + "[" * depth + "]" * depth + "}}"
    )


@pytest.mark.parametrize(
    ("line", "ident"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "method": ', 7),
        (b'{"params": {"id": 5}, "id": "a-1"}', "a-1"),
        (b'{"a": {"id": 1}, "b": [{"id": 2}], "id": 3, ', 3),
        (b'{"x": "\\"id\\": 4", "id": -2, "y": ', -2),
        (b' {"i\\u0064": 9, ', 9),
        (b'{"params": {"id": 5}, "method": ', None),  # only a nested id
        (b'[{"id": 1}, ', None),  # no top-level object
        (b'{"id": 1.5, ', None),  # never echoed, as for a parsed message
        (b'{"id": true, ', None),
        (b'{"id": 12', None),  # cut short: maybe 123
        (b'{"id": "ab', None),
        (b'{"id": "\\ud800", ', None),  # no reply could be written with it
        (b'{"id": "' + b"x" * 201 + b'", ', None),
        (b'{"a": 1} {"id": 2}', None),  # the top-level object ended first
        (b'{"params": ' + b"[" * 100_000 + b'"id": 8', None),
    ],
)
def test_the_top_level_id_is_read_from_the_text(line: bytes, ident: str | int | None) -> None:
    assert top_level_id(line) == ident


@pytest.mark.parametrize(
    ("tail", "ident"),
    [
        (b'aaa"}}, "jsonrpc": "2.0", "id": 26}\n', 26),
        (b'aaa"}, "id" : "req-7" } ', "req-7"),
        (b'{"params": {"id": 5}}', None),  # a nested object's id
        (b'{"x": "a,\\"id\\": 5"}', None),  # inside a string
        (b'aaa", "id": 5.0}', None),
        (b'aaa", "id": 12', None),  # no end
        (b'aaa", "id": "\\ud800"}', None),
    ],
)
def test_an_id_written_last_is_read_from_the_line_end(tail: bytes, ident: object) -> None:
    assert trailing_id(tail) == ident


@pytest.mark.parametrize(
    "line",
    [
        _deep(11, 5000),  # past Python's reader too
        _call(12, '{"name": "e\\ud800", "key": "k"}'),
        _call(13, '{"name": "e", "key": "\\udc00x"}'),
        b'{"jsonrpc": "2.0", "id": 14, "method": "ping", "params": {"x": ' + b"[" * 300,
    ],
)
def test_a_line_that_cannot_be_parsed_is_refused_with_its_id(line: bytes) -> None:
    refusal = parse_line(line)
    assert isinstance(refusal, JSONRPCError)
    assert refusal.error.code == PARSE_ERROR
    assert refusal.id == top_level_id(line) and refusal.id is not None


def test_json_deeper_than_pydantic_reads_is_still_a_message() -> None:
    parsed = parse_line(_deep(15, 300))
    assert not isinstance(parsed, JSONRPCError) and isinstance(parsed.message, JSONRPCRequest)
    assert parsed.message.id == 15


def test_a_valid_surrogate_pair_is_read_as_its_character() -> None:
    parsed = parse_line(_call(16, '{"name": "e\\ud83d\\ude00", "key": "k"}'))
    assert not isinstance(parsed, JSONRPCError) and isinstance(parsed.message, JSONRPCRequest)
    assert (parsed.message.params or {})["arguments"]["name"] == "e\U0001f600"


@pytest.mark.slow
async def test_stdio_refusals_carry_the_id_the_line_gives(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    env = {**os.environ, "MCP_JOBS_DATABASE_URL": url, "SHOP_DB": str(tmp_path / "shop.db")}
    big = b'"' + b"a" * ServerLimits().max_request_bytes + b'"'
    with anyio.fail_after(50):
        async with await anyio.open_process(argv, env=env, cwd=tmp_path) as process:
            wire = Wire(process)
            await wire.send(INITIALIZE)
            assert "result" in await wire.reply()
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

            # Deeper than pydantic reads: the tool's own typed refusal, naming the depth.
            await wire.send(_deep(21, 250))
            reply = await wire.reply()
            assert reply["id"] == 21, reply
            answer = reply["result"]["structuredContent"]
            assert answer["ok"] is False and answer["error"]["code"] == "INVALID_ARGUMENT"
            assert "nested deeper than 64 levels" in answer["error"]["cause"]

            for ident, line, code in [
                (22, _deep(22, 5000), PARSE_ERROR),
                (23, _call(23, '{"name": "e\\ud800", "key": "k"}'), PARSE_ERROR),
                (
                    "big-24",
                    _call("big-24", '{"name": "e", "key": "k", "payload": ' + big.decode() + "}"),
                    INVALID_REQUEST,
                ),
                # The id written last, as the TypeScript SDK writes it: read from the line's end.
                (
                    26,
                    b'{"method": "tools/call", "params": {"name": "send_event", "arguments": '
                    + b'{"name": "e", "key": "k", "payload": '
                    + big
                    + b'}}, "jsonrpc": "2.0",'
                    + b' "id": 26}',
                    INVALID_REQUEST,
                ),
                (None, big, INVALID_REQUEST),
            ]:
                await wire.send(line)
                reply = await wire.reply()
                assert reply["id"] == ident and reply["error"]["code"] == code, reply

            await wire.send({"jsonrpc": "2.0", "id": 25, "method": "ping"})
            assert (await wire.reply())["id"] == 25
            await wire.stdin.aclose()
            assert await process.wait() == 0
