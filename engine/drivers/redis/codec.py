"""Job hashes <-> `JobRecord`: one hash field per record field, its value as JSON text.

JSON per field (not one blob) lets a script move a single field without parsing the record;
scripts write only values Python encoded, or integers. Three plain fields sit beside them for
the scripts: `q` (the queue name), `rank` (rules.claim_rank's first part) and `token`; `ver`
counts writes so an operator's guarded write sees that the row moved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.drivers.damage import UNDECODABLE, UndecodableRow
from engine.errors import JobRowStatusUnknownError
from engine.rules import claim_rank
from schemas.jobs import EnqueueRequest, JobRecord
from schemas.states import JOB_STATES, JobState

RECORD_FIELDS = tuple(JobRecord.model_fields)
PLAIN_FIELDS = ("q", "rank", "token", "ver")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# What `json.dumps` writes for a str (ensure_ascii): the same text, without building an encoder.
_dumps_str = json.encoder.encode_basestring_ascii


def _field(value: Any) -> str | None:
    """`dumps(value)` for a value the JSON dump of the record leaves as it is; None otherwise.
    A write stores some twenty-five fields: one `json.dumps` each was a quarter of an enqueue."""
    kind = type(value)
    if kind is str:
        return _dumps_str(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is dict:
        # Inputs and outputs passed engine/storable.py (plain JSON types only) before any
        # driver saw them, and such a value dumps to the same text as its JSON-mode dump.
        try:
            return dumps(value)
        except (TypeError, ValueError):
            return None
    return None


def record_fields(record: JobRecord) -> dict[str, str]:
    """Every record field as stored, plus `q` and `rank` (not the token: it is the lease's).
    Byte for byte `dumps` of each field's JSON-mode dump; only models and values of other
    types (an error, a progress report, a non-dict output) go through pydantic."""
    values = record.__dict__
    fields: dict[str, str] = {}
    rest: list[str] = []
    for name in RECORD_FIELDS:
        text = _field(values[name])
        if text is None:
            rest.append(name)
        else:
            fields[name] = text
    if rest:
        plain = record.model_dump(mode="json", include=set(rest))
        fields.update((name, dumps(plain[name])) for name in rest)
    fields["q"] = record.queue
    fields["rank"] = str(claim_rank(record)[0])
    return fields


def flat(fields: Mapping[str, str]) -> list[str]:
    return [part for item in fields.items() for part in item]


def job_state(text: str) -> JobState:
    value = json.loads(text)
    for state in JOB_STATES:
        if state == value:
            return state
    raise JobRowStatusUnknownError("jobs", "state", str(value), JOB_STATES)


def decode_record(fields: Mapping[str, str]) -> JobRecord:
    """A stored hash as a record; an unknown state is refused (rule 5), never cast."""
    try:
        job_state(fields["state"])
        values = {name: json.loads(fields[name]) for name in RECORD_FIELDS if name in fields}
        return JobRecord.model_validate(values)
    except UNDECODABLE as exc:
        raise UndecodableRow(_stored_id(fields), exc) from exc


def _stored_id(fields: Mapping[str, str]) -> str:
    try:
        return str(json.loads(fields["id"]))
    except UNDECODABLE:
        return repr(fields.get("id"))


def failing_group(state: str, tenant_id: str | None, queue: str) -> str:
    """The group a dead or failed row is counted in (keys.py): state and tenant as stored, so a
    script builds the same text from the hash; JSON text holds no NUL, and the queue is last."""
    return f"{_dumps_str(state)}\0{_field(tenant_id)}\0{queue}"


def pairs(raw: list[str]) -> dict[str, str]:
    """HGETALL's flat answer (as a script returns it) as a dict."""
    return dict(zip(raw[::2], raw[1::2], strict=True))


def dedupe_field(name: str, tenant_id: str | None, key: str) -> str:
    """rules.dedupe_key as one hash field: JSON keeps the three parts apart whatever they hold."""
    return dumps([name, tenant_id or "", key])


def stored_dedupe_field(name: str, tenant_id: str, key: str) -> str:
    """`dedupe_field` from a job hash's stored JSON texts, built as the settle scripts build it
    (settle_scripts `dedupe_field`)."""
    tenant = '""' if tenant_id == "null" else tenant_id
    return f"[{name},{tenant},{key}]"


def request_json(request: EnqueueRequest) -> str:
    return dumps(request._asdict())


def request_from_json(text: str) -> EnqueueRequest:
    return EnqueueRequest(**json.loads(text))
