"""`@job(...)`: declaring a job, and the registry that holds the declarations of this process.

A declaration is refused at the decorator when it could never be safe: no idempotency key (rule 1),
a concurrency that is not a whole number ≥ 1, an input annotation that is not a pydantic model.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, RootModel

from engine import bounds
from engine.errors import (
    NOTHING_NEAR,
    IdempotencyKeyFailedError,
    IdempotencyRequiredError,
    InvalidArgumentError,
    JobDeclarationInvalidError,
    JobNameTakenError,
    JobsError,
    JobUnknownError,
)
from engine.rate_limits import RateLimit
from engine.registry import Registry
from engine.retention import Retention
from engine.retry import Retry, describe_retry
from schemas.descriptor import JobDescriptor

if TYPE_CHECKING:
    from engine.context import JobContext

InputT = TypeVar("InputT", bound=BaseModel)
JobFn = Callable[[InputT, "JobContext"], Awaitable[Any]]

DEFAULT_QUEUE = "default"

# Proof that `job()` built a definition: the registry accepts nothing else, so an object that
# merely looks like a job (same attributes) never registers and never runs.
_ORIGIN = object()


@dataclass(frozen=True, eq=False)
class JobDefinition(Generic[InputT]):
    name: str
    fn: JobFn[InputT]
    input_model: type[InputT]
    idempotency_key: Callable[[InputT], str]
    queue: str
    retry: Retry
    timeout_ms: int | None
    concurrency: int | None
    tenant_required: bool
    description: str | None
    origin: object = field(default=None, repr=False)
    # How long this job's settled rows are kept, where it differs from the worker's policy.
    retention: Retention | None = None
    # The priority its enqueues get unless one names its own (engine.rules.claim_rank).
    priority: int = 0
    # How many starts per period (engine.rate_limits), shared by every worker.
    rate_limit: RateLimit | None = None
    # What an enqueue validates against: `input_model`, refusing unknown fields unless the
    # model says otherwise (`strict_input_model`). Built once, at the decorator.
    enqueue_model: type[BaseModel] | None = None

    def __post_init__(self) -> None:
        if self.enqueue_model is None:
            object.__setattr__(self, "enqueue_model", strict_input_model(self.input_model))

    @property
    def qualified_name(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    async def __call__(self, input: InputT, ctx: JobContext) -> Any:
        return await self.fn(input, ctx)

    def key_for(self, input: InputT) -> str:
        """The dedupe key of `input`. The function raising is IDEMPOTENCY_KEY_FAILED (an engine
        error it raised on purpose stays itself); a result that cannot be a key is
        INVALID_ARGUMENT naming that result, whose fix is this job's key function."""
        try:
            key = self.idempotency_key(input)
        except JobsError:
            raise
        except Exception as exc:
            raise IdempotencyKeyFailedError(self.name, exc) from exc
        try:
            return bounds.text("idempotency_key", key, bounds.MAX_KEY_BYTES)
        except InvalidArgumentError as exc:
            expected = (
                f"{exc.expected}; it is what the idempotency_key function of job "
                f'"{self.name}" returned for this input'
            )
            raise InvalidArgumentError(
                "idempotency_key", key, expected, fix=key_function_fix(self.name)
            ) from None

    def parse_input(self, input: object) -> InputT:
        """`input` as this job's model, checked as an enqueue checks it: an instance of the
        model as is, anything else validated with unknown fields refused (unless the model
        allows or ignores them). ValidationError when it does not fit."""
        if isinstance(input, self.input_model):
            return input
        model = self.enqueue_model or self.input_model
        return model.model_validate(input)  # type: ignore[return-value]

    def describe(self) -> JobDescriptor:
        """What `describe_jobs`, the stats' rate limits and a worker's published descriptor say
        of this job. Built once: a definition never changes, and generating its input's JSON
        schema cost more than the rest of a `queue_stats` call."""
        return self._descriptor

    @cached_property
    def _descriptor(self) -> JobDescriptor:
        return JobDescriptor(
            name=self.name,
            queue=self.queue,
            description=self.description,
            input_schema=(self.enqueue_model or self.input_model).model_json_schema(),
            retry=describe_retry(self.retry),
            timeout_ms=self.timeout_ms,
            concurrency=self.concurrency,
            priority=self.priority,
            rate_limit=None if self.rate_limit is None else self.rate_limit.info(),
            tenant_required=self.tenant_required,
            idempotent=True,
        )


