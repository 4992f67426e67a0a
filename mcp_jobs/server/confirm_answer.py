"""A confirm question's answer that is no yes or no is a decline (WRITE_DECLINED, nothing
written), answered as the tool's envelope.

The SDK reads the answer before the tool runs and fails the call with a text-only error naming
its resolver (an accept with no content, or content the question did not ask for) or, when the
client's handler failed, with the client's JSON-RPC error. `asking()` wraps a tool call, the
asking resolver records its question with `asked(...)`, and a failure that comes after that
question is turned into the decline: the tool body, which answers every failure of its own as
an envelope, never raised it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError

from mcp_jobs.errors import WriteDeclinedError
from schemas.errors import NextCall

# How the decline names each answer (its `details.action`, and the cause's "the answer was …").
UNREADABLE = "an accept without a yes or no (confirm: true or false)"
CLIENT_FAILED = "an error from the client instead of an answer"


@dataclass
class Question:
    """The call's confirm question, once asked: the dry run a decline points back to."""

    tool: str | None = None
    dry_run: NextCall | None = None

    def declined(self, exc: Exception) -> WriteDeclinedError | None:
        """The decline `exc` stands for: the SDK refusing the answer to this question (or the
        client failing to give one); None when nothing was asked, or `exc` is a crash."""
        if self.tool is None or self.dry_run is None or isinstance(exc, UnexpectedToolError):
            return None
        if isinstance(exc, ToolError):
            return WriteDeclinedError(self.tool, UNREADABLE, self.dry_run)
        if isinstance(exc, MCPError):
            return WriteDeclinedError(self.tool, CLIENT_FAILED, self.dry_run)
        return None


_question: ContextVar[Question | None] = ContextVar("confirm_question", default=None)


@contextmanager
def asking() -> Iterator[Question]:
    """A tool call, during which a confirm question can be asked (`asked`)."""
    question = Question()
    token = _question.set(question)
    try:
        yield question
    finally:
        _question.reset(token)


def asked(tool: str, dry_run: NextCall) -> None:
    """The current call asks the person to confirm `tool`'s write (its dry run: `dry_run`)."""
    question = _question.get()
    if question is not None:
        question.tool, question.dry_run = tool, dry_run
