"""Job descriptors published to the database: describing and enqueuing a job without its code.

A worker publishes the descriptor of every job it runs when it starts, and again every
`PUBLISH_EVERY_BEATS` presence beats (`DescriptorStore.publish_descriptors`: one row per job
name, the last writer wins, its version and worker recorded). A process that has not imported a
job's code (an MCP server started without `--app`, a producer) describes it from that row and
enqueues it against it: the input is validated with the published JSON Schema here, and the
idempotency key — a function in the app's code that no descriptor can carry — is passed by the
caller (`Jobs.enqueue(..., key=...)`, IDEMPOTENCY_KEY_MISSING without it). A job this process
has imported is always described and enqueued from its own registry (`source: "registry"`).

A published descriptor that no worker has refreshed within `STALE_AFTER_MS` is `stale`: nothing
live runs that description now. One nobody has published for `DESCRIPTOR_EXPIRY_MS` is deleted
by the pruner (`engine.pruner`), so the table holds one row per job name and never a history.
The worker's cron tasks ride on its rows (engine/tasks/published.py), so such a process sees
them too.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from engine.errors import JobInputInvalidError, JobsError, short_repr
from engine.fix_lines import import_root
from engine.internal_jobs import INTERNAL_JOBS
from schemas.descriptor import JobDescriptor, RetentionInfo

if TYPE_CHECKING:
    # jsonschema is imported where a published schema is checked: a worker's pruner does not
    # for its own jobs' schemas (vouch_for), and it is 3.6 MB of a worker's memory otherwise.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError as SchemaViolation

    from engine.declare import JobRegistry

logger = logging.getLogger("mcp_jobs.descriptors")

DAY_MS = 86_400_000
# The live-worker window (engine.metrics.LIVE_WORKER_WINDOW_MS, three presence beats; a test
# holds the two equal): a descriptor no worker refreshed within it is stale.
STALE_AFTER_MS = 30_000
# A worker republishes every this many presence beats (20 s), well inside the window above, so a
# live worker's descriptors never look stale; between two, a beat writes nothing.
PUBLISH_EVERY_BEATS = 2
# A descriptor nobody has published for this long is deleted by the pruner's pass.
DESCRIPTOR_EXPIRY_MS = 30 * DAY_MS
# The fields that describe the job itself; the version is their fingerprint (not the tasks a row
# carries: a task added changes no job).
_DESCRIPTION_FIELDS = {
    "name",
    "queue",
    "description",
    "input_schema",
    "retry",
    "timeout_ms",
    "concurrency",
    "tenant_required",
    "rate_limit",
    "idempotent",
}


class DescriptorInvalidError(JobsError):
    code = "DESCRIPTOR_INVALID"
    title = "a published job descriptor cannot be used"

    def __init__(self, job: str, reason: str) -> None:
        # The prune forgets the row, as the worker's pruner does on its next pass; a worker
        # that imports the job's code publishes it anew (at start and every 20 s).
        super().__init__(
            f'the descriptor published for job "{job}" cannot be used ({reason}); a prune '
            "forgets it (deleting no history on that pass), and a worker that imports the "
            "job's code publishes it anew",
            "mcp-jobs db prune",
            details={"job": job, "reason": reason},
        )


# The Python call that passes the key, by the `Jobs` method the refusal leaves through: the
# caller's own call with `key=` added, a "<key>" slot for the key the app's code computes.
_KEY_CALLS = {
    "enqueue": "await jobs.enqueue({job}, input, key=<key>)",
    "enqueue_many": "await jobs.enqueue_many([Enqueue({job}, input, key=<key>)])",
    "stage": "await jobs.stage(tx, {job}, input, key=<key>)",
    "stage_many": "await jobs.stage_many(tx, [Enqueue({job}, input, key=<key>)])",
}


class IdempotencyKeyMissingError(JobsError):
    code = "IDEMPOTENCY_KEY_MISSING"
    title = "a job known only by its published descriptor needs its idempotency key passed"

    def __init__(self, job: str, apps: Sequence[str], call: str = "enqueue") -> None:
        where = ", ".join(apps) if apps else "the app"
        super().__init__(
            f'job "{job}" is known here only by the descriptor a worker published: its '
            f"idempotency key is computed by code in {where}, which this process has not "
            "imported, so the caller passes the key (the same one that code computes, or "
            "deduplication breaks)",
            # The shape of the call, with a slot to fill in: no next_call, which would run
            # with that text as the key. MCP's enqueue_job mends it into the tool call.
            "",
            details={"job": job, "argument": "key", "apps": list(apps)},
        )
        self.job = job
        self.raised_through(call)

    def raised_through(self, call: str) -> None:
        """The fix for a refusal raised through `call` (`enqueue`, `stage_many`, …)."""
        shape = _KEY_CALLS.get(call, _KEY_CALLS["enqueue"])
        self.fix = shape.format(job=json.dumps(self.job, ensure_ascii=False))


def version_of(descriptor: JobDescriptor) -> str:
    """A fingerprint of what the descriptor says about the job (not who published it, or when)."""
    core = descriptor.model_dump(mode="json", include=_DESCRIPTION_FIELDS)
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def from_registry(descriptor: JobDescriptor) -> JobDescriptor:
    return descriptor.model_copy(update={"source": "registry", "version": version_of(descriptor)})


def to_publish(descriptor: JobDescriptor, apps: Sequence[str]) -> JobDescriptor:
    """What a worker publishes for one of its jobs: the stores add who and when."""
    roots = dict.fromkeys(root for app in apps if (root := import_root(app)) is not None)
    return descriptor.model_copy(
        update={
            "source": "published",
            "version": version_of(descriptor),
            "apps": list(apps),
            "app_paths": list(roots) or None,
            "key_required": True,
            "stale": None,
        }
    )


def stamped(descriptor: JobDescriptor, worker_id: str, now: int) -> JobDescriptor:
    """`descriptor` as a store keeps it: published by `worker_id` at `now`."""
    return descriptor.model_copy(
        update={"source": "published", "published_by": worker_id, "published_at": now}
    )


def encode(descriptor: JobDescriptor) -> str:
    """The stored JSON of a published descriptor (staleness is judged when read, not stored)."""
    return descriptor.model_dump_json(exclude={"stale"})


def decode(name: str, text: str | bytes) -> JobDescriptor:
    try:
        return JobDescriptor.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "row"
        reason = f"stored row invalid at {where}: {first['msg']}"
        raise DescriptorInvalidError(name, reason) from exc


def forgettable(name: str, text: str | bytes, published_before: int) -> bool:
    """Whether the pruner forgets a stored descriptor: published before `published_before`, or
    one that cannot be read (another program wrote it), which would otherwise fail every
    pruner pass and every listing until it expired; a worker that declares the job publishes
    it anew."""
    try:
        descriptor = decode(name, text)
        schema_text = _schema_text(descriptor)
        if schema_text not in _vouched:  # an input schema no enqueue could be checked against
            _validator(descriptor.name, descriptor.version, schema_text)
    except DescriptorInvalidError:
        return True
    return (descriptor.published_at or 0) < published_before


def judged(descriptor: JobDescriptor, now: int) -> JobDescriptor:
    """A published descriptor as its job is shown: `stale` set as of `now`, and without the
    cron tasks the row carries (read apart: engine/tasks/published.py)."""
    seen = descriptor.published_at
    stale = seen is None or seen < now - STALE_AFTER_MS
    return descriptor.model_copy(update={"stale": stale, "tasks": None})


def app_modules(registry: JobRegistry) -> list[str]:
    """The modules that declare the registry's jobs: importing one registers its jobs, so each
    is what `--app` names to get them back. The engine's own jobs are left out: every worker
    registers them."""
    return sorted({d.fn.__module__ for d in registry if d.name not in INTERNAL_JOBS})


def described_rows(
    registry: JobRegistry,
    apps: Sequence[str],
    retention: Callable[[str], RetentionInfo] | None = None,
) -> list[tuple[JobDescriptor, str]]:
    """Each job's descriptor as a worker publishes it, with the module declaring the job: with
    the retention it prunes that job by (`retention(name)`; None: it does not prune). A job
    whose input model cannot be described as JSON Schema (a bug in the app) is left out, with
    the reason in the log."""
    found: list[tuple[JobDescriptor, str]] = []
    for definition in registry:
        try:
            described = definition.describe()
            if retention is not None:
                kept = retention(definition.name)
                described = described.model_copy(update={"retention": kept})
            found.append((to_publish(described, apps), definition.fn.__module__))
        except Exception as exc:
            logger.warning(
                "job %s not published: its descriptor cannot be built: %s", definition.name, exc
            )
    return found


def input_validator(descriptor: JobDescriptor) -> Draft202012Validator:
    """The validator of `descriptor`'s input schema; DESCRIPTOR_INVALID when it is none."""
    return _validator(descriptor.name, descriptor.version, _schema_text(descriptor))


