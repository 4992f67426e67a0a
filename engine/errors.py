"""One error tree and its registry.

Every error has a stable `code`, a `title`, a `cause` built from the values at hand, and a `fix`
that is ONE line to run or apply verbatim (a command or a tool call; explanations go in `cause`).
Subclasses register their code when the class is created; a second class claiming a code fails at
import, so a code is declared in exactly one place.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

from engine.command_line import END_OF_OPTIONS
from engine.extras import upgrade_line
from engine.iso_time import iso
from engine.meant import meant_note
from engine.shell_words import shell_word
from schemas.errors import ErrorPayload, NextCall, RetryClass

REGISTRY: dict[str, type[JobsError]] = {}


class ErrorCodeTakenError(RuntimeError):
    """Raised at import when two error classes claim one code."""


class JobsError(Exception):
    """Base of every error the engine raises on purpose."""

    code: ClassVar[str] = ""
    title: ClassVar[str] = ""
    retry: ClassVar[RetryClass] = "terminal"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if not code:
            return  # an abstract intermediate class
        taken = REGISTRY.get(code)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise ErrorCodeTakenError(
                f"error code {code} is declared by {taken.__module__}.{taken.__qualname__} "
                f"and again by {cls.__module__}.{cls.__qualname__}"
            )
        REGISTRY[code] = cls

    def __init__(
        self,
        cause: str,
        fix: str,
        *,
        next_call: NextCall | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{self.code}: {cause}")
        self.cause = cause
        self.fix = fix
        self.next_call = next_call
        self.details: dict[str, Any] | None = dict(details) if details is not None else None

    @property
    def retryable(self) -> bool:
        return self.retry == "transient"

    def to_payload(self) -> ErrorPayload:
        return ErrorPayload(
            code=self.code,
            title=self.title,
            cause=self.cause,
            fix=self.fix,
            retryable=self.retryable,
            next_call=self.next_call,
            details=self.details,
        )


def _call(tool: str, **arguments: Any) -> NextCall:
    return NextCall(tool=tool, arguments={k: v for k, v in arguments.items() if v is not None})


def listed_names(known: Sequence[str]) -> str:
    return ", ".join(sorted(known)) if known else "none"


# An error never echoes more than this much of a caller's value (a 10 MB argument must not
# come back as a 20 MB answer).
ECHO_LIMIT = 200


def short_repr(value: object, limit: int = ECHO_LIMIT) -> str:
    """`repr(value)` cut to `limit` characters, with a marker saying how much was left out."""
    text = repr(value) if not isinstance(value, str) or len(value) <= limit else repr(value[:limit])
    if isinstance(value, str) and len(value) > limit:
        return f"{text}… ({len(value)} characters in all)"
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text)} characters in all)"
    return text


def quoted(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` as a JSON string (control characters escaped: no forged line, no terminal
    escape), cut to `limit` characters with a marker saying how much was left out."""
    shown = json.dumps(text[:limit], ensure_ascii=False)
    return shown if len(text) <= limit else f"{shown}… ({len(text)} characters in all)"


# --- declarations -------------------------------------------------------------------------------


class IdempotencyRequiredError(JobsError):
    code = "IDEMPOTENCY_REQUIRED"
    title = "a job was declared without an idempotency key"

    def __init__(self, job: str, key: str | None = None) -> None:
        """`key`: a key function, as code, over the job's input (engine.declare builds it from
        the input model's fields); without it, one over an `id` field."""
        function = key if key is not None else f"lambda i: f{f'{job}:{{i.id}}'!r}"
        super().__init__(
            f'job "{job}" has no idempotency_key; without one a redelivered enqueue runs twice',
            f"@job(name={json.dumps(job, ensure_ascii=False)}, idempotency_key={function})",
            details={"job": job},
        )


class JobNameTakenError(JobsError):
    code = "JOB_NAME_TAKEN"
    title = "two jobs were declared under one name"

    def __init__(self, job: str, first: str, second: str) -> None:
        """`first`, `second`: where each is declared (engine.registry.Site)."""
        renamed = json.dumps(f"{job}_v2", ensure_ascii=False)
        super().__init__(
            f'job name "{job}" is declared by {first} and again by {second}; a name runs one '
            "function, so the second was refused: give one of them a name of its own",
            f"@job(name={renamed})",
            details={"job": job, "first": first, "second": second},
        )


