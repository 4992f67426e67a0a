"""Durable steps: results persisted before the step returns, replayed without re-running (rule 6).

`step.sleep` is a suspension, not a failure: it raises `StepSuspension`, which run_job turns
into a park that burns no attempt (rule 7).
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from types import CodeType
from typing import Any, NamedTuple

import anyio.to_thread

from engine import bounds
from engine import inbound_events as event_rules
from engine.clock import Clock
from engine.drivers.base import EVENTS, RECORD_BOUNDS, EventStore, require
from engine.errors import JobOutputInvalidError, JobOutputTooLargeError, StepDuplicateError
from engine.inbound_events import EventCursor, EventOutcome
from engine.settle import Settler, until_written
from engine.storable import find_unstorable, storable_text
from schemas.states import StepStatus
from schemas.steps import StepRecord


class StepSuspension(BaseException):
    """Control flow, not an error: the run parks until `wake_at`. A BaseException so a job's own
    `except Exception` cannot swallow it."""

    def __init__(self, step: str, wake_at: int) -> None:
        super().__init__(f"suspended at step {step!r} until {wake_at}")
        self.step = step
        self.wake_at = wake_at


class EventSuspension(StepSuspension):
    """A wait for an event parks like a sleep, until its timeout or a send wakes it. Carries
    what run_job needs to look for the event once more after the park commits (a send that
    committed between the step's look and the park found the job running and woke nothing)."""

    def __init__(
        self,
        step: str,
        wake_at: int,
        event: tuple[str, str, str | None],
        started_at: int,
        after: EventCursor | None,
    ) -> None:
        super().__init__(step, wake_at)
        self.event = event
        self.started_at = started_at
        self.after = after


def storable_output(job: str, origin: str, value: Any, bound: int) -> Any:
    """`value` as it is stored and replayed, once it passed the one rule (engine.storable) and
    the bound an input has (`bound` bytes of compact UTF-8 JSON: the client's
    max_payload_bytes, engine.bounds).

    Checked where the body or step returns, before the value joins a write batched with other
    jobs: a value outside the rule fails only its own job (`JOB_OUTPUT_INVALID`, terminal).
    `origin` is "the job" or 'step "name"'."""
    kind = type(value)
    if value is None or kind is int or kind is bool:  # the common case: nothing to check
        return value
    bad = find_unstorable(value)
    if bad is not None:
        error = JobOutputInvalidError(job, origin, bad.path, bad.reason)
        # Only on a refusal: the conversions' module is not imported on a job's way.
        from engine.json_conversion import conversion_for

        made_json = conversion_for(value)
        if made_json is not None and bad.path == "$":
            error.fix = f"return {made_json} from {origin}, not the object"
        elif made_json is not None:
            error.fix = f"make the value at {bad.path} JSON before {origin} returns it: {made_json}"
        raise error
    if kind is str:
        # At most 6 bytes of JSON a character (`\u001f`) and its quotes: most text is measured
        # without being written.
        if len(value) * 6 + 2 > bound:
            _bounded(job, origin, json.dumps(value, ensure_ascii=False), bound)
        return value
    try:
        # A copy that is what a replay returns: tuples become lists, subclasses their base.
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        copy = json.loads(text)
    except (TypeError, ValueError) as exc:  # an int too long for the decimal conversion
        raise JobOutputInvalidError(job, origin, "$", f"{type(exc).__name__}: {exc}") from exc
    _bounded(job, origin, text, bound)
    return copy


def _bounded(job: str, origin: str, text: str, bound: int) -> None:
    size = len(text) if text.isascii() else len(text.encode())
    if size > bound:
        raise JobOutputTooLargeError(
            job, origin, size, bound, bounds.PAYLOAD_ENV, bounds.PAYLOAD_CEILING
        )


def mend_output(exc: JobOutputTooLargeError, driver: object, job_id: str) -> None:
    """`exc` (a step's or output's value past the engine's bound) with a fix that names every
    setting the value needs, where `driver`'s record of job `job_id` cannot hold it as set:
    following the engine's export alone, the driver would refuse the same value next."""
    details = exc.details or {}
    size = details.get("size")
    if not isinstance(size, int) or not RECORD_BOUNDS.offered_by(driver):
        return
    needs = require(driver, RECORD_BOUNDS).output_needs(job_id, size)
    if needs is None:
        return  # the record holds it: the export alone works
    origin = str(details.get("origin", "the job"))
    if needs.setting is None:
        exc.fix = f"return from {origin} a reference to the data (a key, a URL) ({needs.reason})"
    elif size <= bounds.PAYLOAD_CEILING:
        exc.fix = f"{needs.setting}, then export {bounds.PAYLOAD_ENV}={size}"
        exc.details = {**details, **needs.details}


# Where a step was called from: the calling function's code and line.
Site = tuple[CodeType, int]


def caller() -> Site:
    """The site of the body's call of the `ctx.step` method that calls this."""
    frame = sys._getframe(2)
    return frame.f_code, frame.f_lineno


class StepCall(NamedTuple):
    """A body's call of a step method, as a fix line writes it: `ctx.step.<method>(`, then
    `before`, the step's name, then `after`."""

    site: Site
    method: str
    after: str
    before: str = ""


def number(value: object) -> str:
    """A number argument as written, for a fix line; `...` for anything else."""
    return repr(value) if type(value) in (int, float) else "..."


def text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else "..."


def duplicate(job: str, name: str, call: StepCall, *, looped: bool) -> StepDuplicateError:
    """STEP_DUPLICATE for the second call of step `name`, its fix that call with a name of its
    own. From the line that called the first (a loop, or a helper called twice), one new name
    is not enough: the fix names each pass, by a value of the caller's own."""
    error = StepDuplicateError(job, name)
    if looped:
        escaped = name.replace("{", "{{").replace("}", "}}")
        renamed = "f" + json.dumps(escaped + "-{n}", ensure_ascii=False)
        error.cause += (
            "; both calls came from one line (a loop, or a helper called twice): give each pass "
            "a name of its own, from what sets it apart (its index n, or its item's id)"
        )
        error.args = (f"{error.code}: {error.cause}",)
    else:
        renamed = json.dumps(f"{name}-2", ensure_ascii=False)
    error.fix = f"ctx.step.{call.method}({call.before}{renamed}{call.after}"
    return error


def _named(argument: str, name: object) -> str:
    """A step name as the body wrote it, within the bounds of every other name (engine.bounds):
    refused at the call, before any driver stores it (a lone surrogate or a NUL was stored by
    one driver, refused by another, and failed the batch-mates of its write on a third)."""
    return bounds.text(argument, name, bounds.MAX_NAME_BYTES)


class StepApi:
    """`ctx.step`: the durable operations available inside a job body."""

    def __init__(
        self,
        *,
        settler: Settler,
        clock: Clock,
        job_name: str,
        job_id: str,
        run_id: str,
        token: str,
        completed: dict[str, StepRecord] | None = None,
        tenant_id: str | None = None,
        max_output_bytes: int = bounds.DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self._settler = settler
        self._max_output = max_output_bytes
        self._tenant = tenant_id
        # (event name, key) -> the event the last wait of this run for it received: a later
        # wait for the same pair only matches events after it (engine/inbound_events.py).
        self._received: dict[tuple[str, str], EventCursor] = {}
        self._clock = clock
        self._job = job_name
        self._job_id = job_id
        self._run_id = run_id
        self._token = token
        # Loaded on the first step, not at claim: a job with no steps costs no extra round trip.
        self._stored = completed
        # Each step name of this run -> the line that called it first (engine.step_names).
        self._seen: dict[str, Site] = {}

    async def _enter(self, name: str, call: StepCall) -> StepRecord | None:
        """The stored record of step `name` of this run, if any; `name` checked by `_named`.
        `call` is what the body called, to mend it when the name is taken."""
        first = self._seen.get(name)
        if first is not None:
            raise duplicate(self._job, name, call, looped=first == call.site)
        self._seen[name] = call.site
        if self._stored is None:
            steps = await self._settler.driver.load_steps(self._run_id)
            self._stored = {s.name: s for s in steps}
        return self._stored.get(name)

    async def _save(self, name: str, status: StepStatus, started_at: int, **fields: Any) -> None:
        """Persist one step record (fenced by this run's lease token) and remember it."""
        record = StepRecord(
            job_id=self._job_id,
            run_id=self._run_id,
            name=name,
            status=status,
            started_at=started_at,
            **fields,
        )

        async def save() -> None:
            await self._settler.save_step(self._job_id, self._token, record)

        what = f"step {name!r} of job {self._job_id} ({self._job})"
        await until_written(self._clock, what, save)
        if self._stored is not None:
            self._stored[name] = record

    async def _fail(self, name: str, started: int, attempts: int, error: str) -> None:
        # The message is the job's text, so it is made storable: it must not fail the write.
        await self._save(
            name,
            "failed",
            started,
            error=storable_text(error),
            finished_at=self._clock.now_ms(),
            attempts=attempts,
        )

    async def run(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once per run: on replay a completed step returns its stored
        result and `fn` is not called. Sync functions run in a worker thread."""
        call = StepCall(caller(), "run", ", ...)")
        existing = await self._enter(_named("name", name), call)
        if existing is not None and existing.status == "completed":
            return existing.output
        started = self._clock.now_ms()
        attempts = existing.attempts + 1 if existing is not None else 1
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(*args, **kwargs)
            else:
                value = await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            await self._fail(name, started, attempts, f"{type(exc).__name__}: {exc}")
            raise
        try:
            output = storable_output(self._job, f'step "{name}"', value, self._max_output)
        except JobOutputInvalidError as exc:
            if isinstance(exc, JobOutputTooLargeError):
                mend_output(exc, self._settler.driver, self._job_id)
            # Not stored: a replay runs the step again rather than return what was refused.
            await self._fail(name, started, attempts, f"{exc.code}: {exc.cause}")
            raise
        # Persisted BEFORE returning: a crash after this line replays the stored result.
        await self._save(
            name,
            "completed",
            started,
            output=output,
            finished_at=self._clock.now_ms(),
            attempts=attempts,
        )
        return output

    async def sleep(self, name: str, seconds: float) -> None:
        """Durably wait `seconds`: the job parks (no worker slot held, no attempt burned) and
        resumes after this step once the time has passed."""
        call = StepCall(caller(), "sleep", f", {number(seconds)})")
        seconds = bounds.seconds("seconds", seconds)  # a longer park is no plan
        existing = await self._enter(_named("name", name), call)
        now = self._clock.now_ms()
        if existing is not None and existing.status == "completed":
            return
        if existing is not None and existing.status == "sleeping":
            wake_at = int((existing.output or {}).get("wake_at", now))
            started = existing.started_at
        else:
            wake_at = now + int(seconds * 1000)
            started = now
        if now >= wake_at:
            await self._save(
                name, "completed", started, output={"wake_at": wake_at}, finished_at=now
            )
            return
        if existing is None or existing.status != "sleeping":
            await self._save(name, "sleeping", started, output={"wake_at": wake_at})
        raise StepSuspension(name, wake_at)

    async def wait_for_event(
        self,
        name: str,
        *,
        match: str,
        timeout: float,  # noqa: ASYNC109 - a durable timeout in the database, not a cancel scope
        step: str | None = None,
    ) -> EventOutcome:
        """Durably wait for the event `name` with key `match` (this job's tenant), sent by
        `jobs.send_event`, for at most `timeout` seconds: the job parks like a sleep (no slot
        held, no attempt burned). Returns `EventOutcome(received=True, payload=...)`, or
        `received=False` once the timeout passed — never raises for a timeout. The step is
        named `event:<name>` unless `step=` names it (to wait for one event twice)."""
        # Bounded here; the name rule (engine.bounds.name) is a new wait's alone, so a job that
        # parked on a name stored before that rule still resumes.
        name = bounds.text("name", name, bounds.MAX_NAME_BYTES)
        key = bounds.text("match", match, bounds.MAX_KEY_BYTES)
        seconds = bounds.seconds("timeout", timeout)
        # The name derived from a checked event name needs no check of its own.
        step_name = event_rules.step_name(name) if step is None else _named("step", step)
        given = f"{text(name)}, match={text(key)}, timeout={number(timeout)}, step="
        call = StepCall(caller(), "wait_for_event", ")", before=given)
        existing = await self._enter(step_name, call)
        if existing is None:
            name, key = event_rules.checked_name(name), event_rules.checked_key(key, "match")
        pair = (name, key)
        if existing is not None and existing.status == "completed":
            outcome = EventOutcome.model_validate(existing.output)
            self._remember(pair, outcome)
            return outcome
        store = self._events()
        now = self._clock.now_ms()
        if existing is not None and existing.status == "waiting":
            stored = existing.output or {}
            started = existing.started_at
            timeout_at = int(stored.get("timeout_at", now))
            after_raw = stored.get("after")
            after = None if after_raw is None else (int(after_raw[0]), str(after_raw[1]))
        else:
            started = now
            timeout_at = now + int(seconds * 1000)
            after = self._received.get(pair)
        # Listed as a waiter BEFORE the look: a send from here on wakes it once it parks.
        await store.await_event(self._job_id, name, key, self._tenant)
        event = await store.first_event(name, key, self._tenant, started, after)
        if event is not None or now >= timeout_at:
            outcome = EventOutcome.timeout(now) if event is None else EventOutcome.of(event)
            await self._save(
                step_name,
                "completed",
                started,
                output=outcome.model_dump(mode="json"),
                finished_at=now,
            )
            await store.forget_waiter(self._job_id)
            self._remember(pair, outcome)
            return outcome
        if existing is None or existing.status != "waiting":
            waiting = {
                "event": name,
                "key": key,
                "tenant_id": self._tenant,
                "timeout_at": timeout_at,
                "wake_at": timeout_at,
                "after": None if after is None else list(after),
            }
            await self._save(step_name, "waiting", started, output=waiting)
        raise EventSuspension(step_name, timeout_at, (name, key, self._tenant), started, after)

    def _events(self) -> EventStore:
        return require(self._settler.driver, EVENTS)

    def _remember(self, pair: tuple[str, str], outcome: EventOutcome) -> None:
        if outcome.received and outcome.sent_at is not None and outcome.event_id is not None:
            self._received[pair] = (outcome.sent_at, outcome.event_id)
