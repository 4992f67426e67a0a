"""A job's own progress report (engine/progress.py) as the CLI prints it: "3/10 (30%) copying"."""

from __future__ import annotations

from typing import Any


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def progress_text(progress: dict[str, Any] | None, limit: int | None = None) -> str:
    """`done/total (percent) message`, or `done message` when the total is unknown; "-" for a
    job that never reported. `limit` cuts a message for a table cell."""
    if not progress:
        return "-"
    done, total = progress["done"], progress.get("total")
    text = _number(done)
    if total is not None:
        text += f"/{_number(total)} ({int(100 * done / total)}%)"
    message = progress.get("message")
    if message:
        if limit is not None and len(message) > limit:
            message = message[: limit - 1] + "…"
        text += f" {message}"
    return text