# The keywords of `@job(...)` (engine.declare.job; a test pins the two together).
JOB_KEYWORDS = frozenset(
    {
        "idempotency_key",
        "name",
        "queue",
        "retry",
        "timeout",
        "concurrency",
        "tenant_required",
        "description",
        "registry",
        "retention",
        "rate_limit",
        "priority",
    }
)


class JobDeclarationInvalidError(JobsError):
    code = "JOB_DECLARATION_INVALID"
    title = "a job declaration has a value that can never work"

    def __init__(
        self, job: str, field: str, value: object, expected: str, mended: str | None = None
    ) -> None:
        """`mended`: the declared keyword's value mended, as code (`field` "retry.attempts"
        mends `retry=`); for what is no keyword of `@job` (the body's signature, its input's
        annotation), the line that replaces the one declared (a `def`, an import)."""
        keyword = field.partition(".")[0]
        if keyword == "name":  # the name itself mended: named once
            written = mended if mended is not None else f"<{expected}>"
            fix = f"@job(name={written})"
        elif keyword in JOB_KEYWORDS:
            written = mended if mended is not None else f"<{expected}>"
            fix = f"@job(name={json.dumps(job, ensure_ascii=False)}, {keyword}={written})"
        else:
            fix = mended if mended is not None else expected
        super().__init__(
            f'job "{job}" declares {field}={value!r}; {field} must be {expected}',
            fix,
            details={"job": job, "field": field, "value": repr(value)},
        )


# --- enqueue ------------------------------------------------------------------------------------


# The refusals of a name nothing has (JOB_UNKNOWN, QUEUE_UNKNOWN, …), by the detail that holds the
# name as given; a face mends its call from it and the name `meant`.
NAMED = {
    "JOB_UNKNOWN": "job",
    "QUEUE_UNKNOWN": "queue",
    "BACKFILL_UNKNOWN": "backfill",
    "ERROR_CODE_UNKNOWN": "error_code",
}


class JobUnknownError(JobsError):
    code = "JOB_UNKNOWN"
    title = "no job is registered under this name"

    def __init__(
        self,
        job: str,
        known: Sequence[str],
        *,
        paused: Sequence[str] = (),
        stored: Sequence[str] = (),
    ) -> None:
        """`paused`: names paused though nothing is registered under them (a resume's); `stored`:
        names the newest job rows hold though nothing here registers them (a face run without
        its app). Each is listed apart; a stored name is meant only when no other one is."""
        hint, meant = meant_note(job, [*known, *paused])
        if not meant and stored:
            hint, meant = meant_note(job, stored)
        also = {"paused": sorted(paused)} if paused else {}
        if stored:
            also["stored"] = sorted(stored)
        listed = f"; paused: {listed_names(paused)}" if paused else ""
        listed += f"; in the store: {listed_names(stored)}" if stored else ""
        super().__init__(
            f"no job named {quoted(job)} is registered here{hint} (registered: "
            f"{listed_names(known)}{listed})",
            "mcp-jobs jobs describe --json",
            next_call=_call("describe_jobs"),
            details={"job": job, "known": sorted(known), **also, **meant},
        )


def describe_line(job: str) -> str:
    """The command describing `job` (what its input takes): a line each face writes its
    context into (a Python caller on `memory://` gets `await jobs.describe(...)`, an MCP
    caller the `describe_jobs` call beside it), never a tool call a shell cannot run."""
    if job.startswith("-"):  # else read as an option: past `--` every word is a name
        return f"mcp-jobs jobs describe --json {END_OF_OPTIONS} {shell_word(job)}"
    return f"mcp-jobs jobs describe {shell_word(job)} --json"


class JobInputInvalidError(JobsError):
    code = "JOB_INPUT_INVALID"
    title = "the input does not match the job's model"

    def __init__(self, job: str, errors: Sequence[Mapping[str, Any]]) -> None:
        first = errors[0] if errors else {"loc": (), "msg": "invalid"}
        where = ".".join(str(p) for p in first.get("loc", ())) or "input"
        super().__init__(
            f'input for "{job}" is invalid at {where}: {first.get("msg")} '
            f"({len(errors)} error(s) in all)",
            describe_line(job),
            next_call=_call("describe_jobs", name=job),
            details={"job": job, "errors": [dict(e) for e in errors]},
        )


