"""The errors the server and CLI raise themselves: limits, tenant pins, app loading, crashes.

Engine errors pass through untouched; these cover what only the front end can get wrong. Each
registers its code in the one engine registry, so a clash with an engine code fails at import.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import (
    NOTHING_NEAR,
    CursorOfAnotherListError,
    FlagMend,
    InvalidArgumentError,
    JobsError,
    short_repr,
)
from engine.extras import install_line, this_python, upgrade_line
from engine.meant import meant_note
from engine.shell_words import shell_word
from mcp_jobs.incidents import INCIDENT_DIR_ENV, incident_dir
from schemas.errors import NextCall

# 32 random bytes as 64 hex digits, what `openssl rand -hex 32` prints.
_TOKEN_MAKER = f"{this_python()} -c 'import secrets; print(secrets.token_hex(32))'"


class LimitExceededError(JobsError):
    code = "LIMIT_EXCEEDED"
    title = "an argument is over the server's limit"

    def __init__(
        self,
        argument: str,
        value: object,
        limit: int,
        unit: str,
        fix: str,
        next_call: NextCall | None = None,
        why: str = "",
    ) -> None:
        said = f"{argument} is {value} {unit}; this server accepts at most {limit} {unit}"
        super().__init__(
            f"{said} ({why})" if why else said,
            fix,
            next_call=next_call,
            details={"argument": argument, "value": value, "limit": limit, "unit": unit},
        )
        self.argument, self.value, self.limit, self.unit = argument, value, limit, unit
        self.why = why


def _pinned_by(pinned: str, claim: str | None, command: bool) -> str:
    """Who pins the caller to tenant `pinned`: the server (`serve --tenant`); under OAuth, the
    access token's `claim` (the server itself serves every tenant then); or, for a CLI
    `command`, its own `--tenant` (no server is involved)."""
    if claim is not None:
        return f'this access token is pinned to tenant "{pinned}" by its "{claim}" claim'
    if command:
        return f'this command\'s --tenant pins it to tenant "{pinned}"'
    return f'this server is pinned to tenant "{pinned}"'


class TenantPinnedError(JobsError):
    code = "TENANT_PINNED"
    title = "the caller is pinned to one tenant"

    def __init__(
        self,
        tool: str,
        pinned: str,
        asked: str,
        *,
        claim: str | None = None,
        command: bool = False,
    ) -> None:
        """The fix here names the tenant only: the MCP and CLI faces write the caller's own
        call in its place (`engine_refusal.mended`, `cli/mend.mended`), `asked` → `pinned`.
        `claim`: the access token's claim that pins it, when a token does; `command`: a CLI
        command pinned by its own --tenant."""
        super().__init__(
            f"{_pinned_by(pinned, claim, command)}; the call asked for tenant {short_repr(asked)}",
            f'{tool} {{"tenant_id": "{pinned}"}}',
            details={"tenant_id": pinned},
        )
        self.pinned, self.asked = pinned, asked


class TenantScopeExceededError(JobsError):
    code = "TENANT_SCOPE_EXCEEDED"
    title = "this operation spans every tenant and the caller is pinned to one"

    def __init__(
        self,
        operation: str,
        pinned: str,
        fix: str,
        *,
        agent: bool = False,
        claim: str | None = None,
        command: bool = False,
    ) -> None:
        # An agent is pinned so that it stays in one tenant: the fix is the operator's. A token
        # holder's user is not the server's operator either: the fix goes to the operator.
        if claim is not None:
            whose = "; the fix is the server operator's, over every tenant: ask them to run it"
        else:
            whose = "; the fix is an operator's, over every tenant: give it to the user"
        super().__init__(
            f"{operation} works across every tenant's data; {_pinned_by(pinned, claim, command)}"
            f"{whose if agent else ''}",
            fix,
            details={"tenant_id": pinned},
        )


class ToolArgumentsInvalidError(JobsError):
    code = "TOOL_ARGUMENTS_INVALID"
    title = "the tool's arguments do not match its input schema"

    def __init__(
        self,
        tool: str,
        errors: Sequence[Mapping[str, Any]],
        example: str,
        next_call: NextCall | None = None,
        mended: Mapping[str, Any] | None = None,
    ) -> None:
        # The arguments of the call the fix shows, where the strict model takes them (None: it
        # does not), for a check only the engine can make before the fix is given.
        self.mended = mended
        first = errors[0] if errors else {"loc": (), "msg": "invalid"}
        where = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
        super().__init__(
            f"{tool}: argument {where}: {first.get('msg')} ({len(errors)} error(s) in all)",
            f"{tool} {example}",
            next_call=next_call,
            details={"tool": tool, "errors": [dict(e) for e in errors]},
        )


class CommandLineInvalidError(InvalidArgumentError):
    """A command line the CLI's parser refuses (an unknown flag, a value of the wrong kind, a
    choice it does not offer), typed as every other refusal; the fix is the line mended when the
    caller can mend it (`fix`), else the command's help, which lists what it takes."""

    def __init__(self, command: str, message: str, *, fix: str | None = None) -> None:
        found = re.match(r"argument ([^:]+): ", message)
        argument = found[1].split("/")[0] if found else "command line"
        JobsError.__init__(
            self,
            f"{command}: {message}",
            fix or f"{command} --help",
            details={"argument": argument, "expected": message},
        )
        self.argument, self.value, self.expected = argument, None, message
        self.nearest = NOTHING_NEAR


