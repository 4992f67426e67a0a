"""The `JobContext` a worker hands a claimed job's body, with its costly parts built on use.

A no-op body touches none of `step`, `log` or `reporter`; building them (and a frozen
dataclass's thirteen attribute writes) for every job was a measurable share of the worker's
CPU per job. Here every field is read from the claimed record, and those three are built on
first access, the same objects the eager construction made.
"""

from __future__ import annotations

import logging
from dataclasses import FrozenInstanceError
from typing import Any

from engine.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from engine.clock import Clock
from engine.context import JobContext
from engine.drivers.base import Driver
from engine.progress import ProgressReporter
from engine.settle import Settler
from engine.steps import StepApi
from schemas.jobs import ClaimedJob

# One logger per job name, looked up once: `logging.getLogger` takes the module lock each call.
_job_loggers: dict[str, logging.Logger] = {}


def job_logger(name: str) -> logging.Logger:
    found = _job_loggers.get(name)
    if found is None:
        found = _job_loggers[name] = logging.getLogger(f"mcp_jobs.job.{name}")
    return found


class RunContext(JobContext):
    """A `JobContext` over one claimed run; immutable like its base."""

    # In the instance's __dict__, not slots: copy.copy and pickle restore a __dict__ without
    # the (refused) attribute writes that restoring slots would make.
    _claimed: ClaimedJob
    _settler: Settler
    _clock: Clock
    _driver: Driver
    _step: StepApi | None
    _log: logging.LoggerAdapter[logging.Logger] | None
    _reporter: ProgressReporter | None
    _max_output: int

    def __init__(
        self,
        claimed: ClaimedJob,
        settler: Settler,
        clock: Clock,
        driver: Driver,
        max_output_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        # The dataclass __init__ is not called: every field is a property over these.
        setattr_ = object.__setattr__
        setattr_(self, "_max_output", max_output_bytes)
        setattr_(self, "_claimed", claimed)
        setattr_(self, "_settler", settler)
        setattr_(self, "_clock", clock)
        setattr_(self, "_driver", driver)
        setattr_(self, "_step", None)
        setattr_(self, "_log", None)
        setattr_(self, "_reporter", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    @property
    def job_id(self) -> str:
        return self._claimed.record.id

    @property
    def run_id(self) -> str:
        return self._claimed.record.run_id

    @property
    def name(self) -> str:
        return self._claimed.record.name

    @property
    def queue(self) -> str:
        return self._claimed.record.queue

    @property
    def tenant_id(self) -> str | None:
        return self._claimed.record.tenant_id

    @property
    def attempt(self) -> int:
        return self._claimed.record.attempt

    @property
    def max_attempts(self) -> int:
        return self._claimed.record.max_attempts

    @property
    def traceparent(self) -> str | None:
        return self._claimed.record.traceparent

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def driver(self) -> Driver | None:
        return self._driver

    @property
    def step(self) -> StepApi:
        step = self._step
        if step is None:
            claimed = self._claimed
            record = claimed.record
            step = StepApi(
                settler=self._settler,
                clock=self._clock,
                job_name=record.name,
                job_id=record.id,
                run_id=record.run_id,
                token=claimed.token,
                completed=None if claimed.has_steps else {},
                tenant_id=record.tenant_id,
                max_output_bytes=self._max_output,
            )
            object.__setattr__(self, "_step", step)
        return step

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        log = self._log
        if log is None:
            record = self._claimed.record
            log = logging.LoggerAdapter(
                job_logger(record.name),
                {"job": {"job_id": record.id, "name": record.name, "attempt": record.attempt}},
            )
            object.__setattr__(self, "_log", log)
        return log

    @property
    def reporter(self) -> ProgressReporter:
        reporter = self._reporter
        if reporter is None:
            claimed = self._claimed
            record = claimed.record
            reporter = ProgressReporter(
                self._driver, self._clock, record.id, claimed.token, record.attempt
            )
            object.__setattr__(self, "_reporter", reporter)
        return reporter

    @property
    def reported(self) -> ProgressReporter | None:
        """The progress reporter if the body reported (None: it never did, nothing to flush)."""
        return self._reporter