class JobTenantRequiredError(JobsError):
    code = "JOB_TENANT_REQUIRED"
    title = "this job must be enqueued for a tenant"

    def __init__(self, job: str) -> None:
        super().__init__(
            f'job "{job}" is declared tenant_required and the enqueue named no tenant',
            # A Python caller's line (the MCP layer mends the caller's own call instead).
            f'await jobs.enqueue("{job}", input, tenant_id="<tenant>")',
        )


class JobDuplicateError(JobsError):
    code = "JOB_DUPLICATE"
    title = "a live job already holds this idempotency key"

    def __init__(self, job: str, key: str, existing_id: str, tenant_id: str | None) -> None:
        super().__init__(
            f'job "{job}" already has a live run {existing_id} for key "{key}"'
            f" in tenant {tenant_id or '(none)'}, and one key holds one live job: a second (an "
            "enqueue with on_conflict='error', or a retry or rerun of a settled job of this key) "
            "is refused",
            f"mcp-jobs jobs show {existing_id} --json",
            next_call=_call("inspect_job", job_id=existing_id),
            details={"job_id": existing_id},
        )


class JobDuplicateInBatchError(JobDuplicateError):
    """JOB_DUPLICATE where the holder is an earlier item of the same refused batch: no job of
    the batch was stored, so the error names the two items, not a job id."""

    def __init__(self, job: str, key: str, holder: int, refused: int) -> None:
        JobsError.__init__(
            self,
            f'items[{refused}] (job "{job}", key "{key}", on_conflict=\'error\') repeats the key '
            f"of items[{holder}] of the same enqueue_many, so the batch was refused and nothing "
            "of it stored",
            f'drop items[{refused}] from the batch, or give it on_conflict="dedupe" to share '
            f"items[{holder}]'s job",
            details={"job": job, "key": key, "items": [holder, refused]},
        )


# --- id-addressed operations --------------------------------------------------------------------


_ID_DIGITS = 32
_ID_WITHIN = re.compile(rf"(?<![0-9a-fA-F])[0-9a-fA-F]{{{_ID_DIGITS}}}(?![0-9a-fA-F])")


def id_within(text: str) -> str | None:
    """The one job id `text` holds beside what no id has (spaces, quotes, a word such as
    "job", capitals), lower-cased; None when it holds none or several, or is that id already."""
    found = [str(held).lower() for held in _ID_WITHIN.findall(text[:ECHO_LIMIT])]
    return found[0] if len(found) == 1 and found[0] != text else None


def _not_an_id(text: str) -> str:
    """Why `text` can be no job's id, when it cannot (cut short, or not lower-case hex)."""
    hex_digits = all(c in "0123456789abcdef" for c in text)
    if len(text) == _ID_DIGITS and hex_digits:
        return ""
    shape = f"{len(text)} characters" + ("" if hex_digits else ", not all lower-case hex")
    inner = id_within(text)
    held = f"; the id it holds is {inner}" if inner is not None else ""
    return (
        f" (a job id is {_ID_DIGITS} lower-case hex digits, whole, as enqueue_job and list_jobs "
        f"give it; this is {shape}{held})"
    )


