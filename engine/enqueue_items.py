"""Enqueue items resolved into the requests a driver inserts: every value checked against
engine.bounds, the input validated (against the job's model, or the JSON Schema a worker
published for a job this process has not imported), the key computed, the time and priority
settled. `Jobs` (engine/client.py) hands its enqueues and stages here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import pydantic_core
from pydantic import BaseModel, ValidationError

from engine import bounds
from engine.bounds import MAX_DELAY_MS, MAX_NAME_BYTES
from engine.declare import JobDefinition, JobRegistry
from engine.descriptors import IdempotencyKeyMissingError, validate_input
from engine.drivers.base import (
    DescriptorStore,
    RecordBounds,
    RecordNeeds,
)
from engine.errors import (
    LEFT_OUT,
    InvalidArgumentError,
    JobDuplicateError,
    JobDuplicateInBatchError,
    JobInputInvalidError,
    JobsError,
    JobTenantRequiredError,
    short_repr,
)
from engine.ids import new_ids
from engine.instants import instant
from engine.internal_jobs import enqueueable, refuse_by_name
from engine.meant import meant_as
from engine.storable import find_unstorable
from engine.tracing import current_traceparent, require_traceparent
from schemas.jobs import EnqueueRequest, OnConflict

JobRef = str | JobDefinition[Any]

# Parts of a large batch (see `EnqueueItems.parts`): the first is small so that the database
# starts inserting early; each next part is built while the previous one is inserted, and
# building a row costs about half what inserting it does, so a part may be twice the last.
FIRST_PART = 128
_LARGEST_PART = 1024


class Enqueue(NamedTuple):
    """One item of `enqueue_many`. A named tuple: immutable, and built several times faster
    than a frozen dataclass, which matters at a thousand items per call."""

    job: JobRef
    input: BaseModel | Mapping[str, Any]
    tenant_id: str | None = None
    delay: float | None = None
    # Epoch ms, an aware datetime, or ISO 8601 text with its zone (engine.instants).
    run_at: int | datetime | str | None = None
    on_conflict: OnConflict = "dedupe"
    traceparent: str | None = None
    # None: the job's declared priority (engine.rules.claim_rank; higher is claimed first).
    priority: int | None = None
    # The idempotency key: required for a job known only by its published descriptor (the key
    # function is the app's code); for a registered job omitted, or the one it computes.
    key: str | None = None


def as_item(index: int, item: object) -> Enqueue:
    """Item `index` of a batch as an `Enqueue`; anything else is refused by its position."""
    if isinstance(item, tuple) and 2 <= len(item) <= len(Enqueue._fields):
        return Enqueue(*item)
    raise InvalidArgumentError(f"items[{index}]", item, "Enqueue(job, input, ...)")


# pydantic's bound checks, and its own entry for a non-finite number where a field takes
# none (an int, `allow_inf_nan=False`): the one wording for every NaN or infinity in an input.
_BOUNDS = frozenset(
    ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of")
)
_NOT_FINITE = "Input should be a finite number"


def _not_finite(value: object) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _no_finite_number(loc: Sequence[Any]) -> dict[str, Any]:
    """The error entry (as pydantic's) for a NaN or infinity at `loc` of a job's input."""
    return {"loc": list(loc), "msg": _NOT_FINITE, "type": "finite_number"}


def input_size(job: str, value: Any) -> int:
    """`bounds.payload_size` of job `job`'s input as stored. A NaN or infinity in it, in a
    field that bounds it or not, typed or not, is JOB_INPUT_INVALID at its path, as pydantic
    refuses it where the field takes none: one fault, one code (the storable rule's
    INVALID_ARGUMENT said it of an unbounded float, "finite number" of a bounded one)."""
    try:
        return bounds.payload_size("input", value)
    except InvalidArgumentError as exc:
        bad = find_unstorable(value)  # walked again only on a refusal, off the hot path
        if bad is None or not bad.not_finite:
            raise
        raise JobInputInvalidError(job, [_no_finite_number(bad.loc)]) from exc


def _field_errors(
    exc: ValidationError, model: type[BaseModel], given: object
) -> list[dict[str, Any]]:
    """pydantic's errors, with each top-level field the model does not declare tied to the one
    it plainly stands for (`userId` for `user_id`): named on both entries, so the first one,
    which the refusal's cause quotes, says it. A NaN or infinity past a bound is said to be no
    finite number, as pydantic says it of a field that takes none (an int), and as
    `input_size` says it of one that takes any."""
    found = exc.errors(include_url=False, include_context=False, include_input=True)
    fields = model.model_fields
    required = [name for name, f in fields.items() if f.is_required()]
    meant: dict[str, str] = {}  # the unknown field -> the declared one
    if isinstance(given, dict):
        for e in found:
            if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
                unknown = str(e["loc"][0])
                to = meant_as(unknown, fields, given=given, required=required)
                if to is not None:
                    meant[unknown] = to
    given_as = {to: unknown for unknown, to in meant.items()}
    errors: list[dict[str, Any]] = []
    for e in found:
        entry: dict[str, Any] = {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
        name = str(e["loc"][0]) if len(e["loc"]) == 1 else None
        if e["type"] == "extra_forbidden" and name in meant:
            entry["msg"] += f" (meant {meant[name]}?)"
            entry["meant"] = meant[name]
        elif e["type"] == "missing" and name in given_as:
            entry["msg"] += f" (given as {short_repr(given_as[name])}?)"
        elif e["type"] in _BOUNDS and _not_finite(e.get("input")):
            # NaN fails every bound, and "should be less than or equal to 600" reads as if
            # a smaller number were the fix: it is no number at all.
            entry = _no_finite_number(e["loc"])
        errors.append(entry)
    return errors


# An input model that keeps pydantic's own `model_dump` is dumped by its serializer directly.
_MODEL_DUMP = BaseModel.model_dump


def json_input(job: str, value: BaseModel) -> dict[str, Any]:
    """`value.model_dump(mode="json")`: the input as it is stored. A value JSON cannot hold
    (bytes that are not UTF-8, an object of no JSON kind) is JOB_INPUT_INVALID at its path;
    a NaN or infinity that pydantic would write as null where the model types nothing (`Any`,
    an extra field) is put back, so `input_size` refuses it instead of the data changing."""
    model = type(value)
    try:
        if model.model_dump is _MODEL_DUMP:
            # Without the frame that forwards model_dump's thirteen defaults to the serializer
            # (a third of a small input's dump).
            dumped: dict[str, Any] = model.__pydantic_serializer__.to_python(value, mode="json")
        else:
            dumped = value.model_dump(mode="json")
    except Exception as exc:  # the serializer's, or a field serializer's (the app's code)
        raise JobInputInvalidError(job, [_unjsonable(value, exc)]) from exc
    if _holds_none(dumped):
        _put_back_non_finite(dumped, _python_dump(value))
    return dumped


def _python_dump(value: BaseModel) -> Any:
    try:
        return type(value).__pydantic_serializer__.to_python(value, mode="python")
    except Exception:  # the JSON dump went through, so this one is only a second look
        return None


def _unjsonable(value: BaseModel, exc: Exception) -> dict[str, Any]:
    """The error entry (as pydantic's) for the first value of `value` JSON cannot hold."""
    bytes_mode = value.model_config.get("ser_json_bytes", "utf8")
    found = _first_unjsonable(_python_dump(value), [], bytes_mode)
    loc, reason = found if found is not None else ([], f"{type(exc).__name__}: {exc}")
    return {"loc": loc, "msg": reason, "type": "json_unserializable"}


def _first_unjsonable(value: Any, loc: list[Any], bytes_mode: Any) -> tuple[list[Any], str] | None:
    if isinstance(value, dict):
        for key, item in value.items():
            found = _first_unjsonable(item, [*loc, key], bytes_mode)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            found = _first_unjsonable(item, [*loc, index], bytes_mode)
            if found is not None:
                return found
        return None
    try:
        pydantic_core.to_jsonable_python(value, bytes_mode=bytes_mode)
    except UnicodeDecodeError:
        return loc, "bytes that are not UTF-8 cannot be JSON text: pass them base64-encoded"
    except Exception as exc:
        return loc, f"a {type(value).__name__}, which JSON cannot hold ({exc})"
    return None


def _holds_none(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        items: Iterable[Any] = value.values()
    elif kind is list:
        items = value
    else:
        return value is None
    # A loop, not any() over a generator: every enqueue's input is looked through here.
    for item in items:
        if item is None:
            return True
        kind = type(item)
        if (kind is dict or kind is list) and _holds_none(item):
            return True
    return False


def _put_back_non_finite(dumped: Any, original: Any) -> None:
    """Where `dumped` (the JSON dump) holds null and `original` (the Python dump of the same
    value) a NaN or infinity, put that number back in `dumped`."""
    if isinstance(dumped, dict) and isinstance(original, dict):
        pairs: Iterable[tuple[Any, Any]] = (
            (key, original[key]) for key in dumped if key in original
        )
    elif isinstance(dumped, list) and isinstance(original, list | tuple):
        pairs = enumerate(original[: len(dumped)])
    else:
        return
    for place, was in pairs:
        now = dumped[place]
        if now is None and isinstance(was, float) and not math.isfinite(was):
            dumped[place] = was
        elif type(now) in (dict, list):
            _put_back_non_finite(now, was)


def _scheduled(
    name: str, tenant_required: bool, item: Enqueue, enqueued_by: str | None, now: int
) -> int:
    """The item's checks that do not depend on its input (tenant, conflict mode, actor), and
    when it runs: now, `delay` seconds from now, or `run_at`, within bounds."""
    _, _, tenant, delay, run_at, on_conflict, _, _, _ = item
    if (
        tenant is None
        and delay is None
        and run_at is None
        and on_conflict == "dedupe"
        and enqueued_by is None
        and not tenant_required
    ):
        return now  # the common item: nothing below to check, due now
    if tenant is None:
        if tenant_required:
            raise JobTenantRequiredError(name)
    else:
        bounds.tenant("tenant_id", tenant)
    if on_conflict != "dedupe" and on_conflict != "error":
        raise InvalidArgumentError("on_conflict", on_conflict, "'dedupe' or 'error'")
    if delay is None and run_at is None:
        run_at = now
    elif delay is not None:
        if run_at is not None:
            raise InvalidArgumentError(
                "delay",
                delay,
                "left out when run_at is given",
                fix="leave delay out: run_at already says when the job runs",
                nearest=LEFT_OUT,
            )
        seconds = bounds.seconds("delay", delay)
        run_at = now + int(seconds * 1000)
    else:
        run_at = instant("run_at", run_at, 0, now + MAX_DELAY_MS)
    bounds.optional_actor("enqueued_by", enqueued_by)
    return run_at


def within_batch(exc: JobDuplicateError, requests: Sequence[EnqueueRequest]) -> JobsError:
    """`exc`, refusing the batch `requests`, as the batch's own duplicate when the live job it
    names is an item of that batch (never stored: the batch was refused whole); else `exc`.
    Every driver names the first item holding the key, and refuses the first later item with
    on_conflict="error" that repeats it."""
    holder_id = (exc.details or {}).get("job_id")
    holder = next((i for i, r in enumerate(requests) if r.id == holder_id), None)
    if holder is None:
        return exc
    first = requests[holder]
    same = (first.name, first.tenant_id, first.idempotency_key)
    for index in range(holder + 1, len(requests)):
        r = requests[index]
        if r.on_conflict == "error" and (r.name, r.tenant_id, r.idempotency_key) == same:
            return JobDuplicateInBatchError(r.name, r.idempotency_key, holder, index)
    return exc


# The smallest input there is, `{}`: a record that holds less holds no job.
_SMALLEST_INPUT = 2


def input_refused(size: int, bound: int, needs: RecordNeeds) -> InvalidArgumentError:
    """An input of `size` bytes of JSON, past the engine's `bound` and past what the driver's
    record holds (`needs`): one fix that names a smaller input both take, or every setting
    this input needs (the record's, then the engine's)."""
    most = min(bound, needs.most)
    send = f"send an input of at most {most} bytes of JSON"
    settable = needs.setting is not None and size <= bounds.PAYLOAD_CEILING
    if settable and most < _SMALLEST_INPUT:  # no input fits: the setting alone is the fix
        fix = f"{needs.setting}, then export {bounds.PAYLOAD_ENV}={size}"
    elif settable:
        fix = f"{send}, or {needs.setting}, then export {bounds.PAYLOAD_ENV}={size}"
    else:
        fix = f"{send} ({needs.reason})" if needs.setting is None else send
    error = InvalidArgumentError(
        "input",
        f"{size} bytes of JSON",
        f"at most {most} bytes of JSON (the bound is set by {bounds.PAYLOAD_ENV} to {bound}; "
        f"{needs.reason})",
        fix=fix,
    )
    error.details = {**(error.details or {}), "bound": most, **(needs.details if settable else {})}
    return error


class EnqueueItems:
    """Resolves enqueue items for one client: its registry, the descriptors workers published
    (None: the driver keeps none) and the largest input it accepts."""

    def __init__(
        self,
        registry: JobRegistry,
        descriptors: DescriptorStore | None,
        max_payload_bytes: int,
        records: RecordBounds | None = None,
    ) -> None:
        """`records`: the driver, where its job record is bounded by a setting of its own."""
        self.registry = registry
        self.descriptors = descriptors
        self.max_payload_bytes = max_payload_bytes
        self.records = records

    def build(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int, ambient: str | None
    ) -> list[EnqueueRequest]:
        """Validate and resolve every item at one instant (`now`) under one span (`ambient`)."""
        ids = new_ids(2 * len(items), now)
        return [
            self.request(
                item if type(item) is Enqueue else as_item(i, item),
                enqueued_by,
                now,
                ambient,
                ids[2 * i],
                ids[2 * i + 1],
            )
            for i, item in enumerate(items)
        ]

    def parts(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int
    ) -> Iterator[list[EnqueueRequest]]:
        """`build` in parts that double in size, each built only when the driver asks for
        it (see `Driver.enqueue_parts`); one instant (the driver's too) and one span for all."""
        ambient = current_traceparent()
        start, size = 0, FIRST_PART
        while start < len(items):
            yield self.build(items[start : start + size], enqueued_by, now, ambient)
            start += size
            size = min(2 * size, _LARGEST_PART)

    def request(
        self,
        item: Enqueue,
        enqueued_by: str | None,
        now: int,
        ambient: str | None,
        job_id: str,
        run_id: str,
    ) -> EnqueueRequest:
        """One item resolved into the request a driver inserts (`ambient`: the current span's
        traceparent, used when the item names none)."""
        # The hot path of every enqueue: one pass, the common case (no delay, no tenant) first.
        # Every value is checked against engine.bounds here, before any driver sees it.
        job, input, tenant, _, _, on_conflict, traceparent, priority, given_key = item
        if isinstance(job, JobDefinition):
            definition = job
            held = self.registry.get(job.name)
            if held is not None and held is not job:
                # Another declaration under the name, which this process's workers run: the
                # job would fail there against that one's model, or run the other function.
                clash = self.registry.clash(held, job)
                if clash is not None:
                    raise clash
        else:
            refuse_by_name(job, input)  # the engine enqueues its own jobs by definition
            definition = self.definition(job)
        try:
            value = definition.parse_input(input)
        except ValidationError as exc:
            errors = _field_errors(exc, definition.input_model, input)
            raise JobInputInvalidError(definition.name, errors) from exc
        run_at = _scheduled(definition.name, definition.tenant_required, item, enqueued_by, now)
        key = definition.key_for(value)
        if given_key is not None and given_key != key:
            raise InvalidArgumentError(
                "key",
                given_key,
                f"omitted, or {key!r}: the key job {definition.name!r} computes from this input",
                nearest=key,
            )
        dumped = json_input(definition.name, value)
        size = input_size(definition.name, dumped)
        # By position, in the fields' order: keywords cost twice as much to build.
        request = EnqueueRequest(
            job_id,
            run_id,
            definition.name,
            definition.queue,
            key,
            dumped,
            run_at,
            definition.retry.attempts,
            tenant,
            definition.timeout_ms,
            on_conflict,
            ambient if traceparent is None else require_traceparent(traceparent),
            enqueued_by,
            definition.priority if priority is None else bounds.priority("priority", priority),
        )
        if size > self.max_payload_bytes:
            raise self.too_large(request, size)
        return request

    def too_large(self, request: EnqueueRequest, size: int) -> InvalidArgumentError:
        """The refusal of `request`'s input, `size` bytes of JSON past this client's bound:
        naming, where the driver's record is bounded too, every setting the input needs."""
        error = bounds.payload_refused("input", size, self.max_payload_bytes)
        needs = None if self.records is None else self.records.input_needs(request)
        return error if needs is None else input_refused(size, self.max_payload_bytes, needs)

    def published_only(self, job: object) -> DescriptorStore | None:
        """Where `job` is described when only a worker's published descriptor can describe it
        (a name this process has not imported, on a driver that keeps descriptors); else None:
        the registry resolves it (or refuses it)."""
        if self.descriptors is not None and isinstance(job, str) and job not in self.registry:
            return self.descriptors
        return None

    async def one(
        self,
        item: Enqueue,
        enqueued_by: str | None,
        now: int,
        ambient: str | None,
        job_id: str,
        run_id: str,
    ) -> EnqueueRequest:
        """`request`, or `published_request` for a job known only by its published descriptor:
        the one rule every enqueue and stage resolves an item by."""
        store = self.published_only(item.job)
        if store is None:
            return self.request(item, enqueued_by, now, ambient, job_id, run_id)
        return await self.published_request(store, item, enqueued_by, now, ambient, job_id, run_id)

    async def resolve(
        self, items: Sequence[Enqueue], enqueued_by: str | None, now: int, ambient: str | None
    ) -> list[EnqueueRequest]:
        """`build`, where an item may name a job known only by its published descriptor."""
        items = [
            item if type(item) is Enqueue else as_item(i, item) for i, item in enumerate(items)
        ]
        if not any(self.published_only(item.job) is not None for item in items):
            return self.build(items, enqueued_by, now, ambient)
        ids = new_ids(2 * len(items), now)
        return [
            await self.one(item, enqueued_by, now, ambient, ids[2 * i], ids[2 * i + 1])
            for i, item in enumerate(items)
        ]

    async def published_request(
        self,
        store: DescriptorStore,
        item: Enqueue,
        enqueued_by: str | None,
        now: int,
        ambient: str | None,
        job_id: str,
        run_id: str,
    ) -> EnqueueRequest:
        """One item of a job this process has not imported, resolved against the descriptor a
        worker published: its input validated with the published JSON Schema, its key the
        caller's (the key function is the app's code; engine/descriptors.py)."""
        job, input, tenant, _, _, on_conflict, traceparent, priority, key = item
        name = bounds.text("job", job, MAX_NAME_BYTES)
        refuse_by_name(name, input)
        found = await store.published_descriptors(name)
        if not found:
            raise self.registry.unknown(name, await self.known_names(store))
        descriptor = found[0]
        value = validate_input(
            descriptor, json_input(name, input) if isinstance(input, BaseModel) else input
        )
        run_at = _scheduled(name, descriptor.tenant_required, item, enqueued_by, now)
        if key is None:
            raise IdempotencyKeyMissingError(name, descriptor.apps or [])
        size = input_size(name, value)
        request = EnqueueRequest(
            id=job_id,
            run_id=run_id,
            name=name,
            queue=descriptor.queue,
            idempotency_key=bounds.key("key", key),
            input=value,
            run_at=run_at,
            max_attempts=descriptor.retry.attempts,
            tenant_id=tenant,
            timeout_ms=descriptor.timeout_ms,
            on_conflict=on_conflict,
            traceparent=ambient if traceparent is None else require_traceparent(traceparent),
            enqueued_by=enqueued_by,
            priority=descriptor.priority
            if priority is None
            else bounds.priority("priority", priority),
        )
        if size > self.max_payload_bytes:
            raise self.too_large(request, size)
        return request

    async def known_names(self, store: DescriptorStore) -> list[str]:
        """Every job name this client can enqueue: registered here, or published (never the
        engine's own, which no caller enqueues by name)."""
        published = [d.name for d in await store.published_descriptors()]
        return enqueueable([*self.registry.names(), *published])

    def definition(self, job: object, argument: str = "job") -> JobDefinition[Any]:
        """The declaration named `job`; a name that no declaration could have is refused as an
        argument (a declared name is always within bounds, so a hit skips the check)."""
        found = self.registry.get(job) if isinstance(job, str) else None
        if found is not None:
            return found
        return self.registry.require(bounds.text(argument, job, MAX_NAME_BYTES))
