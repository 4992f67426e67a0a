"""What `Worker(...)` takes beyond its numbers (those are `engine.bounds` one-liners there): each
argument of the kind it is declared, refused at construction."""

from __future__ import annotations

from collections.abc import Iterable

from engine import bounds
from engine.errors import InvalidArgumentError
from engine.limits import Limits
from engine.observe import WorkerEventListener
from engine.retention import Retention

_LISTENERS = "callables taking a WorkerEvent"


def kinds_checked(
    listeners: object,
    limits: object,
    retention: object,
    apps: object,
    *flags: object,
) -> tuple[list[WorkerEventListener], list[str] | None]:
    """Each argument of the kind it is declared, so that a wrong one is INVALID_ARGUMENT here,
    not an AttributeError when the worker first uses it ("yes" for a flag is a mistake too);
    the listeners and apps as lists (a generator is read once)."""
    if isinstance(listeners, str | bytes) or not isinstance(listeners, Iterable):
        raise InvalidArgumentError("listeners", listeners, f"a list of {_LISTENERS}")
    listed = list(listeners)
    for listener in listed:
        if not callable(listener):
            raise InvalidArgumentError("listeners", listener, _LISTENERS)
    if limits is not None and not isinstance(limits, Limits):
        raise InvalidArgumentError("limits", limits, "a Limits(...) or None")
    if retention is not None and not isinstance(retention, Retention):
        raise InvalidArgumentError("retention", retention, "a Retention(...) or None")
    modules = None
    if apps is not None:
        # A module name given alone would be read as a list of one-letter modules.
        if isinstance(apps, str | bytes) or not isinstance(apps, Iterable):
            raise InvalidArgumentError("apps", apps, "a list of module names, or None")
        modules = [bounds.text("apps", app, bounds.MAX_NAME_BYTES) for app in apps]
    for name, flag in zip(("scheduler", "outbox_relay", "prune"), flags, strict=True):
        if flag is not None:
            bounds.flag(name, flag)
    return listed, modules