class JobNotFoundError(JobsError):
    code = "JOB_NOT_FOUND"
    title = "no job with this id (in this tenant)"

    def __init__(self, job_id: str, tenant_id: str | None = None) -> None:
        self.job_id = job_id  # as the caller gave it: a face mends its call from it
        self.tenant_id = tenant_id
        # The whole id of the one job `job_id` begins (a cut-short id), once a lookup found it.
        self.begun: str | None = None
        scope = f" in tenant {tenant_id}" if tenant_id is not None else ""
        super().__init__(
            f"no job {job_id}{scope}{_not_an_id(job_id)}{_made_at(job_id)}",
            "mcp-jobs jobs ls --json",
            next_call=_call("list_jobs", tenant_id=tenant_id),
        )

    @property
    def meant_id(self) -> str | None:
        """The one job id the text given stands for: the id it holds (`id_within`), or the
        whole id of the one job it begins; None when it stands for none or several."""
        return self.begun or id_within(self.job_id)

    @property
    def id_prefix(self) -> str | None:
        """The text given as the start of an id (at least ID_PREFIX_DIGITS lower-case hex digits
        once blanks and capitals are set aside), else None."""
        text = self.job_id.strip().lower()
        hex_digits = all(c in "0123456789abcdef" for c in text)
        return text if hex_digits and ID_PREFIX_DIGITS <= len(text) < _ID_DIGITS else None

    def begins(self, whole: str) -> None:
        """The one job whose id `job_id` begins is `whole`: said in the cause, mended by faces."""
        self.begun = whole
        self.cause += f"; the one job whose id begins {self.id_prefix} is {whole}"


# Fewer hex digits than this are not looked up as the start of an id: the first 12 are the
# millisecond an id was made, and 8 narrow it to about a minute.
ID_PREFIX_DIGITS = 8


def _made_at(job_id: str) -> str:
    """When a well-formed id was made (its first 48 bits, engine.ids), and that retention
    prunes settled jobs: an id an agent was handed is more often pruned than mistyped. Nothing
    for an id no job was made with (malformed, before 2001, or ahead of this clock)."""
    if len(job_id) != _ID_DIGITS or not all(c in "0123456789abcdef" for c in job_id):
        return ""
    made = int(job_id[:12], 16)
    now = time.time_ns() // 1_000_000
    if not 10**12 <= made <= now + 86_400_000:
        return ""
    if now - made < _RECENT_ID_MS:  # no default retention prunes a job this young
        return (
            f"; its id was made at {iso(made)}, too recently for the default retention to have "
            "pruned it (a db prune --older-than or a retention set shorter may have)"
        )
    return (
        f"; its id was made at {iso(made)}: it may have been pruned by retention once it "
        "settled (by default done and cancelled jobs are kept 7 days, failed and dead 30)"
    )


# Younger than this, an id is not said to be pruned by the default retention (7 days at least);
# an operator's prune or a shorter retention still may have, and the cause says so.
_RECENT_ID_MS = 86_400_000


class JobNotRetryableError(JobsError):
    code = "JOB_NOT_RETRYABLE"
    title = "this job is not in a state a retry can requeue"

    def __init__(self, job_id: str, state: str, *, rerun: bool = False) -> None:
        if state == "cancelled":
            cause = f"job {job_id} was cancelled; a plain retry does not resurrect cancelled work"
            fix = f"mcp-jobs jobs retry {job_id} --include-cancelled"
            call = _call("retry_job", job_id=job_id, include_cancelled=True)
        else:
            # A rerun from a step also takes a done job (engine/reruns.py).
            allowed = (
                "failed, dead or done jobs can be rerun"
                if rerun
                else "failed, dead or delayed jobs can be retried (a delayed one runs now)"
            )
            cause = f"job {job_id} is {state}; only {allowed}"
            fix = f"mcp-jobs jobs show {job_id} --json"
            call = _call("inspect_job", job_id=job_id)
        super().__init__(cause, fix, next_call=call, details={"job_id": job_id, "state": state})


class JobNotCancellableError(JobsError):
    code = "JOB_NOT_CANCELLABLE"
    title = "this job has already settled"

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(
            f"job {job_id} is {state}; only a live job (ready, delayed, running, suspended) "
            "can be cancelled",
            f"mcp-jobs jobs show {job_id} --json",
            next_call=_call("inspect_job", job_id=job_id),
            details={"job_id": job_id, "state": state},
        )