class CursorWrongToolError(CursorOfAnotherListError):
    """A cursor another tool (or another argument of this one) handed out (a describe_jobs
    cursor is a name: a list_jobs cursor there paged from the wrong place). The fix is `call`,
    this tool's first page."""

    code = "CURSOR_WRONG_TOOL"
    title = "a paging cursor that another tool handed out"
    handed_by = "tool"

    def __init__(
        self, argument: str, value: str, owner: tuple[str, str], tool: str, call: NextCall
    ) -> None:
        fix = f"{call.tool} {example_call(call.arguments)}"
        super().__init__(argument, value, owner, tool, call, fix)


class ComputedKeyInvalidError(InvalidArgumentError):
    """INVALID_ARGUMENT for an input whose idempotency key, as its job computes it, is refused
    (too long): an enqueue_job call passes no key of its own, so what it can change is the
    input. `fields`: the input's fields the key holds that make it too long, longest first;
    the fix is the call with each of them a "<field>" slot (`slotted`), or with none found,
    the job's description. Its code is INVALID_ARGUMENT's; the class keeps the MCP mend from
    writing a slot for the whole input over that fix."""

    def __init__(
        self,
        job: str,
        key: str,
        expected: str,
        input: Mapping[str, Any],
        fields: Sequence[str],
        where: str | None,
    ) -> None:
        size = len(key.encode("utf-8", "surrogatepass"))
        made = f" ({where})" if where else ""
        cause = (
            f'the idempotency key job "{job}" computes from this input{made} is {size} bytes '
            f"({short_repr(key, 60)}); a key must be {expected}"
        )
        self.slotted: dict[str, Any] | None = None
        if fields:
            held = ", ".join(
                f"input.{f} ({len(str(input[f]).encode('utf-8', 'surrogatepass'))} bytes)"
                for f in fields
            )
            cause += f": shorten {held}, which the key holds"
            self.slotted = {**input, **{f: f"<{f}>" for f in fields}}
            fix = f"enqueue_job {example_call({'name': job, 'input': self.slotted})}"
            call = None
        else:
            cause += ": shorten what the key function reads of the input"
            fix = f"describe_jobs {example_call({'name': job})}"
            call = NextCall(tool="describe_jobs", arguments={"name": job})
        argument = f"input.{fields[0]}" if fields else "input"
        JobsError.__init__(
            self,
            cause,
            fix,
            next_call=call,
            details={"argument": argument, "expected": expected, "fields": list(fields)},
        )
        self.argument = argument
        self.value = input[fields[0]] if fields else dict(input)
        self.expected = expected
        self.nearest = NOTHING_NEAR


class AppImportError(JobsError):
    code = "APP_IMPORT_FAILED"
    title = "the application module could not be imported"

    def __init__(self, module: str, reason: str) -> None:
        # The import again, by the interpreter this package runs in, for the traceback; quoted,
        # though only a name `import` takes reaches here.
        super().__init__(
            # The module as --app or MCP_JOBS_APP named it: the cause does not say which.
            f'importing the app module "{module}" failed: {reason}',
            f"{this_python()} -c {shell_word(f'import {module}')}",
            details={"module": module},
        )


def new_token_line() -> str:
    """`export MCP_JOBS_TOKEN=<a new token>`, made by this Python (slim images have no openssl)."""
    return f"export MCP_JOBS_TOKEN=$({_TOKEN_MAKER})"


def token_file_line(path: str) -> str:
    """A new token written to `path`, readable by its owner alone: its directory made, and the
    mode set on a file that already exists, which a shell's umask would leave as it was."""
    write = (
        "import os, secrets, sys; p = sys.argv[1]; "
        'os.makedirs(os.path.dirname(p) or ".", exist_ok=True); '
        "fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600); os.fchmod(fd, 0o600); "
        'os.write(fd, (secrets.token_hex(32) + "\\n").encode())'
    )
    return f"{this_python()} -c {shell_word(write)} {shell_word(path)}"


