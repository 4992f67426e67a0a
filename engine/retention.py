"""How long settled jobs are kept, and which rows a prune takes: pure rules, no I/O.

A policy keeps each settled state for a while (`DEFAULT_POLICY`: done and cancelled 7 days,
failed and dead 30 days), measured from the row's `finished_at`. It is declared in code — per
worker or client (`Worker(retention=Retention(...))`) and per job (`@job(retention=...)`) —
and the environment overrides the code's default (`MCP_JOBS_RETAIN_DONE=3d`, ...). A job's own
declaration is the most specific and wins over both. `None` on a `Retention` field inherits;
`"forever"` keeps that state for good.

Events of no job (an agent's refused or bulk calls, written by the audit) have no job to go
with: they are kept `Policy.audit` (90 days by default, `MCP_JOBS_RETAIN_AUDIT`, or a worker's
`Retention(audit=...)`), counted from their `at`. A job's own `retention=` cannot set it.

A row is expired when it finished strictly before its cutoff, `now - keep`. `Cutoffs` is what a
driver is handed: a few rules (one per state, plus one per state for each job name with a
policy of its own), so a prune pass is a few statements however many jobs are declared. Steps
and events go with their job; backfill ledger rows are kept; published job descriptors expire
by `engine.descriptors`, dead workers' rows by `engine.presence`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from engine import bounds
from engine.durations import spelt
from engine.errors import NOTHING_NEAR, InvalidArgumentError, JobsError
from engine.switches import WORDS, switch, switch_meant
from schemas.descriptor import RetentionInfo
from schemas.states import SETTLED_STATES, JobState

__all__ = [
    "DEFAULT_AUDIT_MS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_POLICY",
    "FOREVER",
    "PRUNE_ENV",
    "PRUNE_EVERY_ENV",
    "RETAIN_AUDIT_ENV",
    "RETAIN_ENV",
    "Cutoffs",
    "Policy",
    "PruneCount",
    "PruneRule",
    "Retention",
    "RetentionSettingInvalidError",
    "audit_cutoff",
    "cutoff",
    "interval_from_env",
    "is_expired",
    "meant_duration",
    "parse_duration",
    "plan",
    "policy_from_env",
    "prune_enabled_from_env",
    "totals",
]

DAY_MS = 86_400_000
FOREVER = "forever"
# Rows one prune transaction deletes at most: short locks, a drain that keeps its pace.
DEFAULT_BATCH_SIZE = 500
DEFAULT_INTERVAL_MS = 300_000
_LEAST_INTERVAL_MS = 1_000
# The environment: MCP_JOBS_RETAIN_<STATE> per settled state, the switch, the interval.
RETAIN_ENV: dict[JobState, str] = {s: f"MCP_JOBS_RETAIN_{s.upper()}" for s in SETTLED_STATES}
RETAIN_AUDIT_ENV = "MCP_JOBS_RETAIN_AUDIT"
PRUNE_ENV = "MCP_JOBS_PRUNE"
PRUNE_EVERY_ENV = "MCP_JOBS_PRUNE_EVERY"

Keep = int | float | timedelta | str

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": DAY_MS, "w": 7 * DAY_MS}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
# One number and one unit: what a duration is read as (`duration_text_ms`), said in full.
DURATION_WORDS = (
    "seconds, or a duration: one number and one unit, ms, s, m, h, d or w (90s, 12h, 7d)"
)


class RetentionSettingInvalidError(JobsError):
    code = "RETENTION_SETTING_INVALID"
    title = "a retention setting in the environment is not a duration"

    def __init__(
        self,
        variable: str,
        value: str,
        expected: str,
        default: str,
        restart: str | None = None,
        *,
        why: str | None = None,
    ) -> None:
        """`default`: the value the fix sets (the duration the value spells in words, the bound
        a value past it is nearest, or what the setting is when it is not set). `restart`: the
        command of a running process that read the variable when it started (a server an agent
        calls: the agent's `export` never reaches it), which the fix starts again with the
        variable set. `why`: what the cause says of the value the fix sets, where it is not
        plainly the one typed."""
        cause = f"{variable}={value!r} is not accepted; it must be {expected}"
        if why is not None:
            cause += f"; {why}"
        fix = f"export {variable}={default}"
        if restart is not None:
            cause += (
                "; the running server read it when it started, so only a restart with it "
                "changed (or unset) takes effect"
            )
            fix = f"{variable}={default} {restart}"
        super().__init__(cause, fix, details={"variable": variable, "expected": expected})
        self.variable, self.value, self.expected, self.default = variable, value, expected, default
        self.why = why

    def restarted(self, command: str) -> RetentionSettingInvalidError:
        """This refusal as seen through a server started by `command` (see `restart`)."""
        return RetentionSettingInvalidError(
            self.variable, self.value, self.expected, self.default, command, why=self.why
        )


def _duration_text(ms: int | None) -> str:
    """`ms` as a setting's text in its largest whole unit up to days, as the README writes the
    defaults ("7d", "5m"); None: "forever"."""
    if ms is None:
        return FOREVER
    for unit in ("d", "h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"


def duration_text_ms(text: str) -> float | None:
    """The milliseconds a duration's text spells ("90s", "7d", "12" seconds), unbounded; None
    when it is no duration."""
    match = _DURATION.fullmatch(text.strip().lower())
    return None if match is None else float(match[1]) * _UNITS_MS[match[2] or "s"]


def parse_duration(argument: str, value: Keep, *, forever: bool = True) -> int | None:
    """`value` in ms: seconds (int/float), a `timedelta`, or text (`"90s"`, `"7d"`, a plain
    number of seconds); `"forever"` is None when `forever`. Negative, NaN, or over ten years is
    INVALID_ARGUMENT."""
    expected = DURATION_WORDS + (f", or {FOREVER!r}" if forever else "")
    ms: float
    if isinstance(value, timedelta):
        ms = value.total_seconds() * 1000
    elif isinstance(value, str):
        text = value.strip().lower()
        if forever and text == FOREVER:
            return None
        spelt = duration_text_ms(text)
        if spelt is None:
            raise InvalidArgumentError(argument, value, expected)
        ms = spelt
    elif isinstance(value, int | float) and not isinstance(value, bool):
        ms = float(value) * 1000
    else:
        raise InvalidArgumentError(argument, value, expected)
    if not 0 <= ms <= bounds.MAX_DELAY_MS:
        # Past the top, ten years is the nearest; below 0 it would be 0, which keeps nothing:
        # no fix offers that.
        longest = f"{bounds.MAX_DELAY_MS // DAY_MS}d" if ms > 0 else NOTHING_NEAR
        raise InvalidArgumentError(
            argument, value, f"{expected}, from 0 to ten years", nearest=longest
        )
    return int(ms)


def meant_duration(text: str) -> str | None:
    """The duration's text `text` plainly stands for, as `parse_duration` takes it: itself when
    it is one, the text its words read (`2 weeks`: 2w; `1 year`: 365d, engine.durations), and
    past ten years the bound (3650d), so a fix with it runs at once, not refused again for its
    length. None when it stands for no duration, or for one below 0."""
    read = text.strip() if duration_text_ms(text) is not None else spelt(text)
    if read is None:
        return None
    try:
        parse_duration("duration", read, forever=False)
    except InvalidArgumentError as exc:
        return exc.nearest if isinstance(exc.nearest, str) else None
    return read


DEFAULT_AUDIT_MS = 90 * DAY_MS


class Policy(NamedTuple):
    """A resolved policy: how long each settled state is kept, and (`audit`) events of no job,
    in ms; None keeps them forever."""

    done: int | None
    failed: int | None
    dead: int | None
    cancelled: int | None
    audit: int | None = DEFAULT_AUDIT_MS

    def keep_ms(self, state: JobState) -> int | None:
        value: int | None = getattr(self, state)
        return value

    def info(self) -> RetentionInfo:
        """As a published descriptor carries it."""
        return RetentionInfo(**{f"{field}_ms": value for field, value in self._asdict().items()})

    @classmethod
    def of(cls, info: RetentionInfo) -> Policy:
        return cls(**{field: getattr(info, f"{field}_ms") for field in cls._fields})

    def longest(self, other: Policy) -> Policy:
        """Each field the longer of the two: what neither policy would delete yet."""
        return Policy(
            *(
                None if a is None or b is None else max(a, b)
                for a, b in zip(self, other, strict=True)
            )
        )


DEFAULT_POLICY = Policy(done=7 * DAY_MS, failed=30 * DAY_MS, dead=30 * DAY_MS, cancelled=7 * DAY_MS)


@dataclass(frozen=True)
class Retention:
    """How long settled jobs are kept, per state, and (`audit`, a worker's only) events of no
    job: seconds, a `timedelta`, `"7d"`-style text, or `"forever"`; None inherits (from the
    worker's policy for a job, from the environment and the defaults for a worker). Checked
    when built: a bad value is INVALID_ARGUMENT."""

    done: Keep | None = None
    failed: Keep | None = None
    dead: Keep | None = None
    cancelled: Keep | None = None
    audit: Keep | None = None

    def __post_init__(self) -> None:
        for field in _FIELDS:
            value = getattr(self, field)
            if value is not None:
                parse_duration(f"retention.{field}", value)

    def over(self, base: Policy) -> Policy:
        """`base` with what this declares in its place."""
        kept = {
            field: getattr(base, field)
            if getattr(self, field) is None
            else parse_duration(f"retention.{field}", getattr(self, field))
            for field in _FIELDS
        }
        return Policy(**kept)


_FIELDS: tuple[str, ...] = (*SETTLED_STATES, "audit")


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def policy_from_env(
    base: Policy = DEFAULT_POLICY,
    environ: Mapping[str, str] | None = None,
    fields: Collection[str] | None = None,
) -> Policy:
    """`base` with each `MCP_JOBS_RETAIN_<STATE>` (and `MCP_JOBS_RETAIN_AUDIT`) that is set in
    its place. `fields`: only those settings are read (None: all), so a caller that does not use
    one (a prune whose `older_than` replaces the states' policies) is not refused for it."""
    env = _env(environ)
    kept: dict[str, int | None] = base._asdict()
    for field, variable in (*RETAIN_ENV.items(), ("audit", RETAIN_AUDIT_ENV)):
        raw = env.get(variable, "").strip() if fields is None or field in fields else ""
        if raw:
            _refuse_bare_number(variable, raw)
            try:
                kept[field] = parse_duration(variable, raw)
            except InvalidArgumentError as exc:
                raise _refused(variable, raw, exc, None) from exc
    return Policy(**kept)


_BARE_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_UNIT_LEFT_OUT = (
    "a number with no unit would be seconds, which deletes what was meant to be kept days "
    "early: the fix reads it as days, never a time shorter than the one meant"
)


def _refuse_bare_number(variable: str, raw: str) -> None:
    """A retention of `7` (exploreV: read as 7 seconds, its first pass deleted the history): a
    unit left out of what deletes is not guessed short. Refused, fixed to as many days, as
    `db prune --older-than 7` is."""
    if _BARE_NUMBER.fullmatch(raw) is None:
        return
    days = meant_duration(f"{raw}d")  # past ten years: the bound
    meant = FOREVER if days is None else _duration_text(parse_duration(variable, days))
    expected = f"a duration with its unit (90s, 12h, 7d), or {FOREVER!r}"
    raise RetentionSettingInvalidError(variable, raw, expected, meant, why=_UNIT_LEFT_OUT)


# A retention value that stands for no duration ("a while", "-1"): the fix keeps what is
# stored, as no length the operator meant is known, and any number would be a guess.
_KEPT_UNREAD = (
    "it stands for no duration: rather than guess a time, which might delete what was meant to "
    f"be kept, the fix keeps every row it covers ({FOREVER}) until it is set to the duration "
    "meant (e.g. 90d)"
)


def _refused(
    variable: str, raw: str, exc: InvalidArgumentError, unread: str | None, least_ms: int = 0
) -> RetentionSettingInvalidError:
    """The refusal of `raw`, which `parse_duration` refused (`exc`), fixed to the duration it
    means: written in words (`90 days`: 90d) or years (`2 years`: 730d), within the bound a
    duration has; past that bound, the bound. A value that stands for no duration (or for one
    under `least_ms`): `unread` (an interval's default), else for a retention `forever`
    (`_KEPT_UNREAD`), never a time shorter than the one meant."""
    meant = _meant(variable, raw, least_ms)
    if meant is None and isinstance(exc.nearest, str):
        meant = exc.nearest  # a duration past the bound: the bound
    why = None
    if meant is None:
        meant, why = (FOREVER, _KEPT_UNREAD) if unread is None else (unread, None)
    return RetentionSettingInvalidError(variable, raw, exc.expected, meant, why=why)


def _meant(variable: str, raw: str, least_ms: int) -> str | None:
    """`raw` as a setting's text when it is a duration in words (`2 weeks`: 14d) or in years,
    within the bound a duration has (`parse_duration`'s nearest); None when it is neither, or
    under `least_ms`."""
    text = spelt(raw)  # years too, as 365 days
    meant = None if text is None else meant_duration(text)
    if meant is None:
        return None
    ms = parse_duration(variable, meant, forever=False)
    return None if ms is None or ms < least_ms else _duration_text(ms)


def prune_enabled_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """`MCP_JOBS_PRUNE`: on (the default) or off (engine.switches' words)."""
    raw = _env(environ).get(PRUNE_ENV, "")
    if not raw.strip():
        return True
    enabled = switch(raw)
    if enabled is None:
        # A slip (`of`) is fixed as the switch it names: `on` would run the pruner meant off.
        raise RetentionSettingInvalidError(PRUNE_ENV, raw.strip(), WORDS, switch_meant(raw))
    return enabled


def interval_from_env(environ: Mapping[str, str] | None = None) -> int:
    """`MCP_JOBS_PRUNE_EVERY`: ms between passes (default 5 minutes, at least 1 s)."""
    raw = _env(environ).get(PRUNE_EVERY_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_MS
    default = _duration_text(DEFAULT_INTERVAL_MS)
    try:
        every = parse_duration(PRUNE_EVERY_ENV, raw, forever=False)
    except InvalidArgumentError as exc:
        # An interval deletes nothing by itself: where no duration is meant, the default.
        raise _refused(PRUNE_EVERY_ENV, raw, exc, default, _LEAST_INTERVAL_MS) from exc
    if every is None or every < _LEAST_INTERVAL_MS:
        raise RetentionSettingInvalidError(PRUNE_EVERY_ENV, raw, "at least 1s", default)
    return every


# --- the rule -----------------------------------------------------------------------------------


def cutoff(policy: Policy, state: JobState, now: int) -> int | None:
    """Rows of `state` that finished before this are expired at `now`; None: none ever are
    (a live state, or kept forever)."""
    if state not in SETTLED_STATES:
        return None
    keep = policy.keep_ms(state)
    return None if keep is None else now - keep


def audit_cutoff(policy: Policy, now: int) -> int | None:
    """Events of no job recorded (`at`) before this are expired at `now`; None: kept forever."""
    return None if policy.audit is None else now - policy.audit


def is_expired(policy: Policy, state: JobState, finished_at: int | None, now: int) -> bool:
    at = cutoff(policy, state, now)
    return at is not None and finished_at is not None and finished_at < at


class PruneRule(NamedTuple):
    """Rows of `state` finished before `cutoff` go: of job `name`, or (None) of every job name
    that has no rules of its own."""

    state: JobState
    cutoff: int
    name: str | None = None


@dataclass(frozen=True)
class Cutoffs:
    """What one prune call takes. `named`: job names with rules of their own, which the
    default rules (name None) skip. A state with no rule is kept."""

    rules: tuple[PruneRule, ...]
    named: tuple[str, ...] = ()

    def cutoff_for(self, name: str, state: JobState) -> int | None:
        wanted = name if name in self.named else None
        for rule in self.rules:
            if rule.state == state and rule.name == wanted:
                return rule.cutoff
        return None

    def latest(self) -> int | None:
        """The latest cutoff of any rule (None without rules): no row finished at or after it
        is expired, so a driver walking rows by finish time stops there."""
        return max((rule.cutoff for rule in self.rules), default=None)

    def expired(self, name: str, state: JobState, finished_at: int | None) -> bool:
        """THE rule every driver applies (memory calls it; the SQL drivers spell it, and the
        conformance kit pins them to it)."""
        at = self.cutoff_for(name, state)
        return at is not None and finished_at is not None and finished_at < at


class PruneCount(NamedTuple):
    """Rows of one state in one queue that a prune took (or, in a dry run, would take)."""

    state: JobState
    queue: str
    rows: int


def plan(
    policy: Policy,
    now: int,
    *,
    per_name: Mapping[str, Policy] | None = None,
    states: Iterable[JobState] | None = None,
    older_than_ms: int | None = None,
) -> Cutoffs:
    """The cutoffs of a pass at `now`: `policy` for every job name, each name in `per_name`
    under its own. `states` limits the pass to those states; `older_than_ms` replaces every
    policy for this pass (one cutoff, every name)."""
    chosen = tuple(SETTLED_STATES) if states is None else tuple(dict.fromkeys(states))
    for state in chosen:
        if state not in SETTLED_STATES:
            expected = f"one of {', '.join(SETTLED_STATES)}"
            raise InvalidArgumentError("state", state, expected)
    if older_than_ms is not None:
        return Cutoffs(tuple(PruneRule(s, now - older_than_ms) for s in chosen))
    rules: list[PruneRule] = []
    for state in chosen:
        at = cutoff(policy, state, now)
        if at is not None:
            rules.append(PruneRule(state, at))
    named: list[str] = []
    for name, own in sorted((per_name or {}).items()):
        if own == policy:
            continue  # same as everyone's: the default rules cover it
        named.append(name)
        for state in chosen:
            at = cutoff(own, state, now)
            if at is not None:
                rules.append(PruneRule(state, at, name))
    return Cutoffs(tuple(rules), tuple(named))


def totals(counts: Iterable[PruneCount]) -> dict[str, int]:
    """Counts per state (every settled state present, zeros included)."""
    by_state: dict[str, int] = dict.fromkeys(SETTLED_STATES, 0)
    for c in counts:
        by_state[c.state] = by_state.get(c.state, 0) + c.rows
    return by_state