class RerunStepUnknownError(JobsError):
    code = "STEP_UNKNOWN"
    title = "the run has no stored step of this name to rerun from"

    def __init__(self, job_id: str, run_id: str, step: str, known: Sequence[str]) -> None:
        # A rerun is a write, so a guessed one is shown in the fix only; the next call reads the
        # run's steps. Never the first step as a fallback: that reruns every side effect.
        hint, meant = meant_note(step, known)
        cause = (
            f'run {run_id} of job {job_id} has no step "{step}"{hint}; its steps, in order: '
            f"{', '.join(known) if known else 'none'}"
        )
        if meant:
            fix = f"mcp-jobs jobs retry {job_id} --from-step {shell_word(meant['meant'])}"
        else:
            fix = f"mcp-jobs jobs show {job_id} --json"
        super().__init__(
            cause,
            fix,
            next_call=_call("inspect_job", job_id=job_id),
            details={
                "job_id": job_id,
                "run_id": run_id,
                "step": step,
                "steps": list(known),
                **meant,
            },
        )


class RerunStepUnreachedError(JobsError):
    code = "STEP_NOT_RERUNNABLE"
    title = "a step before the rerun point did not complete, so it cannot be kept"

    def __init__(self, job_id: str, run_id: str, step: str, first_open: str, status: str) -> None:
        super().__init__(
            f'step "{step}" of run {run_id} comes after step "{first_open}", which is '
            f"{status}, not completed; a rerun keeps only completed steps before its point, "
            f'so it can start at "{first_open}" or earlier',
            f"mcp-jobs jobs retry {job_id} --from-step {shell_word(first_open)}",
            next_call=_call("retry_job", job_id=job_id, from_step=first_open),
            details={"job_id": job_id, "run_id": run_id, "step": step, "first_open": first_open},
        )


# --- execution ----------------------------------------------------------------------------------


class StepDuplicateError(JobsError):
    code = "STEP_DUPLICATE"
    title = "two steps in one run share a name"

    def __init__(self, job: str, step: str) -> None:
        super().__init__(
            f'job "{job}" ran step "{step}" twice in one run; replay could not tell their '
            "results apart",
            f'ctx.step.run("{step}-2", ...)',
        )


class JobOutputInvalidError(JobsError):
    code = "JOB_OUTPUT_INVALID"
    title = "a job or step returned a value outside strict JSON"

    def __init__(self, job: str, origin: str, path: str, reason: str) -> None:
        # `origin` is "the job" or 'step "name"'; `path` is a JSON path such as $.rows[3].name.
        super().__init__(
            f'{origin} of job "{job}" returned a value that cannot be stored: {reason} at {path}',
            f"return strict JSON from {origin} (no NaN or Infinity, no NUL character, "
            "no lone surrogate)",
            details={"job": job, "origin": origin, "path": path, "reason": reason},
        )


class JobOutputTooLargeError(JobOutputInvalidError):
    """JOB_OUTPUT_INVALID for a value past the bound a job's input has (engine.bounds): what the
    database would hold for every read of the job, and what a NATS value cannot."""

    def __init__(
        self, job: str, origin: str, size: int, bound: int, setting: str, ceiling: int
    ) -> None:
        """`setting`: the environment variable that sets `bound`, up to `ceiling`."""
        fix = (
            f"export {setting}={size}"
            if size <= ceiling
            else f"return from {origin} a reference to the data (a key, a URL), not the data"
        )
        JobsError.__init__(
            self,
            f'{origin} of job "{job}" returned {size} bytes of JSON, past the bound of {bound} '
            f"bytes on a job's input, output and step results (set by {setting}, at most "
            f"{ceiling}); nothing of it was stored",
            fix,
            details={"job": job, "origin": origin, "size": size, "bound": bound},
        )


class IdempotencyKeyFailedError(JobsError):
    code = "IDEMPOTENCY_KEY_FAILED"
    title = "the job's idempotency_key function raised"

    def __init__(self, job: str, exc: BaseException) -> None:
        detail = short_repr(str(exc))
        super().__init__(
            f'the idempotency_key function of job "{job}" raised {type(exc).__name__}: {detail}; '
            "nothing was enqueued",
            describe_line(job),
            next_call=_call("describe_jobs", name=job),
            details={"job": job, "exception": type(exc).__name__},
        )


class JobTimeoutError(JobsError):
    code = "JOB_TIMEOUT"
    title = "the job ran past its timeout and was cancelled"
    retry = "transient"

    def __init__(self, job: str, timeout_ms: int) -> None:
        super().__init__(
            f'job "{job}" ran longer than its timeout of {timeout_ms} ms and was cancelled '
            "before it was handed back",
            f'@job(timeout={max(1, timeout_ms * 2 // 1000)}) on "{job}"',
        )


