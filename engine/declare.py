"""`@job(...)`: declaring a job, and the registry that holds the declarations of this process.

A declaration is refused at the decorator when it could never be safe: no idempotency key (rule 1),
a concurrency that is not a whole number ≥ 1, an input annotation that is not a pydantic model,
a body that cannot be called as `body(input, ctx)`, a key function that cannot be called with
the input alone, a name the engine keeps for its own jobs (engine.internal_jobs). Each refusal's
fix is the declaration mended.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import sys
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

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
from engine.internal_jobs import enqueueable, reserved_for
from engine.rate_limits import RateLimit
from engine.registry import Registry, Site, caller_line, site
from engine.retention import Retention
from engine.retry import Retry, describe_retry
from schemas.descriptor import JobDescriptor

if TYPE_CHECKING:
    from engine.context import JobContext

InputT = TypeVar("InputT", bound=BaseModel)
JobFn = Callable[[InputT, "JobContext"], Awaitable[Any]]
# What `@job` takes: an async function (ctx positional or keyword-only), a partial of one, or an
# object with an async `__call__`; `_body` checks the shape and makes it a `JobFn`.
JobBody = Callable[..., Awaitable[Any]]

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
    # Where it was declared: the same site again is a module imported again, not a second job.
    declared_at: Site | None = None

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
            return bounds.key("idempotency_key", key)
        except InvalidArgumentError as exc:
            expected = (
                f"{exc.expected}; it is what the idempotency_key function of job "
                f'"{self.name}" returned for this input'
            )
            raise InvalidArgumentError(
                "idempotency_key", key, expected, fix=_key_declared(self.name, self.fn)
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

    def __init__(self) -> None:
        super().__init__()
        _EVERY_REGISTRY.add(self)

    def check(self, definition: object) -> JobDefinition[Any]:
        if not isinstance(definition, JobDefinition) or definition.origin is not _ORIGIN:
            name = getattr(definition, "name", "?")
            name = name if isinstance(name, str) else "?"
            raise JobDeclarationInvalidError(
                name, "definition", definition, "built by @job(...)", key_function_fix(name)
            )
        return definition

    def clash(
        self, existing: JobDefinition[Any], definition: JobDefinition[Any]
    ) -> JobsError | None:
        first, second = _site_of(existing), _site_of(definition)
        if first == second:
            return None
        return JobNameTakenError(definition.name, str(first), str(second))

    def unknown(self, name: str, known: Sequence[str]) -> JobsError:
        error = JobUnknownError(name, enqueueable(known))
        elsewhere = _declared_elsewhere(self, name)
        if elsewhere is not None:  # a client connected without the app's registry
            imported, registry = elsewhere
            error.cause += f'; "{name}" is declared on {registry}, which this client was not given'
            error.fix = f"{imported}jobs = await connect(url, registry={registry})"
            error.next_call = None
        return error


# Every registry alive, for a name one client was not given: its app's registry, left out.
_EVERY_REGISTRY: weakref.WeakSet[JobRegistry] = weakref.WeakSet()


def _declared_elsewhere(here: JobRegistry, name: str) -> tuple[str, str] | None:
    """(the import it needs, the expression) of the one other registry declaring `name`, as
    the module declaring the job holds it (`shop.registry`); None when none or several do, or
    it cannot be named."""
    holders = [r for r in list(_EVERY_REGISTRY) if r is not here and name in r]
    if len(holders) != 1:
        return None
    holder = holders[0]
    module = holder.require(name).fn.__module__
    found = getattr(sys.modules.get(module), "__dict__", {})
    held = [k for k, v in found.items() if v is holder]
    if not held:
        return None
    if module == "__main__":  # the script itself: the name is in scope as it is
        return "", held[0]
    return f"import {module}; ", f"{module}.{held[0]}"


def _site_of(definition: JobDefinition[Any]) -> Site:
    found = definition.declared_at
    return found if found is not None else Site(definition.qualified_name, "", "")


# The registry `@job` writes into. Importing an app module registers its jobs here.
default_registry = JobRegistry()


def key_function() -> str:
    """A key function, as code, that returns a usable key for any input: a digest of it."""
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
        near = exc.nearest if isinstance(exc.nearest, int) else 0
        raise JobDeclarationInvalidError(job, "priority", value, expected, str(near)) from None


def _declared_text(
    job: str, field_name: str, value: object, check: Callable[[str, object], str], mended: str
) -> None:
    # Checked once here, so an enqueue never sends the database a name or queue it refuses.
    # `check`: the bounds rule for this kind of name; `mended`: the fix's value where the
    # rule names none nearer (the characters it refuses dropped).
    try:
        check(field_name, value)
    except InvalidArgumentError as exc:
        expected = (exc.details or {}).get("expected", "a non-empty str")
        near = exc.nearest if isinstance(exc.nearest, str) else mended
        written = json.dumps(near, ensure_ascii=False)
        raise JobDeclarationInvalidError(job, field_name, value, expected, written) from exc


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


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_NAMED = (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)
_SIGNATURE = "async def f(input: Model, ctx), any other parameter with a default"


def _code_of(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function whose code a body runs: a partial's function, a callable object's bound
    `__call__`, else `fn`. Its module, name, globals and first line are the body's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn
    call = getattr(fn, "__call__", None)  # noqa: B004 - the bound method itself is wanted
    return call if inspect.ismethod(call) else fn


def one_argument(fn: Callable[..., Any]) -> str | None:
    """None when `fn` can be called with exactly one positional argument, as the engine calls a
    key function or a task's enqueue; else what it takes, in words. A callable without a
    signature (a builtin, a C type) is taken: nothing here can say it fails."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError:
        pass
    else:
        return None
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = [p for p in params if p.default is inspect.Parameter.empty and p.kind in _NAMED]
    if not positional and not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        shown = ", ".join(p.name for p in required)
        return f"it takes no positional argument{f' (only {shown} by keyword)' if shown else ''}"
    shown = ", ".join(p.name for p in required)
    return f"it needs {len(required)} arguments ({shown})"