def _schema_text(descriptor: JobDescriptor) -> str:
    return json.dumps(descriptor.input_schema, sort_keys=True)


# The input schemas pydantic made for this process's own jobs (`vouch_for`), as `_schema_text`
# spells them: a pruner's pass finds its own workers' rows valid without importing jsonschema.
_vouched: set[str] = set()


def vouch_for(registry: JobRegistry) -> None:
    """Take the input schemas of `registry`'s jobs as valid when `forgettable` meets them."""
    for definition in registry:
        try:
            _vouched.add(_schema_text(definition.describe()))
        except Exception:  # a job left unpublished: described_rows logs why
            continue


@lru_cache(maxsize=256)
def _validator(name: str, version: str | None, schema_text: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_text)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise DescriptorInvalidError(name, f"input_schema: {exc.message}") from exc
    return Draft202012Validator(schema)


def field_errors(errors: Iterable[SchemaViolation]) -> list[dict[str, Any]]:
    """JSON Schema violations in the shape pydantic's are reported in (loc, msg, type): a
    missing field and an unknown one are named by their own location, as pydantic names them."""
    found: list[dict[str, Any]] = []
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        loc = list(error.absolute_path)
        instance = error.instance
        required = error.validator_value
        schema = error.schema
        if error.validator == "required" and isinstance(instance, dict):
            for field in required if isinstance(required, list) else []:
                if field not in instance:
                    found.append({"loc": [*loc, field], "msg": "Field required", "type": "missing"})
        elif error.validator == "additionalProperties" and isinstance(instance, dict):
            known = set(schema.get("properties", {})) if isinstance(schema, Mapping) else set()
            for field in instance:
                if field not in known:
                    found.append(
                        {
                            "loc": [*loc, field],
                            "msg": "Extra inputs are not permitted",
                            "type": "extra_forbidden",
                        }
                    )
        else:
            found.append({"loc": loc, "msg": error.message, "type": str(error.validator)})
    return found


def validate_input(descriptor: JobDescriptor, input: object) -> dict[str, Any]:
    """`input` checked against the published input schema, as JSON (no coercion: what the
    worker's model will parse is what is sent); JOB_INPUT_INVALID lists every failing field."""
    if not isinstance(input, Mapping):
        errors = [{"loc": [], "msg": f"Input should be an object, not {short_repr(input)}",
                   "type": "model_type"}]  # fmt: skip
        raise JobInputInvalidError(descriptor.name, errors)
    value = dict(input)
    errors = field_errors(input_validator(descriptor).iter_errors(value))
    if errors:
        raise JobInputInvalidError(descriptor.name, errors)
    return value


__all__ = [
    "DESCRIPTOR_EXPIRY_MS",
    "PUBLISH_EVERY_BEATS",
    "STALE_AFTER_MS",
    "DescriptorInvalidError",
    "IdempotencyKeyMissingError",
    "app_modules",
    "decode",
    "described_rows",
    "encode",
    "from_registry",
    "judged",
    "stamped",
    "to_publish",
    "validate_input",
    "version_of",
]