class JobSlotLostError(JobsError):
    code = "JOB_SLOT_LOST"
    title = "this worker no longer holds the job's lease"
    retry = "transient"

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id} is no longer leased to this worker (lease expired, job cancelled or "
            "claimed by another worker); its result was not written",
            f"mcp-jobs jobs show {job_id} --json",
            next_call=_call("inspect_job", job_id=job_id),
        )


class JobCancelledError(JobsError):
    code = "JOB_CANCELLED"
    title = "the job was cancelled while it ran"

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id} was cancelled by an operator while it ran; its body was stopped",
            f"mcp-jobs jobs retry {job_id} --include-cancelled",
        )


class JobRowStatusUnknownError(JobsError):
    code = "JOB_ROW_STATUS_UNKNOWN"
    title = "a stored row carries a status this build does not know"

    def __init__(self, table: str, column: str, value: str, known: Sequence[str]) -> None:
        super().__init__(
            f'{table}.{column} holds "{value}", which this build does not know (it reads '
            f"{', '.join(known)}); a newer deploy almost certainly wrote it",
            upgrade_line(),
            details={"table": table, "column": column, "value": value},
        )


class JobFailedError(JobsError):
    code = "JOB_FAILED"
    title = "the job's body raised"

    def __init__(
        self, job_id: str, cause: str, exception: str | None = None, trace: str | None = None
    ) -> None:
        # `cause` is the exception's type and text, already made storable by the caller, and
        # `trace` its bounded traceback (engine.run_job.failure_traceback).
        details: dict[str, Any] | None = None
        if exception:
            details = {"job_id": job_id, "exception": exception}
            if trace is not None:
                details["traceback"] = trace
        super().__init__(
            cause,
            f"mcp-jobs jobs show {job_id} --json",
            next_call=_call("inspect_job", job_id=job_id),
            details=details,
        )


# InvalidArgumentError.nearest when no value near the refused one is admitted.
NOTHING_NEAR: Any = object()


class FlagMend(JobsError):
    """A refusal the CLI mends by one of the command's flags (mcp_jobs/cli/mend.py), carrying
    `flag`, set to `nearest`, where the typed value was `typed` (or, with `set_anyway`, added
    when no flag gave the value: a default the command used). None: nothing to mend."""

    flag: str | None = None
    nearest: object = None
    typed: object = None
    set_anyway: bool = False

    def with_fix(self, fix: str) -> Self:
        # Not copy.copy: an exception is copied by calling its class with `args`.
        mended = type(self).__new__(type(self))
        mended.__dict__.update(self.__dict__)
        mended.args = self.args
        mended.fix = fix
        return mended


# InvalidArgumentError.nearest when the call runs without the argument: it was given where it
# has no use (a steps cursor with run_id), and leaving it out is the whole mend.
LEFT_OUT: Any = object()
# InvalidArgumentError.nearest when the call runs without this one of a repeated argument's
# values (`--per-queue nosuch=2` of several), keeping the others.
VALUE_LEFT_OUT: Any = object()


class InvalidArgumentError(JobsError):
    code = "INVALID_ARGUMENT"
    title = "an argument is out of bounds or of the wrong kind"
    # Whether its fix only says what to pass: a face that can write a line that runs may
    # replace it (a subclass with a fix of its own leaves this False).
    fix_said: bool = False

    def __init__(
        self,
        argument: str,
        value: object,
        expected: str,
        *,
        fix: str | None = None,
        next_call: NextCall | None = None,
        nearest: object = NOTHING_NEAR,
        missing: bool = False,
    ) -> None:
        """`fix`: a line that runs as given (the call mended), where the caller can make one.
        `nearest`: the value nearest to `value` that the check admits (a number's range end,
        the key the job computes), for a caller that can mend the call it was given."""
        # `missing`: the caller left the argument out, where "queue=None" would spell the
        # engine's Python for what the caller never wrote (a None a function returned is a value).
        refused = (
            f"no {argument} was given"
            if missing
            else f"{argument}={short_repr(value)} is not accepted"
        )
        super().__init__(
            f"{refused}; it must be {expected}",
            fix or f"pass {argument} as {expected}",
            next_call=next_call,
            details={"argument": argument, "expected": expected},
        )
        self.argument = argument
        self.value = value
        self.expected = expected
        self.nearest = nearest
        self.missing = missing
        self.fix_said = fix is None

    def mended(self, fix: str, next_call: NextCall | None = None) -> InvalidArgumentError:
        """The same refusal (as worded: "no queue was given" stays so) with a face's own fix."""
        return InvalidArgumentError(
            self.argument,
            self.value,
            self.expected,
            fix=fix,
            next_call=next_call,
            nearest=self.nearest,
            missing=self.missing,
        )