# Where a fix keeps a new token: the README's file, owner-readable, read by server and clients.
TOKEN_FILE = ".mcp-jobs/token"


class TokenRequiredError(FlagMend):
    code = "HTTP_TOKEN_REQUIRED"
    title = "streamable HTTP needs a bearer token"

    def __init__(self, path: str = TOKEN_FILE) -> None:
        """The fix serves with the token file `path` (made absolute here), writing a new token
        to it first unless it holds one: a file every client reads too, which an exported
        MCP_JOBS_TOKEN is not. The CLI writes the command as typed with `--token-file`."""
        self.path = os.path.abspath(path)
        self.write_first = not _holds_token(self.path)
        super().__init__(
            "the HTTP transport refuses to start without a token (MCP_JOBS_TOKEN, or a file named "
            "by --token-file or MCP_JOBS_TOKEN_FILE): every request must carry "
            "`Authorization: Bearer <token>`",
            self._written(f"export MCP_JOBS_TOKEN_FILE={shell_word(self.path)}"),
        )
        self.flag, self.nearest, self.set_anyway = "--token-file", self.path, True

    def _written(self, then: str) -> str:
        return f"{token_file_line(self.path)} && {then}" if self.write_first else then

    def with_fix(self, fix: str) -> TokenRequiredError:
        return super().with_fix(self._written(fix))


