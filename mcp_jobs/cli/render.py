"""What the CLI prints: envelopes as JSON (`--json`) or as short readable text, and a progress bar.

The text forms are for people at a terminal; scripts and agents use `--json`, which prints exactly
the envelope the MCP tools return.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from engine.backfill.ledger import DEFAULT_RUNS_PAGE
from engine.lease_expiry import LEASE_EXPIRED
from engine.run_job import HEARTBEAT_LATE
from mcp_jobs.cli.job_progress import progress_text
from mcp_jobs.config import ServerLimits
from mcp_jobs.fix_context import FixContext
from mcp_jobs.operations.bulk import BulkPlan, summary
from schemas.stats import RECENT_SETTLED_MS

# The most queues one `jobs stats` lists: what its line for the queues left out asks for.
MORE_QUEUES = ServerLimits().max_page_size


def when(ms: int | None) -> str:
    """An epoch-ms time as the CLI's text prints every time: UTC, and saying so (a person in
    another zone would read a bare time as their own)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_json(envelope: dict[str, Any], out: TextIO | None = None) -> None:
    print(json.dumps(envelope, indent=2, ensure_ascii=False), file=out or sys.stdout)


def print_error(error: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stderr
    print(f"error {error['code']}: {error['title']}", file=out)
    # The cause may quote a stored value. A fix is printable as written (`shell_word` writes a
    # value's control characters as `$'\n'`), so `one_line` leaves it to run as given.
    print(f"  cause: {one_line(error['cause'])}", file=out)
    print(f"  fix:   {one_line(error['fix'])}", file=out)


def error_line(error: dict[str, Any] | None, limit: int | None = None) -> str:
    """A stored failure on one line, "CODE: cause", cut to `limit` characters."""
    if not error:
        return ""
    text = f"{error['code']}: {one_line(error['cause'])}"
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def one_line(value: object) -> str:
    """A stored value as plain text shows it: a control character in it (an ESC that would
    recolour the terminal, a newline that would split a row) escaped, as `\\x1b` or `\\n`."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _cell(value: object) -> str:
    """`one_line`, quoted where blanks begin or end it: padded into a column they vanish, and
    a queue named 'sync ' read as a second row of 'sync'."""
    text = one_line(value)
    return f"'{text}'" if text != text.strip() else text


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers], *[[_cell(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


# --- per-result text ----------------------------------------------------------------------------


def _jobs(env: dict[str, Any]) -> str:
    rows = [
        (
            j["id"],
            j["name"],
            j["queue"],
            j.get("tenant_id") or "-",
            j["state"],
            f"{j['attempt']}/{j['max_attempts']}",
            when(j["updated_at"]),
            error_line(j.get("last_error"), 60),
        )
        for j in env["jobs"]
    ]
    headers = ["ID", "NAME", "QUEUE", "TENANT", "STATE", "TRY", "UPDATED", "LAST ERROR"]
    shown: Sequence[Sequence[object]] = rows
    if any(j.get("progress") for j in env["jobs"]):  # the column only where a job reported
        shown = [
            (*row, progress_text(j.get("progress"), 30))
            for row, j in zip(rows, env["jobs"], strict=True)
        ]
        headers.append("PROGRESS")
    text = table(shown, headers) if rows else "no jobs"
    if env.get("next_cursor"):
        # The cursor goes with this list's filters: the same command, with it added.
        text += f"\n(more: this command with --cursor {env['next_cursor']})"
    return "\n".join([text, *notice_lines(env)])


def _inspect(env: dict[str, Any]) -> str:
    job = env["job"]
    name, queue, tenant = (one_line(job.get(k) or "-") for k in ("name", "queue", "tenant_id"))
    lines = [
        f"{name} {job['id']}  [{job['state']}]  attempt {job['attempt']}/"
        f"{job['max_attempts']}  queue {queue}  tenant {tenant}"
        f"  priority {job.get('priority', 0)}",
        f"  input:  {json.dumps(job['input'])}",
    ]
    if job.get("output") is not None:
        lines.append(f"  output: {json.dumps(job['output'])}")
    if job.get("progress"):
        reported = job["progress"]
        lines.append(
            f"  progress: {progress_text(reported)}  (attempt {reported['attempt']}, "
            f"{when(reported['at'])})"
        )
    if job.get("last_error"):
        lines.append(f"  last error: {error_line(job['last_error'])}")
        lines.append(f"    fix: {one_line(job['last_error']['fix'])}")
        lines.extend(_traceback_lines(job["last_error"]))
    if job.get("rerun_of"):  # engine/reruns.py: `jobs show ID --run-id` reads the earlier run
        lines.append(f"  run: {job['run_id']}  (rerun of {job['rerun_of']})")
    if env.get("lease"):
        lease = env["lease"]
        state = "EXPIRED" if lease["expired"] else "held"
        lines.append(
            f"  lease: {state} by {lease.get('worker_id', '-')} until {when(lease['expires_at'])}"
        )
    if env.get("next_attempt_at"):
        lines.append(f"  due: {when(env['next_attempt_at'])}")
    steps = env.get("steps") or []
    if (env.get("steps_total") or 0) > len(steps):
        lines.append(f"  steps: the newest {len(steps)} of {env['steps_total']}")
    for step in steps:
        took = _step_took(step)
        extra = f"  {one_line(step['error'])}" if step.get("error") else ""
        lines.append(f"  step {one_line(step['name'])}: {step['status']} ({took}){extra}")
    events = env.get("events") or []
    if (env.get("events_total") or 0) > len(events):
        lines.append(f"  events: the newest {len(events)} of {env['events_total']}")
    lines.extend(f"  event {when(event['at'])} {event_summary(event)}" for event in events)
    return "\n".join(lines)


def _step_took(step: dict[str, Any]) -> str:
    """How long a finished step took; for one parked (`sleeping`, `waiting`), when it wakes, as
    stored (`engine.steps`); else `…`, still under way."""
    if step.get("finished_at"):
        return f"{step['finished_at'] - step['started_at']} ms"
    output = step.get("output")
    wake = output.get("wake_at") if isinstance(output, dict) else None
    if step.get("status") in ("sleeping", "waiting") and isinstance(wake, int):
        return f"until {when(wake)}"
    return "…"


def _traceback_lines(error: dict[str, Any]) -> list[str]:
    """A body's stored traceback (engine.run_job.failure_traceback), below its error: each of
    its lines indented under a heading and escaped like any stored text."""
    trace = (error.get("details") or {}).get("traceback")
    if not isinstance(trace, str) or not trace:
        return []
    return ["    traceback:", *(f"      {one_line(line)}" for line in trace.splitlines())]


# --- a job's events -------------------------------------------------------------------------------

# The most characters of an error or a free text an event's line quotes; `--json` has it whole.
EVENT_TEXT = 80


def event_summary(event: dict[str, Any]) -> str:
    """What a stored event says, on one line: its kind, then what its data means (the attempt
    and worker a lost lease took, the error an attempt failed with, when a parked job wakes, the
    state a retry or cancel left), then who did it. Data of a shape its kind does not write (an
    event recorded by hand) is quoted as JSON, cut like any text here."""
    kind = one_line(event["kind"])
    data = event.get("data")
    actor = one_line(event["actor"]) if event.get("actor") else None
    if kind == LEASE_EXPIRED and isinstance(data, dict):
        said = _lease_expired(data, event["at"], actor)
        if said is not None:
            return f"{kind}: {said}"
    said = _said(kind, data) if isinstance(data, dict) else None
    if said is None and data:
        said = _cut(json.dumps(data, ensure_ascii=False, default=str))
    by = f" by {actor}" if actor else ""
    return f"{kind}: {said}{by}" if said else f"{kind}{by}"


def _lease_expired(data: dict[str, Any], at: int, actor: str | None) -> str | None:
    """engine.lease_expiry's data: the attempt lost, its worker, when its lease ran out; the
    event's actor took the job over."""
    attempt, worker, ran_out = (data.get(k) for k in ("attempt", "worker_id", "lease_expires_at"))
    if not isinstance(attempt, int):
        return None
    held = f" held by {one_line(worker)}" if worker else ""
    lapsed = f" (lease ran out {_time_near(ran_out, at)})" if isinstance(ran_out, int) else ""
    taken = f", taken over by {actor}" if actor else ""
    return f"attempt {attempt}{held}{lapsed}{taken}"


def _said(kind: str, data: dict[str, Any]) -> str | None:
    """The data of the events the engine writes (engine.rules' nack, cancel and retry data,
    engine.reruns'; a late heartbeat's), or None for a shape it does not write."""
    keys = set(data)
    if kind in ("dead", "failed", "retried", "handed_back") and keys <= {"attempt", "error"}:
        attempt = data.get("attempt")
        tried = f"attempt {attempt}" if isinstance(attempt, int) else ""
        failed = _error(data.get("error"))
        if failed:
            return f"{tried} failed: {failed}" if tried else failed
        return tried or None
    if kind == "parked" and keys <= {"until", "reason"}:
        until = data.get("until")
        wakes = f"until {when(until)}" if isinstance(until, int) else ""
        why = _error(data.get("reason"))
        return ", ".join(part for part in (wakes, why) if part) or None
    if kind in ("cancelled", "requeued") and isinstance(data.get("from"), str):
        said = f"from {one_line(data['from'])}"
        step, old, new = (data.get(k) for k in ("from_step", "previous_run_id", "run_id"))
        if step is not None:  # a rerun (engine.reruns.rerun_event_data)
            said += f", rerun from step {_cut(repr(step))} (run {old} -> {new})"
        return said
    if kind == HEARTBEAT_LATE and isinstance(data.get("late_ms"), int):
        lease = data.get("lease_ms")
        of = f" (a lease is {lease / 1000:.1f} s)" if isinstance(lease, int) else ""
        cause = f": {_cut(data['cause'])}" if data.get("cause") else ""
        return f"the heartbeat ran {data['late_ms'] / 1000:.1f} s late{of}{cause}"
    return None


def _error(error: object) -> str:
    """A stored error in an event's data, "CODE: cause", cut; "" for none."""
    if isinstance(error, dict) and isinstance(error.get("code"), str) and "cause" in error:
        return error_line(error, EVENT_TEXT)
    return "" if error is None else _cut(json.dumps(error, ensure_ascii=False, default=str))


def _cut(value: object) -> str:
    text = one_line(value)
    return text if len(text) <= EVENT_TEXT else text[: EVENT_TEXT - 1] + "…"


def _time_near(ms: int, at: int) -> str:
    """`ms` as `when` prints it, without the date when it is `at`'s day (a lease ran out seconds
    before the claim that saw it)."""
    full, day = when(ms), when(at)
    return full.partition(" ")[2] if full[:10] == day[:10] else full


def _describe(env: dict[str, Any], fixes: FixContext) -> str:
    rows = [
        (
            d["name"],
            d["queue"],
            d.get("priority", 0),
            d["retry"]["attempts"],
            ",".join(str(ms) for ms in d["retry"]["delays_ms"]) or "-",
            "yes" if d["tenant_required"] else "no",
            (d.get("description") or "").split("\n")[0][:60],
        )
        for d in env["jobs"]
    ]
    headers = ["NAME", "QUEUE", "PRIORITY", "ATTEMPTS", "DELAYS MS", "TENANT", "DESCRIPTION"]
    tasks = env.get("tasks") or []
    # A task described by its name (`jobs describe nightly`) is the answer without a job table.
    text = table(rows, headers) if rows or not tasks else ""
    if tasks:
        task_rows = [
            (
                t["name"],
                t["cron"],
                t["timezone"],
                _task_next(t),
                (t.get("last_fired") or {}).get("local", "-"),
            )
            for t in tasks
        ]
        tasks_table = table(task_rows, ["TASK", "CRON", "ZONE", "NEXT", "LAST FIRED"])
        failing = [_task_failing(t["name"], t["failing"]) for t in tasks if t.get("failing")]
        tasks_table = "\n".join([tasks_table, *failing, *_task_notes(tasks)])
        text = f"{text}\n\n{tasks_table}" if text else tasks_table
    if env.get("next_cursor"):
        more = fixes.command("jobs", "describe", "--cursor", env["next_cursor"])
        text += f"\nmore jobs: {more}"  # and tasks: they page together
    return text


def _task_next(task: dict[str, Any]) -> str:
    """A task's next occurrence, unless no live worker schedules it: then none will fire."""
    if task.get("scheduled") is False:
        return "not scheduled: no live worker fires it"
    return str((task["next_occurrences"] or [{"local": "-"}])[0]["local"])


def _task_notes(tasks: list[dict[str, Any]]) -> list[str]:
    """The lines under the task table for tasks behind their schedule or whose jobs died."""
    notes: list[str] = []
    for t in tasks:
        name = one_line(t["name"])
        if t.get("missed"):
            notes.append(f"task {name}: {t['missed']} occurrence(s) due have not fired")
        dead = t.get("dead_runs")
        if dead:
            latest = "its last run's job" if dead["last_fired"] else "an earlier run's job"
            code = f" ({dead['error_code']})" if dead.get("error_code") else ""
            notes.append(
                f"task {name}: {latest} {dead['job_id']} ({one_line(dead['job'])}) died{code}; "
                f"{dead['count']} of the newest dead jobs are this task's"
            )
    return notes


def _task_failing(name: str, failing: dict[str, Any]) -> str:
    """A failing task's lines under the table: its rounds do not fire, so NEXT is only when it
    is tried again."""
    since = when(failing["since"])
    error = failing["error"]
    return (
        f"task {one_line(name)} failing since {since} ({failing['rounds']} round(s)): "
        f"{error_line(error)}\n  fix: {one_line(error['fix'])}"
    )


def _recent(q: dict[str, Any], state: str) -> str:
    """Done (or cancelled) in the last hour, or with the shorter window a busy queue's count
    covers."""
    window = int(q.get("settled_window_ms", RECENT_SETTLED_MS))
    return str(q[state]) if window >= RECENT_SETTLED_MS else f"{q[state]} in {window // 1000} s"


def _stats(queues: list[dict[str, Any]], totals: dict[str, Any] | None = None) -> str:
    rows: list[tuple[object, ...]] = [
        (
            q["queue"],
            q["ready"],
            q["delayed"],
            q["running"],
            q["suspended"],
            q["dead"],
            q["failed"],
            _recent(q, "done"),
            _recent(q, "cancelled"),
            f"{q['oldest_ready_ms'] // 1000} s",
            "since " + when(q["paused"]["paused_at"]) if q.get("paused") else "-",
        )
        for q in queues
    ]
    if totals and totals["queues"] > 1:
        # Every queue read, those left out of the rows above included.
        counts = ("ready", "delayed", "running", "suspended", "dead", "failed", "done", "cancelled")
        rows.append((f"ALL {totals['queues']}", *(totals[c] for c in counts), "", ""))
    headers = [
        "QUEUE",
        "READY",
        "DELAYED",
        "RUNNING",
        "SUSP",
        "DEAD",
        "FAILED",
        "DONE 1H",
        "CANCELLED 1H",
        "OLDEST",
        "PAUSED",
    ]
    return table(rows, headers) if rows else "no jobs in any queue"


def _pauses(env: dict[str, Any], fixes: FixContext) -> str:
    """Each pause holding jobs back (a queue's, a job name's), with the line that lifts it."""
    held = [q["paused"] for q in env["queues"] if q.get("paused")]
    lines = []
    for pause in [*held, *(env.get("paused_jobs") or ())]:
        what = ["--job", pause["name"]] if pause["kind"] == "job" else [pause["name"]]
        resume = fixes.command("queues", "resume", *what)
        lines.append(f"{pause['kind']} {pause['name']} is paused; to resume: {resume}")
    return "".join(f"\n{line}" for line in lines)


def _queue_stats(env: dict[str, Any], fixes: FixContext) -> str:
    """The busiest queues' table with the totals of all, what was left out and the command
    that lists more, and the staged outbox rows that are no job in any queue yet."""
    text = _stats(env["queues"], env.get("totals")) + _pauses(env, fixes)
    left = env.get("queues_left_out")
    if left:
        wider = fixes.command("jobs", "stats", "--limit", str(MORE_QUEUES))
        text += f"\n{left} more queue(s) with fewer jobs are counted in ALL; to list them: {wider}"
    outbox = env.get("outbox")
    if outbox:
        count = f"at least {outbox['waiting']}" if outbox["at_least"] else outbox["waiting"]
        since = when(outbox["oldest_staged_at"])
        text += f"\n{count} staged job(s) wait in the outbox, the oldest since {since}"
    return text


def _diagnose(env: dict[str, Any]) -> str:
    lines = [f"healthy: {env['healthy']}   live workers: {env['live_workers']}"]
    counts = env.get("finding_counts") or {}
    if sum(counts.values()) > len(env["findings"]):
        # The list was cut (MORE_FINDINGS ends it): what there is in all, per code.
        lines.append("all findings: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    for f in env["findings"]:
        where = f" [{f['queue']}]" if f.get("queue") else ""
        lines += [
            f"{f['severity'].upper()} {f['code']}{one_line(where)}",
            f"  {one_line(f['cause'])}",
        ]
        lines.append(f"  fix: {one_line(f['fix'])}")
        failed = f.get("last_error")
        if failed and failed["fix"] != f["fix"]:
            lines.append(f"  newest failure's fix: {one_line(failed['fix'])}")
    return "\n".join(lines)


def notice_lines(env: dict[str, Any]) -> list[str]:
    """What the answer says about why it may not move (no live worker, …), with the fix."""
    lines: list[str] = []
    for n in env.get("notices") or []:
        lines += [
            f"{n['severity'].upper()} {n['code']}: {one_line(n['cause'])}",
            f"  fix: {one_line(n['fix'])}",
        ]
    return lines


def _enqueued(env: dict[str, Any]) -> str:
    tenant = f", tenant {one_line(env['tenant_id'])}" if env.get("tenant_id") else ""
    said = "a live job of this key already" if env.get("deduped") else "enqueued"
    head = f"{said}: job {env['job_id']} ({one_line(env['name'])}{tenant}), {env['state']}"
    return "\n".join([head, *notice_lines(env)])


def _backfill(env: dict[str, Any], fixes: FixContext) -> str:
    if env.get("plan"):
        p = env["plan"]
        lines = [
            f"dry run of {p['name']} in {p['environment']}: {p['rows_remaining']} row(s) in "
            f"{p['batches']} batch(es) of {p['batch_size']}",
            f"  first keys: {', '.join(str(k) for k in p['sample_keys']) or '-'}",
        ]
        if p.get("blocked_by"):
            b = p["blocked_by"]
            lines += [f"  a write would be refused: {b['code']}", f"  fix: {one_line(b['fix'])}"]
        else:
            # A forced rehearsal's line is the forced write: without --force it is refused.
            write = ("--write", "--force") if p.get("force") else ("--write",)
            lines.append(f"  to run it: {one_line(fixes.command('backfill', p['name'], *write))}")
        return "\n".join(lines)
    s = env["start"]
    # A write that waited and found a pass live followed it (deduped), starting none.
    said = "followed the live pass of" if s.get("deduped") else "started"
    text = f"{said} {s['name']} in {s['environment']}: job {s['job_id']}"
    run = env.get("run")
    if run:
        text += f" (ledger run {s['run_id']})"
        text += f"\n  {run['status']}: {run['rows_processed']} row(s) processed"
    else:
        # The pass writes its ledger row when a worker starts it, not at the write.
        text += f"; its ledger run {s['run_id']} is listed once a worker starts the pass"
    return "\n".join([text, *notice_lines(env)])


def _backfills(env: dict[str, Any], fixes: FixContext) -> str:
    header = f"environment {env['environment']}\n"
    runs = env.get("runs")
    if env.get("declared") is False and runs:
        text = header + (
            f'backfill "{one_line(runs[0]["name"])}" is not declared here (no --app that '
            "declares it was given): its ledger, read back\n"
        )
    else:
        text = header + _declared_table(env["backfills"])
    if runs is None:
        return text
    states = env["backfills"]
    now = states[0]["checksum"] if states else None
    ledger = [
        (
            r["run_id"],
            r["status"],
            r["rows_processed"],
            when(r["started_at"]),
            r.get("job_id") or "-",
            *([] if now is None else [_definition(r["checksum"], now)]),
        )
        for r in runs
    ]
    columns = ["RUN", "STATUS", "ROWS", "STARTED", "JOB", *([] if now is None else ["DEFINITION"])]
    text += "\nruns, newest first\n" + table(ledger, columns)
    if now is not None:
        text += f"\ndeclared now: checksum {now}"
    if env.get("runs_cursor") and runs:
        # A full page: its size is the --runs-limit it was asked with.
        limit = [] if len(runs) == DEFAULT_RUNS_PAGE else ["--runs-limit", str(len(runs))]
        more = fixes.command(
            "backfill", runs[0]["name"], "--runs", *limit, "--runs-cursor", env["runs_cursor"]
        )
        text += f"\nolder runs: {more}"
    return text


def _declared_table(states: list[dict[str, Any]]) -> str:
    rows = []
    for b in states:
        last = b.get("last_run") or {}
        rows.append(
            (
                b["name"],
                "yes" if b["pending"] else "no",
                last.get("status", "-"),
                last.get("rows_processed", "-"),
                b.get("live_job_id") or "-",
            )
        )
    return table(rows, ["NAME", "PENDING", "LAST RUN", "ROWS", "LIVE JOB"])


def _definition(checksum: str, now: str) -> str:
    """A run against the declaration now: the same sweep, or another one (its checksum)."""
    return "as declared" if checksum == now else f"another definition ({checksum})"


def _job_line(env: dict[str, Any]) -> str:
    j = env["job"]
    name = one_line(j["name"])
    if env.get("already_cancelled"):
        return f"{name} {j['id']} was already cancelled"
    if env.get("rerun_of"):  # a rerun from a step (engine/reruns.py)
        run = f"in run {j['run_id']} (rerun of {env['rerun_of']})"
        return f"{name} {j['id']} is now {j['state']} {run}"
    return f"{name} {j['id']} is now {j['state']}"


# A bulk action's text names this many of the jobs it acted on (`--json` has them all).
SHOWN_IDS = 5
_DONE = {"retry": "retried", "cancel": "cancelled"}


def _bulk(env: dict[str, Any]) -> str:
    """`jobs retry-all|cancel-all`: the plan as a person confirms it (`bulk.summary`), or what the
    action did, then the command that acts (on the plan, or on the rest)."""
    plan = BulkPlan.model_validate(env["plan"])
    outcome = env.get("outcome")
    if outcome is None:
        lines = [summary(plan), *notice_lines(env)]
        if plan.matched:
            lines += ["to act on it (a fresh plan of the same filter):", env["act_command"]]
        return "\n".join(lines)
    acted: list[str] = outcome["acted_ids"]
    lines = [f"{_DONE[plan.action]} {outcome['acted']} of the {plan.matched} planned job(s)"]
    if acted:
        more = f" and {len(acted) - SHOWN_IDS} more" if len(acted) > SHOWN_IDS else ""
        lines.append(f"  {', '.join(acted[:SHOWN_IDS])}{more}")
    reasons = Counter(skip["code"] for skip in outcome["skipped"])
    for code, n in sorted(reasons.items()):
        first = next(s for s in outcome["skipped"] if s["code"] == code)
        lines.append(f"  skipped {n}: {code} (e.g. {first['job_id']}: {one_line(first['reason'])})")
    if outcome.get("interrupted"):
        lines.append(f"interrupted after {outcome['acted']} of {plan.matched}; for the rest:")
    elif env.get("act_command"):
        least = "at least " if plan.scan_capped else ""
        lines.append(f"{least}{plan.total - plan.matched} more matched; to act on them:")
    if env.get("act_command"):
        lines.append(env["act_command"])
    return "\n".join([*lines, *notice_lines(env)])


def _drain(env: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{n} {kind}" for kind, n in sorted(env["outcomes"].items()))
    text = f"ran {env['claimed']} job(s): {outcomes or 'nothing was due'}"
    return "\n".join([text, _stats(env["queues"]["queues"]), *notice_lines(env)])


def _prune(env: dict[str, Any]) -> str:
    if env.get("unreadable_descriptor") is not None:
        forget, prune = (
            ("would forget", "would prune")
            if env["mode"] == "dry_run"
            else (
                "forgot",
                "pruned",
            )
        )
        return (
            f"{forget} the published descriptor of job {env['unreadable_descriptor']}, which "
            f"cannot be read, and {prune} no history (that job's retention is unknown): run "
            "the prune again after it"
        )
    verb = "would prune" if env["mode"] == "dry_run" else "pruned"
    counts = ", ".join(f"{state} {n}" for state, n in env["by_state"].items())
    text = f"{verb} {sum(env['by_state'].values())} settled job(s): {counts}"
    if env.get("audit_events") is not None:
        text += f"; and {env['audit_events']} audit event(s) of no job"
    rows = [(r["state"], r["queue"], r["rows"]) for r in env["by_queue"]]
    if rows:
        text += "\n" + table(rows, ("state", "queue", "rows"))
    # The jobs kept by a policy of their own (theirs, or their worker's): why their rows stay.
    named: dict[str, list[str]] = {}
    for cut in env.get("cutoffs") or []:
        if cut.get("name"):
            named.setdefault(cut["name"], []).append(f"{cut['state']} before {cut['before_iso']}")
    for name, cuts in sorted(named.items()):
        text += f"\njob {name} by its own policy: {', '.join(cuts)}"
    return text


def _migrated(env: dict[str, Any]) -> str:
    head = f"{env['driver']} database {env['database']}"
    if env.get("schema_line") is None:  # a store without numbered migrations
        made = env.get("installed")
        return f"{head}: installed {made}" if made else f"{head} is up to date"
    applied: list[int] = env.get("applied") or []
    if not applied:
        done = "nothing to apply"
    elif len(applied) > 1 and applied == list(range(applied[0], applied[-1] + 1)):
        done = f"applied {applied[0]} to {applied[-1]}"
    else:
        done = "applied " + ", ".join(map(str, applied))
    return f"{head}: {done}\n{env['schema_line']}"


# The renderers that write commands of their own take the fix context too.
WITH_FIXES: dict[str, Callable[[dict[str, Any], FixContext], str]] = {
    "describe_jobs": _describe,
    "queue_stats": _queue_stats,
    "run_backfill": _backfill,
    "list_backfills": _backfills,
}
TEXT: dict[str, Callable[[dict[str, Any]], str]] = {
    "enqueue_job": _enqueued,
    "db_migrate": _migrated,
    "db_nats_report": lambda env: "\n".join(env["lines"]),
    "db_report": lambda env: "\n".join(env["lines"]),
    "drain": _drain,
    "list_jobs": _jobs,
    "inspect_job": _inspect,
    "diagnose_queue": _diagnose,
    "retry_job": _job_line,
    "cancel_job": _job_line,
    "retry_jobs": _bulk,
    "cancel_jobs": _bulk,
    "prune_history": _prune,
}


def print_text(
    kind: str,
    envelope: dict[str, Any],
    out: TextIO | None = None,
    *,
    fixes: FixContext | None = None,
) -> None:
    with_fixes = WITH_FIXES.get(kind)
    render = TEXT.get(kind)
    if with_fixes is not None:
        text = with_fixes(envelope, fixes or FixContext())
    elif render is not None:
        text = render(envelope)
    else:
        text = json.dumps(envelope, indent=2)
    print(text, file=out or sys.stdout)


# --- progress -----------------------------------------------------------------------------------


class ProgressBar:
    """A one-line bar on stderr, drawn only when stdout is a terminal (never into a pipe)."""

    def __init__(self, label: str, *, enabled: bool | None = None, width: int = 30) -> None:
        self.label = label
        self.enabled = sys.stdout.isatty() if enabled is None else enabled
        self.width = width
        self._last = 0.0
        self._drawn = False

    async def update(self, done: float, total: float | None, message: str | None = None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        if total:
            filled = int(self.width * min(1.0, done / total))
            bar = "#" * filled + "-" * (self.width - filled)
            text = f"\r{self.label} [{bar}] {int(done)}/{int(total)} {message or ''}"
        else:
            text = f"\r{self.label} {int(done)} {message or ''}"
        sys.stderr.write(text[:120].ljust(80))
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
