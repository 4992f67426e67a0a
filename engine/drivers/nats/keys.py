"""The key layout of the one KV bucket a namespace uses. Every key starts with a family name;
caller values (queue, job and task names, tenants, cap keys) are base64url-encoded, since a KV
key allows only `[-/_=.a-zA-Z0-9]`, and the dedupe key is a digest of its three parts.

    job.<id>             the job document: record, lease token, steps of every run, events
    dd.<digest>          the dedupe index: which live job holds (name, tenant or '', key)
    slots                every concurrency cap's holders (slots.py)
    wk.<worker>          a worker's presence row
    bf.<run id>          a backfill ledger row
    task.<name>          a cron task's last fired occurrence
    lead.<name>          a leadership lease (a cron task's is named `task:<name>`); the one
                         named `scheduler` is kept for workers of earlier versions (their one
                         scheduler lease) and is read by none of this version
    ob.<id>              an outbox row
    desc.<name>          a published job descriptor
    pause.<kind>.<name>  a pause in force
    rates                every rate limit's TAT and every reservation (rate_limits.py)
    iev.<id>             an inbound event;  wait.<job>: the event a suspended job waits for
    evx.<id>             an event of no stored job (an operator's call on a missing id); the
                         id's first 12 hex digits are the event's `at` (ms), so keys sort by
                         time (an earlier build's: `new_id`'s wall-clock ms, near it)
    tomb                 the delete-marker purge's cursor and marks (tombstones.py)
    clock                written to read the server's clock from its stamp (server_time.py)
    version              the layout version
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

from engine.rules import DedupeKey

VERSION = "version"
TOMBSTONES = "tomb"
CLOCK = "clock"
LOOSE_EVENT = "evx."


def enc(value: str) -> str:
    """A caller value as a key token (base64url; '=' padding is a legal key character)."""
    return base64.urlsafe_b64encode(value.encode()).decode() or "="


def dec(token: str) -> str:
    return "" if token == "=" else base64.urlsafe_b64decode(token.encode()).decode()


def named(key: str, what: str) -> str:
    """`key` as `what` and the caller's value it encodes (a worker's id, a run's); the key alone
    where its token is not one this module wrote."""
    try:
        return f"{what} {dec(key.partition('.')[2])!r} (key {key})"
    except ValueError:
        return f"{what} key {key!r}"


def job(job_id: str) -> str:
    """The key of job `job_id`; text no key may hold (a blank, a capital's neighbour in a typed
    id) as an encoded token no job's key has, so reading it finds nothing (JOB_NOT_FOUND), not
    the server's refusal of the key (which read as the server away)."""
    return f"job.{job_id}" if _KEY_TOKEN.fullmatch(job_id) else f"job.={enc(job_id)}"


# What a key token may hold as it is (nats.js.kv's rule, without '.', which splits tokens).
_KEY_TOKEN = re.compile(r"[-/_=a-zA-Z0-9]*")  # "" too: the prefix of every job key


def dedupe(key: DedupeKey) -> str:
    digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:40]
    return f"dd.{digest}"


def worker(worker_id: str) -> str:
    return f"wk.{enc(worker_id)}"


def backfill(run_id: str) -> str:
    return f"bf.{enc(run_id)}"


def task(name: str) -> str:
    return f"task.{enc(name)}"


def lead(name: str) -> str:
    return f"lead.{enc(name)}"


def loose_event(at: int, unique: str) -> str:
    """The key of an event of no stored job recorded at `at`: 12 hex digits of time, then the
    last 20 of `unique` (a `new_id`), the shape of a `new_id` so both kinds sort together."""
    return f"{LOOSE_EVENT}{max(0, at):012x}{unique[12:]}"


def loose_events_before(at: int) -> str:
    """Every loose event key recorded before `at` sorts before this one."""
    return f"{LOOSE_EVENT}{max(0, at):012x}"


def outbox(row_id: str) -> str:
    return f"ob.{row_id}"


def descriptor(name: str) -> str:
    return f"desc.{enc(name)}"


def pause(kind: str, name: str) -> str:
    return f"pause.{kind}.{enc(name)}"


def inbound(event_id: str) -> str:
    return f"iev.{enc(event_id)}"


def waiter(job_id: str) -> str:
    return f"wait.{job_id}"


def family(key: str) -> str:
    return key.split(".", 1)[0]