class CursorInvalidError(InvalidArgumentError):
    """A kind of INVALID_ARGUMENT (code apart, so an agent can tell it from a bad value): the
    text is not a cursor this server handed out, or it was cut or edited on the way back."""

    code = "CURSOR_INVALID"
    title = "a paging cursor that this server did not hand out"

    def __init__(
        self,
        argument: str,
        value: str,
        call: NextCall | None,
        handed: str = "a cursor from a previous page",
    ) -> None:
        """`handed`: what the cursor would have to be, in words."""
        # Without the call (a driver reached directly) the fix can only be said, not given.
        fix = (
            f"{call.tool} {_arguments_text(call.arguments)}"
            if call is not None
            else f"the same call without {argument}"
        )
        JobsError.__init__(
            self,
            f"{argument}={short_repr(value)} does not decode: it is not {handed}, or it was cut "
            "or changed. Start again from the first page",
            fix,
            next_call=call,
            details={"argument": argument, "expected": f"the {argument} of a previous answer"},
        )


class CursorOfAnotherListError(CursorInvalidError):
    """A cursor another list handed out (another method or tool, or another argument of this
    one): it pages that list only, so it is refused naming where it belongs, never read as a
    position in this one. The fix is `call`, this list's first page, written as `fix`. Here,
    CURSOR_INVALID naming a method of the Python API (a `jobs.list` page's given to
    `jobs.trace`); the MCP face's CURSOR_WRONG_TOOL names the tool (mcp_jobs/errors.py)."""

    # What hands a cursor out, as the cause and the details name it.
    handed_by = "method"

    def __init__(
        self, argument: str, value: str, owner: tuple[str, str], here: str, call: NextCall, fix: str
    ) -> None:
        owner_name, owner_argument = owner
        where = owner_name if owner_name != here else f"{owner_name}'s {owner_argument}"
        expected = f"the {argument} of a previous {here} answer"
        JobsError.__init__(
            self,
            f"{argument}={short_repr(value)} is a cursor {owner_name} handed out (its "
            f"{owner_argument}), not one of {here}'s {argument}: it pages only the list it came "
            f"from. Pass it back to {where}, or start {here} from its first page",
            fix,
            next_call=call,
            details={
                "argument": argument,
                "expected": expected,
                self.handed_by: owner_name,
                f"{self.handed_by}_argument": owner_argument,
            },
        )
        self.argument, self.value, self.expected = argument, value, expected
        self.nearest = NOTHING_NEAR
        self.fix_said = False


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), separators=(", ", ": "), ensure_ascii=False)


def type_name(value: object) -> str:
    """`value`'s type as a reader knows it: `str`, `sqlite3.Connection`, `asyncpg.pool.Pool`."""
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


class WorkerAlreadyRunningError(JobsError):
    """A second run of one Worker while it runs: two loops would claim into one worker's slots
    and state. Refused at the call, and the run going on is left as it was."""

    code = "WORKER_ALREADY_RUNNING"
    title = "this worker is already running"

    def __init__(self, worker_id: str, queues: Sequence[str] | None, call: str) -> None:
        claims = "every queue" if queues is None else f"queues {', '.join(queues) or '(none)'}"
        super().__init__(
            f"worker {worker_id} ({claims}) is already running, so {call} was refused: one Worker "
            "runs one loop at a time. Await or stop the run going on (a stopped worker starts "
            "again), or make another Worker(jobs) to run beside it",
            "await worker.stop()",
            details={"worker_id": worker_id, "queues": None if queues is None else list(queues)},
        )