def strict_input_model(model: type[InputT]) -> type[InputT]:
    """The model an enqueue validates against: `model` itself when its config says what to do
    with unknown fields (`extra` set, on it or a base) or it has no fields to be unknown to (a
    RootModel); else a subclass that forbids them, so `{"order_id": 1, "priority": 5}` is
    JOB_INPUT_INVALID naming `priority` instead of `priority` being dropped. The subclass keeps
    the model's name, so its JSON schema differs only by `additionalProperties: false`.

    Only enqueue uses it: a worker decodes stored input with `model` as declared, so input
    stored before a field was removed (or before this rule) still runs."""
    if "extra" in model.model_config or issubclass(model, RootModel):
        return model
    namespace = {
        "model_config": ConfigDict(extra="forbid"),
        "__module__": model.__module__,
        "__qualname__": model.__qualname__,
        "__doc__": model.__doc__,
    }
    return type(model.__name__, (model,), namespace)


class JobRegistry(Registry[JobDefinition[Any]]):
    """The jobs this process can enqueue and run, by name."""

    def check(self, definition: object) -> JobDefinition[Any]:
        if not isinstance(definition, JobDefinition) or definition.origin is not _ORIGIN:
            raise JobDeclarationInvalidError(
                getattr(definition, "name", "?"), "definition", definition, "built by @job(...)"
            )
        return definition

    def clash(
        self, existing: JobDefinition[Any], definition: JobDefinition[Any]
    ) -> JobsError | None:
        if existing.qualified_name == definition.qualified_name:
            return None
        return JobNameTakenError(
            definition.name, existing.qualified_name, definition.qualified_name
        )

    def unknown(self, name: str, known: Sequence[str]) -> JobsError:
        return JobUnknownError(name, known)


# The registry `@job` writes into. Importing an app module registers its jobs here.
default_registry = JobRegistry()


def key_function(static: object = None) -> str:
    """A key function, as code, that returns a usable key for any input: `static` itself when
    it is a usable key (declared where a function was due), else a digest of the whole input."""
    try:
        return f"lambda i: {bounds.text('idempotency_key', static, bounds.MAX_KEY_BYTES)!r}"
    except InvalidArgumentError:
        return "lambda i: hashlib.sha256(i.model_dump_json().encode()).hexdigest()"


def key_function_fix(job: str) -> str:
    """The `@job(...)` line that gives `job` a key function returning a usable key."""
    return f"@job(name={json.dumps(job, ensure_ascii=False)}, idempotency_key={key_function()})"


def whole_declared(
    refuse: Callable[[str], JobsError],
    argument: str,
    value: object,
    low: int,
    high: int | None = None,
) -> int:
    """`bounds.whole` for a declaration, up to `high` (else `sys.maxsize`, which the refusal
    names: a larger whole number is refused too): a refusal is raised as the declaring kind's
    own error, `refuse(expected)`, instead of INVALID_ARGUMENT."""
    top = sys.maxsize if high is None else high
    try:
        return bounds.whole(argument, value, low, top)
    except InvalidArgumentError:
        raise refuse(f"a whole number from {low} to {top}") from None


def description_declared(refuse: Callable[[str], JobsError], value: object) -> None:
    """A declared description (None, or text: every descriptor carries it, and a descriptor
    that does not validate fails every describe_jobs answer), refused as the declaring kind's
    own error."""
    if value is None:
        return
    try:
        bounds.text("description", value, bounds.MAX_DESCRIPTION_BYTES)
    except InvalidArgumentError as exc:
        raise refuse((exc.details or {}).get("expected", "a str")) from None


def _cap(job: str, field_name: str, value: object) -> int:
    try:
        return bounds.cap(field_name, value)
    except InvalidArgumentError as exc:
        near = exc.nearest if exc.nearest is not NOTHING_NEAR else 1
        expected = f"a whole number from 1 to {bounds.MAX_CAP}, or None for no cap"
        raise JobDeclarationInvalidError(job, field_name, value, expected, str(near)) from None


def _priority(job: str, value: object) -> int:
    try:
        return bounds.priority("priority", value)
    except InvalidArgumentError as exc:
        expected = (exc.details or {}).get("expected", "a whole number")
        raise JobDeclarationInvalidError(job, "priority", value, expected) from None


def _declared_text(job: str, field_name: str, value: object, max_bytes: int) -> None:
    # Checked once here, so an enqueue never sends the database a name or queue it refuses.
    try:
        bounds.text(field_name, value, max_bytes)
    except InvalidArgumentError as exc:
        expected = (exc.details or {}).get("expected", "a non-empty str")
        raise JobDeclarationInvalidError(job, field_name, value, expected) from exc


