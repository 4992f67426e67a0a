"""The job document: one KV value per job holding its record, the lease token that fences its
holder, the steps of each of its runs and its events. One key, so every transition — a claim,
a settle with its event, a step write checked against the token, a rerun copying steps — is one
compare-and-set on that key's revision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from engine.errors import JobRowStatusUnknownError
from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.states import JOB_STATES
from schemas.steps import StepRecord


@dataclass(frozen=True)
class JobDoc:
    record: JobRecord
    token: str | None = None
    # run id -> step name -> step, in first-save order (the trace's tie-break).
    steps: dict[str, dict[str, StepRecord]] = field(
        default_factory=dict[str, dict[str, StepRecord]]
    )
    events: tuple[EventRecord, ...] = ()
    # The token of the lease whose ack or nack let the job go: a try of that settle sent again
    # after its reply was lost finds it here (claims.py).
    settled_by: str | None = None

    def with_record(self, record: JobRecord, token: str | None) -> JobDoc:
        return replace(self, record=record, token=token)

    def settled(self, record: JobRecord, token: str) -> JobDoc:
        """Let go by the holder of `token`, with `record` its settle's."""
        return replace(self, record=record, token=None, settled_by=token)

    def with_event(self, event: EventRecord) -> JobDoc:
        return replace(self, events=(*self.events, event))

    def with_step(self, step: StepRecord) -> JobDoc:
        runs = dict(self.steps)
        run = dict(runs.get(step.run_id, {}))
        run[step.name] = step
        runs[step.run_id] = run
        return replace(self, steps=runs)

    def run_steps(self, run_id: str) -> list[StepRecord]:
        return list(self.steps.get(run_id, {}).values())


def encode_doc(doc: JobDoc) -> bytes:
    return json.dumps(
        {
            "record": doc.record.model_dump(mode="json"),
            "token": doc.token,
            "steps": {
                run: [s.model_dump(mode="json") for s in steps.values()]
                for run, steps in doc.steps.items()
            },
            "events": [e.model_dump(mode="json") for e in doc.events],
            "settled_by": doc.settled_by,
        },
        separators=(",", ":"),
    ).encode()


def decode_doc(raw: bytes) -> JobDoc:
    data = json.loads(raw)
    state = data["record"].get("state")
    if state not in JOB_STATES:  # refused, never cast (rule 5)
        raise JobRowStatusUnknownError("jobs", "state", str(state), JOB_STATES)
    steps: dict[str, dict[str, StepRecord]] = {}
    for run, items in data["steps"].items():
        parsed = [StepRecord.model_validate(item) for item in items]
        steps[run] = {s.name: s for s in parsed}
    return JobDoc(
        record=JobRecord.model_validate(data["record"]),
        token=data["token"],
        steps=steps,
        events=tuple(EventRecord.model_validate(e) for e in data["events"]),
        settled_by=data.get("settled_by"),
    )


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def loads(raw: bytes) -> Any:
    return json.loads(raw)


def loads_object(raw: bytes) -> dict[str, Any]:
    """A stored value that is a JSON object; another shape (another program's) raises TypeError,
    which `damage.readable` and `or_none` count as undecodable."""
    data = loads(raw)
    if not isinstance(data, dict):
        raise TypeError(f"a {type(data).__name__}, not an object")
    return data
