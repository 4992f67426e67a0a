"""Log output for workers and servers: one JSON object per line, or readable text with fields.

The engine logs through standard `logging` only. The worker's log listener writes one record per
job state change with `extra={"job": {...}}` (id, name, queue, tenant, attempt, reason, …), and a
job body's `ctx.log` carries the same `job` field; these formatters put those fields on the line.
`configure_logging()` is for entry points (the CLI, a script): libraries should leave handlers to
the application.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from engine.errors import InvalidArgumentError, JobsError
from engine.redaction import scrubbed

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
_HANDLER_MARK = "_mcp_jobs_handler"
# A record's message as these formatters write it, where it differs from `getMessage()`: a
# worker's line names its job in the message for a plain format (`%(message)s` alone), and
# these formatters, which write the `job` fields beside it, keep only the event's name.
BARE_MESSAGE = "_mcp_jobs_bare_message"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and k[:1] != "_"}


def _message(record: logging.LogRecord) -> str:
    bare = getattr(record, BARE_MESSAGE, None)
    return bare if isinstance(bare, str) else record.getMessage()


class _Masking(logging.Formatter):
    """A formatter whose tracebacks have their credentials masked (engine.redaction), as a
    failure's stored text has: a job body's exception message reaches the log this way too."""

    def formatException(self, ei: Any) -> str:
        return scrubbed(super().formatException(ei))


class JsonFormatter(_Masking):
    """One JSON object per record: `ts` (UTC, ISO 8601), `level`, `logger`, `message`, every
    `extra=` field as given (so `job` stays one object), and `exc` with the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": _message(record),
        }
        for key, value in _extras(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: a field we cannot encode is logged as its text, never dropped or raised.
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(_Masking):
    """`time level logger message key=value …`, the `job` fields flattened onto the line.

    A logged value is anyone's text (a request path, a queue name): every character of the line
    that is not printable is escaped, so a line break in a value cannot start a forged record.
    A traceback stays below the line, each of its lines indented so none passes for a record."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = _message(record)
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        pairs: list[str] = []
        for key, value in _extras(record).items():
            items = value.items() if isinstance(value, dict) else [(key, value)]
            # ensure_ascii=False: a Cyrillic or emoji name is written as itself, not as \u….
            pairs.extend(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in items)
        if pairs:
            line = f"{line} {' '.join(pairs)}"
        line = printable(line)
        below = [self._traceback(record), self.formatStack(record.stack_info or "")]
        for block in filter(None, below):
            line += "".join(f"\n    {printable(text)}" for text in block.split("\n"))
        return line

    def _traceback(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        return record.exc_text or ""


def printable(text: str) -> str:
    """`text` with each character that is not printable (a line break of any kind, an ESC, a
    lone surrogate) escaped as Python writes it: `\\n`, `\\x1b`, `\\u2028`, `\\ud800`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def log_lost(logger: logging.Logger, exc: BaseException, message: str, *args: object) -> None:
    """Log a failure that costs only what `message` names (an audit line, a dashboard sample,
    a progress report). A typed one (the database down) is one warning with its code and cause,
    not a traceback at every call while it lasts; anything else is a defect: an error with its
    traceback."""
    if isinstance(exc, JobsError):
        logger.warning(f"{message}: %s: %s", *args, exc.code, exc.cause)
    else:
        logger.error(message, *args, exc_info=exc)


def configure_logging(
    *,
    json: bool = True,
    level: int | str = logging.INFO,
    stream: TextIO | None = None,
    logger: str | None = None,
) -> logging.Handler:
    """Send `logger` (the root logger by default) to `stream` (stderr by default) as JSON lines
    or as text, at `level`. Calling it again replaces the handler it installed before rather
    than adding a second one. Returns the handler."""
    if isinstance(level, str):
        resolved = logging.getLevelNamesMapping().get(level.upper())
        if resolved is None:
            # `log_level`, as the commands' --log-level that gives it: the CLI mends that.
            raise InvalidArgumentError(
                "log_level", level, "DEBUG, INFO, WARNING, ERROR or CRITICAL", nearest="INFO"
            )
        level = resolved
    target = logging.getLogger(logger)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if json else TextFormatter())
    setattr(handler, _HANDLER_MARK, True)
    for old in [h for h in target.handlers if getattr(h, _HANDLER_MARK, False)]:
        target.removeHandler(old)
    target.addHandler(handler)
    target.setLevel(level)
    return handler


__all__ = ["BARE_MESSAGE", "JsonFormatter", "TextFormatter", "configure_logging", "printable"]