def _timeout_ms(job: str, timeout: float | None) -> int | None:
    if timeout is None:
        return None
    most = bounds.MAX_DELAY_SECONDS
    expected = f"a number of seconds > 0 and at most {most} (10 years)"
    try:
        seconds = bounds.seconds("timeout", timeout)
    except InvalidArgumentError as exc:
        near = most if exc.nearest == most else 60
        raise JobDeclarationInvalidError(job, "timeout", timeout, expected, str(near)) from None
    if seconds <= 0:
        raise JobDeclarationInvalidError(job, "timeout", timeout, expected, "60")
    return max(1, int(seconds * 1000))


def _flag(job: str, field_name: str, value: object) -> bool:
    try:
        return bounds.flag(field_name, value)
    except InvalidArgumentError:
        # "false" and "0" are how a setting read from text says False.
        meant = str(value).strip().lower() not in {"false", "0", "no", "off", "", "none"}
        expected = "True or False"
        raise JobDeclarationInvalidError(job, field_name, value, expected, str(meant)) from None


def _input_model(job: str, fn: Callable[..., Any]) -> type[BaseModel]:
    params = list(inspect.signature(fn).parameters)
    if len(params) != 2:
        raise JobDeclarationInvalidError(
            job, "signature", f"{len(params)} parameters", "async def f(input: Model, ctx)"
        )
    hints = get_type_hints(fn)
    model = hints.get(params[0])
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise JobDeclarationInvalidError(
            job, "input annotation", model, "a pydantic BaseModel subclass"
        )
    return model


def job(
    *,
    idempotency_key: Callable[[Any], str] | None = None,
    name: str | None = None,
    queue: str = DEFAULT_QUEUE,
    retry: Retry | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
    tenant_required: bool = False,
    description: str | None = None,
    registry: JobRegistry | None = None,
    retention: Retention | None = None,
    rate_limit: RateLimit | None = None,
    priority: int = 0,
) -> Callable[[JobFn[Any]], JobDefinition[Any]]:
    """Declare a durable job. `idempotency_key` computes the dedupe key from the input;
    `retention` keeps its settled rows longer or shorter than the worker's policy."""

    def decorate(fn: JobFn[Any]) -> JobDefinition[Any]:
        # Only None means the function's own name: "" (a setting left blank) is refused.
        job_name = fn.__name__ if name is None else name
        _declared_text(fn.__name__, "name", job_name, bounds.MAX_NAME_BYTES)
        if idempotency_key is None:
            raise IdempotencyRequiredError(job_name)
        if not callable(idempotency_key):
            raise JobDeclarationInvalidError(
                job_name,
                "idempotency_key",
                idempotency_key,
                "a function of the input returning its key",
                key_function(idempotency_key),
            )
        if not inspect.iscoroutinefunction(fn):
            raise JobDeclarationInvalidError(job_name, "function", fn, "an async def")
        _declared_text(job_name, "queue", queue, bounds.MAX_QUEUE_BYTES)
        description_declared(
            lambda expected: JobDeclarationInvalidError(
                job_name, "description", description, expected
            ),
            description,
        )
        if retry is not None and not isinstance(retry, Retry):
            raise JobDeclarationInvalidError(job_name, "retry", retry, "a Retry(...) or None")
        policy = retry or Retry()
        policy.validate(job_name)
        if retention is not None and not isinstance(retention, Retention):
            raise JobDeclarationInvalidError(
                job_name, "retention", retention, "a Retention(...) or None"
            )
        if retention is not None and retention.audit is not None:
            # Events of no job belong to no job's policy: the worker's Retention sets it.
            expected = "a Retention(...) without audit (a Worker's retention sets it)"
            raise JobDeclarationInvalidError(job_name, "retention", retention, expected)
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise JobDeclarationInvalidError(
                job_name, "rate_limit", rate_limit, "a RateLimit(limit, per=seconds) or None"
            )
        definition: JobDefinition[Any] = JobDefinition(
            name=job_name,
            fn=fn,
            input_model=_input_model(job_name, fn),
            idempotency_key=idempotency_key,
            queue=queue,
            retry=policy,
            timeout_ms=_timeout_ms(job_name, timeout),
            concurrency=None if concurrency is None else _cap(job_name, "concurrency", concurrency),
            tenant_required=_flag(job_name, "tenant_required", tenant_required),
            description=description or inspect.getdoc(fn),
            origin=_ORIGIN,
            retention=retention,
            rate_limit=rate_limit,
            priority=_priority(job_name, priority),
        )
        (registry if registry is not None else default_registry).add(definition)
        return definition

    return decorate