def _default_name(fn: Callable[..., Any]) -> str:
    code = _code_of(fn)
    if code is fn or isinstance(fn, functools.partial):
        return str(getattr(code, "__name__", type(fn).__name__))
    return type(fn).__name__  # a callable object: its class


def _body(job: str, fn: Callable[..., Any]) -> tuple[type[BaseModel], JobFn[Any]]:
    """The input model of `fn` and `fn` as the engine calls it, `body(input, ctx)`: `fn` itself
    for a plain function, else an async function that passes `ctx` by keyword where `fn` takes
    it so, carrying the module, name and docstring of the code `fn` runs."""
    code = _code_of(fn)
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in _NAMED]
    except (TypeError, ValueError):  # a builtin without a signature
        params = []
    if inspect.isasyncgenfunction(code):
        # Already an async def: the slip is `yield`, and the mended def line would not show it.
        expected = "an async def that returns its result, not an async generator (no yield)"
        fix = "return the result instead of yielding it: replace `yield value` with `return value`"
        raise JobDeclarationInvalidError(job, "function", fn, expected, fix)
    if not inspect.iscoroutinefunction(code):
        mended = _mended_def(job, fn, _input_param(fn, params))
        raise JobDeclarationInvalidError(job, "function", fn, "an async def", mended)
    if (
        len(params) < 2
        or params[0].kind not in _POSITIONAL
        or any(p.default is inspect.Parameter.empty for p in params[2:])
    ):
        shown = ", ".join(p.name for p in params)
        mended = _mended_def(job, fn, _input_param(fn, params))
        raise JobDeclarationInvalidError(job, "signature", f"({shown})", _SIGNATURE, mended)
    model = _annotation(job, fn, params[0], _input_param(fn, params))
    ctx = params[1]
    if ctx.kind in _POSITIONAL and (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return model, fn
    keyword = ctx.name if ctx.kind is inspect.Parameter.KEYWORD_ONLY else None

    async def body(input: Any, ctx: JobContext) -> Any:
        return await (fn(input, **{keyword: ctx}) if keyword else fn(input, ctx))

    # A callable object is shown by its `__call__`, and described by its class's docstring.
    instance = inspect.ismethod(code) and code is not fn and not isinstance(fn, functools.partial)
    shown_by = code.__func__ if instance else code  # type: ignore[attr-defined]
    for attribute in ("__module__", "__name__", "__qualname__"):
        setattr(body, attribute, getattr(shown_by, attribute, getattr(body, attribute)))
    body.__doc__ = inspect.getdoc(fn if instance else code)
    body.__wrapped__ = fn  # type: ignore[attr-defined]
    return model, body


def _annotation(
    job: str, fn: Callable[..., Any], param: inspect.Parameter, meant: inspect.Parameter | None
) -> type[BaseModel]:
    """The model `param` is annotated with, resolved as `typing.get_type_hints` would, but only
    this one annotation: a `ctx: JobContext` imported under `if TYPE_CHECKING:` is no concern.
    `meant`: the parameter the input looks meant for (`_input_param`), for the mended line."""
    written = param.annotation
    model: object = None if written is inspect.Parameter.empty else written
    if isinstance(written, str):
        home = inspect.unwrap(_code_of(fn))
        namespace = getattr(home, "__globals__", None) or {}
        try:
            model = eval(written, namespace)  # the app's own annotation, as typing evaluates it
        except Exception as exc:
            missing = exc.name if isinstance(exc, NameError) and exc.name else written
            module = namespace.get("__name__", "?")
            expected = (
                f"a pydantic BaseModel subclass the module {module} holds when the job is "
                f"declared; {missing} is not defined there (define or import it above the job)"
            )
            fix = _mended_def(job, fn, meant) if _written_after(meant, param) else None
            raise JobDeclarationInvalidError(
                job, "input annotation", written, expected, fix or _import_of(missing)
            ) from None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        if _written_after(meant, param):
            mended = _mended_def(job, fn, meant)
        else:
            mended = _mended_def(job, fn, param, model_text=_model_slot(job))
        raise JobDeclarationInvalidError(
            job, "input annotation", model, "a pydantic BaseModel subclass", mended
        )
    return model


def _written_after(meant: inspect.Parameter | None, param: inspect.Parameter) -> bool:
    """Whether the input looks written after the context (`(ctx, data: Model)`): then the fix
    is the `def` line with the two in their order."""
    return meant is not None and meant is not param


def _holds_model(fn: Callable[..., Any], param: inspect.Parameter) -> bool:
    """Whether `param` is annotated with a pydantic model (a string one resolved in `fn`'s
    module, as `_annotation` resolves it; one that does not resolve is no model)."""
    written = param.annotation
    if isinstance(written, str):
        namespace = getattr(inspect.unwrap(_code_of(fn)), "__globals__", None) or {}
        try:
            written = eval(written, namespace)  # the app's own annotation, as typing evaluates it
        except Exception:
            return False
    return isinstance(written, type) and issubclass(written, BaseModel)


def _input_param(
    fn: Callable[..., Any], params: Sequence[inspect.Parameter]
) -> inspect.Parameter | None:
    """The parameter a mended `def` line keeps as the input: the one annotated with a model
    (wherever it was written), else the first not named as the context."""
    for param in params:
        if _holds_model(fn, param):
            return param
    return next((p for p in params if p.name != "ctx"), None)


def _import_of(name: str) -> str:
    """The import that gives a module the pydantic model `name`, where one loaded module
    defines it; else the model declared in its place (its fields left to write)."""
    homes: set[str] = set()
    for module in list(sys.modules.values()):
        found = getattr(module, "__dict__", {}).get(name)  # never a module's __getattr__
        defined_here = getattr(found, "__module__", None) == getattr(module, "__name__", None)
        if isinstance(found, type) and issubclass(found, BaseModel) and defined_here:
            homes.add(found.__module__)
    if len(homes) == 1 and name.isidentifier():
        return f"from {homes.pop()} import {name}"
    return f"class {name if name.isidentifier() else 'JobInput'}(BaseModel): ..."


def _model_slot(job: str) -> str:
    """A name for the model a job's input has none of: `ship_order` -> `ShipOrderInput`."""
    words = "".join(c if c.isalnum() else " " for c in job).split()
    named = "".join(w[:1].upper() + w[1:] for w in words)
    return f"{named}Input" if named.isidentifier() and not named[0].isdigit() else "JobInput"


def _mended_def(
    job: str, fn: Callable[..., Any], param: inspect.Parameter | None, model_text: str = ""
) -> str:
    """The `def` line `fn` is written as, mended to the shape of a job body: async, taking
    the input (its annotation kept where it has one) and then the context."""
    code = _code_of(fn)
    name = getattr(code, "__name__", "") or "body"
    name = name if name.isidentifier() else "body"
    before = "self, " if inspect.ismethod(code) else ""
    arg = param.name if param is not None else "input"
    arg = arg if arg.isidentifier() and arg != "ctx" else "input"  # ctx: the context's name
    if not model_text:
        written = None if param is None else param.annotation
        if isinstance(written, str) and written:
            model_text = written
        elif isinstance(written, type) and written is not inspect.Parameter.empty:
            model_text = written.__name__
        else:
            model_text = _model_slot(job)
    return f"async def {name}({before}{arg}: {model_text}, ctx: JobContext):"


def _key_fix(job: str, fn: Callable[..., Any] | None) -> str:
    """A key function, as code, over the fields of `fn`'s input model (up to three; a digest of
    the whole input for more, or a model that cannot be resolved)."""
    try:
        model = None if fn is None else _body(job, fn)[0]
    except JobsError:
        model = None
    names = [] if model is None else list(model.model_fields)
    if not 1 <= len(names) <= 3:
        return key_function()
    escaped = job.replace("{", "{{").replace("}", "}}")
    template = ":".join([escaped, *(f"{{i.{n}}}" for n in names)])
    return f"lambda i: f{template!r}"


def _key_declared(job: str, fn: Callable[..., Any]) -> str:
    """The `@job(...)` line that gives `job` a key function over its input's fields."""
    return f"@job(name={json.dumps(job, ensure_ascii=False)}, idempotency_key={_key_fix(job, fn)})"


def _text_key_fix(job: str, fn: Callable[..., Any], given: object) -> str:
    """A key function, as code, for a key declared as a value where a function was due: over
    the field it names (`"order_id"`), else over the input's fields. Never the value itself: one
    constant key would dedupe every enqueue of the job into the first live one."""
    try:
        model = _body(job, fn)[0]
    except JobsError:
        model = None
    if isinstance(given, str) and model is not None and given in model.model_fields:
        escaped = job.replace("{", "{{").replace("}", "}}")
        return f"lambda i: f{f'{escaped}:{{i.{given}}}'!r}"
    return _key_fix(job, fn)


def job(
    _bare: None = None,
    /,
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
) -> Callable[[JobBody], JobDefinition[Any]]:
    """Declare a durable job. `idempotency_key` computes the dedupe key from the input;
    `retention` keeps its settled rows longer or shorter than the worker's policy."""
    if _bare is not None:  # `@job` without parentheses: no key can have been given
        bare_name = _default_name(_bare) if callable(_bare) else "job"
        raise IdempotencyRequiredError(bare_name, _key_fix(bare_name, _bare))
    call = caller_line(1)

    def decorate(fn: JobBody) -> JobDefinition[Any]:
        # Only None means the function's own name: "" (a setting left blank) is refused.
        own_name = _default_name(fn)
        job_name = own_name if name is None else name
        _declared_text(own_name, "name", job_name, bounds.job_name, own_name or "job")
        reserved = reserved_for(job_name, _code_of(fn))
        if reserved is not None:
            # Taken, every enqueue by the name was JOB_INTERNAL and a backfill declared later
            # was JOB_NAME_TAKEN, its fix renaming the engine's job.
            allowed = own_name if reserved_for(own_name, None) is None else f"{own_name}_job"
            written = json.dumps(allowed, ensure_ascii=False)
            raise JobDeclarationInvalidError(job_name, "name", job_name, reserved, written)
        if idempotency_key is None:
            raise IdempotencyRequiredError(job_name, _key_fix(job_name, fn))
        if not callable(idempotency_key):
            raise JobDeclarationInvalidError(
                job_name,
                "idempotency_key",
                idempotency_key,
                "a function of the input returning its key",
                _text_key_fix(job_name, fn, idempotency_key),
            )
        takes = one_argument(idempotency_key)
        if takes is not None:
            # Taken, every enqueue failed with IDEMPOTENCY_KEY_FAILED: it is called with the input.
            expected = f"a function of one argument, the input, returning its key; {takes}"
            mended = _key_fix(job_name, fn)
            raise JobDeclarationInvalidError(
                job_name, "idempotency_key", idempotency_key, expected, mended
            )
        model, body = _body(job_name, fn)
        _declared_text(job_name, "queue", queue, bounds.queue_name, DEFAULT_QUEUE)
        description_declared(
            lambda expected: JobDeclarationInvalidError(
                job_name, "description", description, expected, "None"
            ),
            description,
        )
        if retry is not None and not isinstance(retry, Retry):
            raise JobDeclarationInvalidError(
                job_name, "retry", retry, "a Retry(...) or None", "Retry()"
            )
        policy = retry or Retry()
        policy.validate(job_name)
        if retention is not None and not isinstance(retention, Retention):
            raise JobDeclarationInvalidError(
                job_name, "retention", retention, "a Retention(...) or None", "None"
            )
        if retention is not None and retention.audit is not None:
            # Events of no job belong to no job's policy: the worker's Retention sets it.
            expected = "a Retention(...) without audit (a Worker's retention sets it)"
            mended = repr(dataclasses.replace(retention, audit=None))
            raise JobDeclarationInvalidError(job_name, "retention", retention, expected, mended)
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            expected = "a RateLimit(limit, per=seconds) or None"
            raise JobDeclarationInvalidError(job_name, "rate_limit", rate_limit, expected, "None")
        if registry is not None and not isinstance(registry, JobRegistry):
            expected = "a JobRegistry() or None (the process's default registry)"
            raise JobDeclarationInvalidError(job_name, "registry", registry, expected, "None")
        definition: JobDefinition[Any] = JobDefinition(
            name=job_name,
            fn=body,
            input_model=model,
            idempotency_key=idempotency_key,
            queue=queue,
            retry=policy,
            timeout_ms=_timeout_ms(job_name, timeout),
            concurrency=None if concurrency is None else _cap(job_name, "concurrency", concurrency),
            tenant_required=_flag(job_name, "tenant_required", tenant_required),
            description=description or inspect.getdoc(body),
            origin=_ORIGIN,
            retention=retention,
            rate_limit=rate_limit,
            priority=_priority(job_name, priority),
            declared_at=site(body, call),
        )
        (registry if registry is not None else default_registry).add(definition)
        return definition

    return decorate