def _holds_token(path: str) -> bool:
    try:
        return bool(Path(path).read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return False


class TokenFileExposedError(JobsError):
    code = "HTTP_TOKEN_FILE_EXPOSED"
    title = "the token file can be read by other users and the server listens beyond loopback"

    def __init__(self, path: str, mode: int, host: str) -> None:
        super().__init__(
            f"{token_file_exposure(path, mode)}; --host {host} listens beyond loopback, where "
            "that token admits anyone who can reach the port",
            f"chmod 600 {shell_word(path)}",
            details={"path": path, "mode": f"{mode:04o}", "host": host},
        )


def token_file_exposure(path: str, mode: int) -> str:
    """What is wrong with token file `path` of permission bits `mode`: said at start on
    loopback (a warning), refused beyond it (TokenFileExposedError)."""
    return f"token file {path} has mode {mode:04o}: its group or others can read the token"


class MetricsUnavailableError(JobsError):
    code = "METRICS_UNAVAILABLE"
    title = "this build has no metrics endpoint"

    def __init__(self) -> None:
        super().__init__(
            "--metrics-port needs engine.metrics.serve_metrics, which this installation lacks",
            upgrade_line(),
        )


class InternalError(JobsError):
    code = "INTERNAL"
    title = "the server failed unexpectedly"
    retry = "transient"

    def __init__(
        self, where: str, correlation_id: str, kept: Path | None, call: NextCall | None = None
    ) -> None:
        """`kept`: the file holding the traceback (`mcp_jobs.incidents`), None when it could not
        be written; the fix then sets a directory that can be, for the next one."""
        if kept is not None:
            cause = f"the traceback is in {kept}"
            fix = f"cat {shell_word(str(kept))}"
        else:
            writable = Path(tempfile.gettempdir()) / "mcp-jobs-incidents"
            cause = (
                f"{incident_dir()} cannot be written, so the traceback is only in the server's log"
            )
            fix = f"export {INCIDENT_DIR_ENV}={shell_word(str(writable))}"
        super().__init__(
            f"{where} failed with an unexpected error (correlation id {correlation_id}); {cause}",
            fix,
            next_call=call,
            details={"correlation_id": correlation_id},
        )


def example_call(arguments: Mapping[str, Any]) -> str:
    """A tool call written the way fix lines write them: `tool {"arg": value}`."""
    return json.dumps(dict(arguments), separators=(", ", ": "))


class TokenTooShortError(JobsError):
    code = "HTTP_TOKEN_TOO_SHORT"
    title = "a server reachable beyond loopback needs a token of at least 32 characters"

    def __init__(self, host: str, length: int, minimum: int, fix: str) -> None:
        super().__init__(
            f"--host {host} listens beyond loopback, where anyone who can reach the port can guess "
            f"at the token; it has {length} characters and must have at least {minimum}",
            fix,
            details={"host": host, "length": length, "minimum": minimum},
        )


class TokenFileError(JobsError):
    code = "HTTP_TOKEN_FILE_UNREADABLE"
    title = "the token file cannot be read or is empty"

    def __init__(self, path: str, reason: str, fix: str) -> None:
        super().__init__(f"token file {path}: {reason}", fix, details={"path": path})


class TokenConflictError(JobsError):
    code = "HTTP_TOKEN_CONFLICT"
    title = "both MCP_JOBS_TOKEN and a token file are set"

    def __init__(self, path: str) -> None:
        super().__init__(
            f"MCP_JOBS_TOKEN is set and so is a token file ({path}); the server will not guess "
            "which one its clients hold",
            "unset MCP_JOBS_TOKEN",
            details={"path": path},
        )


class SettingInvalidError(FlagMend):
    """A server setting (a flag or its `MCP_JOBS_*` variable) that is not a valid value; each
    area declares its own code."""

    def __init__(
        self,
        name: str,
        value: str,
        expected: str,
        fix: str,
        *,
        flag: str | None = None,
        nearest: object = None,
        typed: object = None,
    ) -> None:
        """`flag`: the command-line flag that gave the value, when one did; `nearest`: the
        value nearest it that is accepted; `typed`: the value as parsed from the flag, where
        that is not `value` (a number). An `export` of the variable would not change what a
        flag gives, so the CLI writes the command with the flag mended instead."""
        super().__init__(
            f"{name}={short_repr(value)} is not accepted; it must be {expected}",
            fix,
            details={"setting": name, "expected": expected},
        )
        self.flag = flag
        self.nearest = nearest
        self.typed = value if typed is None else typed


class HttpSettingInvalidError(SettingInvalidError):
    code = "HTTP_SETTING_INVALID"
    title = "an HTTP server setting is not a valid value"


class HttpBindError(FlagMend):
    code = "HTTP_BIND_FAILED"
    title = "the HTTP server cannot listen on its address"

    def __init__(
        self, host: str, port: int, reason: str, fix: str, *, flag: str, nearest: object
    ) -> None:
        """`flag` (`--host` or `--port`) set to `nearest` is the command that listens: the
        CLI writes it, whether the flag was typed or the default was used."""
        super().__init__(
            f"cannot listen on {host} port {port}: {reason}",
            fix,
            details={"host": host, "port": port},
        )
        self.flag = flag
        self.nearest = nearest
        self.typed = host if flag == "--host" else port
        self.set_anyway = True


class QueueUnknownError(JobsError):
    code = "QUEUE_UNKNOWN"
    title = "no job, stored row or live worker uses this queue"

    def __init__(self, queue: str, known: Sequence[str], *, paused: Sequence[str] = ()) -> None:
        """`paused`: queues paused that nothing else knows (a resume's), listed apart."""
        names = sorted(known)
        hint, meant = meant_note(queue, [*names, *paused])
        also = {"paused": sorted(paused)} if paused else {}
        listed = f"; paused: {', '.join(sorted(paused))}" if paused else ""
        super().__init__(
            f"queue {short_repr(queue)}{hint} is not the queue of any registered job, holds no "
            f"job and no live worker serves it (known queues: {', '.join(names) or 'none'}"
            f"{listed})",
            "mcp-jobs jobs stats --json",
            next_call=NextCall(tool="queue_stats", arguments={}),
            details={"queue": queue, "known": names, **also, **meant},
        )


class ErrorCodeUnknownError(JobsError):
    code = "ERROR_CODE_UNKNOWN"
    title = "no job holds this error code, and the engine writes none of that name"

    def __init__(
        self, error_code: str, held: Sequence[str], engine: Sequence[str], action: str
    ) -> None:
        """`held`: the codes stored on the jobs the action matches; `engine`: the codes the
        engine writes. The fix is the action's plan without the code: its counts per error code
        say which are held."""
        hint, meant = meant_note(error_code, sorted({*held, *engine}))
        verb = {"retry": "retry-all", "cancel": "cancel-all"}[action]
        super().__init__(
            f"error code {short_repr(error_code)}{hint} is held by no job this {action} matches, "
            f"and the engine writes no such code (held: {', '.join(held) or 'none'})",
            f"mcp-jobs jobs {verb}",
            next_call=NextCall(tool=f"{action}_jobs", arguments={}),
            details={"error_code": error_code, "held": list(held), **meant},
        )


class ScopeMissingError(JobsError):
    code = "SCOPE_MISSING"
    title = "the access token lacks the scope this call needs"

    def __init__(
        self,
        tool: str,
        needed: str,
        granted: Sequence[str],
        *,
        issuer: str | None = None,
        client: str | None = None,
    ) -> None:
        """`issuer` and `client`: the authorization server and the client id the token names,
        which the fix sends the operator to (it is the token that lacks the scope)."""
        at = f" at the authorization server {issuer}" if issuer else ""
        whom = f"client {client!r}" if client else "this token's client"
        wanted = " ".join(sorted({*granted, needed}))
        super().__init__(
            f"{tool} needs the OAuth scope {needed!r}; this access token grants "
            f"{', '.join(sorted(granted)) or 'no scope'}",
            f"grant {whom} the scope {needed!r}{at}, then request a token with scope "
            f"{wanted!r} and reconnect with it",
            details={"tool": tool, "needed": needed, "granted": sorted(granted)},
        )


class OAuthConflictError(JobsError):
    code = "OAUTH_TOKEN_CONFLICT"
    title = "both OAuth and the static token are configured"

    def __init__(self, source: str, fix: str) -> None:
        super().__init__(
            f"an OAuth issuer is set and so is a static token ({source}); the server takes "
            "one kind of bearer token, not both",
            fix,
            details={"source": source},
        )


class OAuthSettingInvalidError(SettingInvalidError):
    code = "OAUTH_SETTING_INVALID"
    title = "an OAuth setting is not a valid value"


class OAuthDiscoveryError(JobsError):
    code = "OAUTH_DISCOVERY_FAILED"
    title = "the authorization server's metadata or keys could not be read"

    def __init__(self, url: str, reason: str) -> None:
        self.reason = reason
        # Read by this Python, not curl, which slim images lack; the URL quoted, as it is the
        # operator's text.
        read = (
            "import sys, urllib.request; "
            "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
        )
        super().__init__(
            f"reading {url} failed: {reason}",
            f"{this_python()} -c {shell_word(read)} {shell_word(url)}",
            details={"url": url},
        )


class OAuthUnavailableError(JobsError):
    code = "OAUTH_UNAVAILABLE"
    title = "OAuth needs the `oauth` extra"

    def __init__(self) -> None:
        super().__init__(
            "--oauth-issuer verifies JWT access tokens with PyJWT, which is not installed",
            install_line("oauth"),
        )


class WriteDeclinedError(JobsError):
    code = "WRITE_DECLINED"
    title = "the person declined the write when asked to confirm it; nothing was written"

    def __init__(self, tool: str, action: str, dry_run: NextCall) -> None:
        super().__init__(
            f"{tool} asked the person to confirm its plan and the answer was {action}; "
            "nothing was written",
            f"{dry_run.tool} {example_call(dry_run.arguments)}",
            next_call=dry_run,
            details={"tool": tool, "action": action},
        )


class ConfirmationRequiredError(JobsError):
    code = "CONFIRMATION_REQUIRED"
    title = "this write needs the confirm token its dry run answers"

    def __init__(
        self, tool: str, write: NextCall, plan: Mapping[str, Any], expires_at: int
    ) -> None:
        super().__init__(
            f"{tool} with write=true changes data, and this client cannot be asked to confirm "
            "(no elicitation): review the plan in details.plan, then write with its token "
            "(single use, short-lived)",
            f"{write.tool} {example_call(write.arguments)}",
            next_call=write,
            details={"tool": tool, "plan": dict(plan), "expires_at": expires_at},
        )


class ConfirmationInvalidError(JobsError):
    code = "CONFIRMATION_INVALID"
    title = "the confirm token is expired, used, or not for this plan"

    def __init__(self, tool: str, reason: str, dry_run: NextCall) -> None:
        super().__init__(
            f"the confirm token given to {tool} {reason}; nothing was written",
            f"{dry_run.tool} {example_call(dry_run.arguments)}",
            next_call=dry_run,
            details={"tool": tool, "reason": reason},
        )


class ConfirmSettingInvalidError(SettingInvalidError):
    code = "CONFIRM_SETTING_INVALID"
    title = "a write-confirmation setting of the server is not a valid value"


class SubscriptionUnsupportedError(JobsError):
    code = "SUBSCRIPTION_UNSUPPORTED"
    title = "this resource cannot be subscribed to"

    def __init__(self, uri: str, subscribable: Sequence[str]) -> None:
        super().__init__(
            f"{short_repr(uri)} is not a resource this server notifies about; it notifies about "
            f"{', '.join(subscribable)}",
            'resources/subscribe {"uri": "jobs://stats"}',
            details={"uri": uri, "subscribable": list(subscribable)},
        )


class SubscriptionLimitError(JobsError):
    code = "SUBSCRIPTION_LIMIT"
    title = "too many resource subscriptions"

    def __init__(self, where: str, limit: int, fix: str) -> None:
        super().__init__(
            f"{where} already follows {limit} resources, the most this server allows",
            fix,
            details={"scope": where, "limit": limit},
        )
