"""The stdio transport: one JSON-RPC message a line, and every line that is not one answered.

The SDK's stdio reader drops a line it cannot parse without a reply (the client waits forever)
and holds a line in memory however long it is. This one answers as the HTTP transport does — a
parse error (-32700) or an invalid request (-32600), with the request's id when one can be read,
else null — refuses a line over the request bound while it streams in, and reads on. At the end
of input it answers every request it has read before the session ends (the SDK's would cancel
them: a piped script closes stdin straight after its last request), and answers for the client
what the server asked it (an elicitation is then cancelled), since no answer can come. A client
that closes its end of our output has gone (the host quit or restarts us): the session ends at
once, quietly, its calls in flight cancelled, since no answer can reach it.
"""

from __future__ import annotations

import logging
import os
import select
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    CONNECTION_CLOSED,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from mcp_jobs.server.json_rpc_text import parse_line, rpc_error
from mcp_jobs.server.line_id import TAIL_BYTES, kept_tail, over_size_id

# What an oversized line is dropped in: it is never held whole.
DROP_CHUNK = 64 * 1024
CANCELLED = "notifications/cancelled"
INPUT_CLOSED = "the client closed its input before answering"
ELICIT = "elicitation/create"
# How often, after the end of input, the output is checked for the client having closed it.
HANGUP_POLL_MS = 200

logger = logging.getLogger("mcp_jobs.server")

Incoming = MemoryObjectSendStream[SessionMessage | Exception]
Outgoing = MemoryObjectSendStream[SessionMessage]


class Unanswered:
    """The client's requests read and not yet answered, or cancelled by the client (MCP: a
    cancelled request gets no answer)."""

    def __init__(self) -> None:
        self._ids: set[str | int] = set()
        self._none = anyio.Event()
        self._none.set()

    def read(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest):
            if not self._ids:
                self._none = anyio.Event()
            self._ids.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == CANCELLED:
            self._done((message.params or {}).get("requestId"))

    def sent(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._done(message.id)

    def _done(self, ident: object) -> None:
        if isinstance(ident, str | int) and ident in self._ids:
            self._ids.discard(ident)
            if not self._ids:
                self._none.set()

    async def all_answered(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._none.wait()


class Peer:
    """Whether the client still reads what we write. Its leaving is a normal end, not a failure:
    said once, and the session stops reading (so its calls in flight are cancelled)."""

    def __init__(self) -> None:
        self.gone = anyio.Event()

    def left(self) -> None:
        if not self.gone.is_set():
            logger.info("the client closed the connection; its calls in flight are cancelled")
            self.gone.set()


def hung_up(fd: int, timeout_ms: int) -> bool:
    """Whether the reader of `fd` has closed its end (a pipe reports an error, a socket a hang-up),
    waiting up to `timeout_ms`. Blocking: run it in a thread."""
    poller = select.poll()
    poller.register(fd, 0)  # no event asked for: an error or a hang-up is always reported
    return bool(poller.poll(timeout_ms))


async def _watch_hangup(wire: BinaryIO, peer: Peer) -> None:
    """Tell `peer` once the client closes `wire`, where that can be seen (a pipe or a socket on
    a system with poll): without writing, a lone call in flight would be waited out first."""
    try:
        fd = wire.fileno()
    except (AttributeError, OSError, ValueError):
        return
    if not hasattr(select, "poll"):
        return
    while not await anyio.to_thread.run_sync(hung_up, fd, HANGUP_POLL_MS, abandon_on_cancel=True):
        pass
    peer.left()


class Asked:
    """The server's requests to the client (an elicitation) not yet answered. Once stdin has
    closed none can be: each is answered for the client at once, so the call waiting on it ends
    now rather than when the time requests in hand get at the end of input runs out."""

    def __init__(self) -> None:
        self._methods: dict[str | int, str] = {}
        self._more = anyio.Event()

    def sent(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCRequest):
            self._methods[message.id] = message.method
            self._more.set()

    def read(self, message: JSONRPCMessage) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._methods.pop(message.id, None)

    async def release(self, incoming: Incoming) -> None:
        """Answer every request asked so far, and each one asked from now on."""
        while True:
            self._more = anyio.Event()
            asked, self._methods = self._methods, {}
            for ident, method in asked.items():
                await incoming.send(SessionMessage(_unanswerable(ident, method)))
            await self._more.wait()


def _unanswerable(ident: str | int, method: str) -> JSONRPCResponse | JSONRPCError:
    # A question the person can no longer see was dismissed without a choice: MCP's "cancel",
    # which declines the write that asked it (WRITE_DECLINED, nothing written).
    if method == ELICIT:
        return JSONRPCResponse(jsonrpc="2.0", id=ident, result={"action": "cancel"})
    return rpc_error(ident, INPUT_CLOSED, CONNECTION_CLOSED)


def read_line(wire: BinaryIO, limit: int) -> tuple[bytes, bytes | None] | None:
    """The next line and, when it was over `limit` bytes, its last bytes (then only its first
    bytes are given, its id read from them or from its end, and the rest dropped as they
    arrive); None at end of input. Blocking: run it in a thread."""
    line = wire.readline(limit + 1)
    if not line:
        return None
    if line.endswith(b"\n") or len(line) <= limit:
        return line, None
    tail = line[-TAIL_BYTES:]
    while True:
        rest = wire.readline(DROP_CHUNK)
        tail = kept_tail(tail, rest)
        if not rest or rest.endswith(b"\n"):
            return line, tail


async def _read(
    wire: BinaryIO,
    limit: int,
    incoming: Incoming,
    replies: Outgoing,
    unanswered: Unanswered,
    asked: Asked,
    answer_seconds: float,
    output: tuple[BinaryIO, Peer],
) -> None:
    async with incoming, replies:
        while True:
            got = await anyio.to_thread.run_sync(read_line, wire, limit, abandon_on_cancel=True)
            if got is None:
                # The session ends when `incoming` closes: not before the client's requests are
                # answered (unless it has closed our output too: then none can be), and those of
                # the server's that wait on the client are answered now.
                async with anyio.create_task_group() as tg:
                    tg.start_soon(asked.release, incoming)
                    tg.start_soon(_watch_hangup, *output)
                    await unanswered.all_answered(answer_seconds)
                    tg.cancel_scope.cancel()
                return
            line, tail = got
            if tail is not None:
                # A client may write the id last (the TypeScript SDK does): read its end too.
                ident = await anyio.to_thread.run_sync(over_size_id, line, tail)
                reply = rpc_error(ident, f"Invalid request: over {limit} bytes")
                await replies.send(SessionMessage(reply))
                continue
            if not line.strip():
                continue  # a blank line is no request: nothing waits for an answer
            parsed = parse_line(line)
            if isinstance(parsed, JSONRPCError):
                await replies.send(SessionMessage(parsed))
            else:
                unanswered.read(parsed.message)
                asked.read(parsed.message)
                await incoming.send(parsed)


def _write_line(wire: BinaryIO, data: bytes) -> None:
    wire.write(data)
    wire.flush()


async def _write(
    wire: BinaryIO,
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    unanswered: Unanswered,
    asked: Asked,
    peer: Peer,
) -> None:
    async with outgoing:
        async for item in outgoing:
            if peer.gone.is_set():
                continue  # drained, so the session's last writes do not block its end
            asked.sent(item.message)
            text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await anyio.to_thread.run_sync(_write_line, wire, text.encode() + b"\n")
            except OSError:  # a broken pipe or a reset: the client closed our output
                peer.left()
                continue
            unanswered.sent(item.message)


@contextmanager
def _claimed_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The wire on private descriptors, while fd 0 reads the null device and fd 1 writes to
    stderr: a stray print() or a child process cannot corrupt the protocol stream."""
    try:
        standard = sys.stdin.fileno() == 0 and sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        standard = False
    if not standard:
        yield sys.stdin.buffer, sys.stdout.buffer
        return
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        # closefd=False: a reader thread may still block on the descriptor after we return, so
        # it is never closed (and its number never reused under that thread).
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


@asynccontextmanager
async def stdio_transport(
    *,
    max_request_bytes: int,
    answer_seconds: float,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The (read, write) streams a low-level server runs on, over stdin/stdout by default. At the
    end of input, requests still in hand get `answer_seconds` to be answered."""
    with _claimed_stdio() if stdin is None or stdout is None else _given(stdin, stdout) as wires:
        wire_in, wire_out = wires
        incoming, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        unanswered, asked, peer = Unanswered(), Asked(), Peer()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write, wire_out, outgoing, unanswered, asked, peer)
            reading = anyio.CancelScope()

            async def read_all() -> None:
                with reading:
                    async with anyio.create_task_group() as watch:
                        watch.start_soon(_stop_when_gone, peer, watch.cancel_scope)
                        await _read(
                            wire_in,
                            max_request_bytes,
                            incoming,
                            write.clone(),
                            unanswered,
                            asked,
                            answer_seconds,
                            (wire_out, peer),
                        )
                        watch.cancel_scope.cancel()

            tg.start_soon(read_all)
            try:
                yield read, write
            finally:
                # The server is done: stop reading, and let the writer drain what it was given.
                reading.cancel()
                write.close()


async def _stop_when_gone(peer: Peer, reading: anyio.CancelScope) -> None:
    # Reading stops, `incoming` closes, and the SDK's loop cancels the calls in flight.
    await peer.gone.wait()
    reading.cancel()


@contextmanager
def _given(stdin: BinaryIO, stdout: BinaryIO) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    yield stdin, stdout
