"""Queue statistics: the numbers autoscaling and paging read (rule 7).

A queue appears when it has a row counted below: a live one, a dead or failed one, or one that
finished done or cancelled within the recent window.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The stats' recent window of done and cancelled rows, and the most rows of either state it
# holds: the rule is engine.rules.recent_settled_since; these are its numbers.
RECENT_SETTLED_MS = 3_600_000
RECENT_SETTLED_CAP = 1_000


class QueueStats(BaseModel):
    """One queue's counts at one reading. Live counts are exact; of settled history, dead and
    failed are counted in full and done/cancelled over the recent window only
    (`settled_window_ms`)."""

    model_config = ConfigDict(frozen=True)

    queue: str
    ready: int = Field(
        default=0,
        description="Ready and due: state `ready`, or `delayed` whose time has come. A shed job"
        " (handed back over a cap) counts here.",
    )
    delayed: int = Field(default=0, description="`delayed` rows whose run_at is still ahead.")
    running: int = Field(default=0, description="Rows a worker holds now.")
    suspended: int = Field(default=0, description="Parked rows (a sleep step, an unknown name).")
    dead: int = Field(
        default=0,
        description="Every dead row still stored (until retention prunes it): retries ran out."
        " Counted in full, since each needs an operator.",
    )
    failed: int = Field(
        default=0,
        description="Every failed row still stored (a permanent failure). Counted in full.",
    )
    done: int = Field(
        default=0,
        description="Rows that finished done within `settled_window_ms` before this reading:"
        " recent throughput, not all history.",
    )
    cancelled: int = Field(
        default=0,
        description="Rows cancelled within `settled_window_ms` before this reading.",
    )
    settled_window_ms: int = Field(
        default=RECENT_SETTLED_MS,
        description="The window `done` and `cancelled` cover: the last hour, or, when more than"
        f" {RECENT_SETTLED_CAP:,} of either finished in it, from the finish time of that state's"
        f" {RECENT_SETTLED_CAP:,}th newest, so the read stays cheap at any rate. Found over"
        " every queue and tenant, so the same for every queue of a reading, and for a queue"
        " read alone.",
    )
    oldest_ready_ms: int = Field(
        default=0,
        description="Age of the oldest ready-and-due job, from when it began waiting; 0 when"
        " none is.",
    )
    expired_leases: int = Field(
        default=0,
        description="Running rows whose lease has run out: a worker died holding them."
        " Claimable again.",
    )
    due_suspended: int = Field(
        default=0,
        description="Suspended rows whose wake-up time has passed and nobody picked up yet.",
    )
    oldest_due_suspended_ms: int = Field(
        default=0, description="How long the most overdue of those has been due; 0 when none."
    )


class SettledCount(BaseModel):
    """One queue's jobs that settled within an interval of `finished_at` (every one, not a
    window's): what the dashboard's throughput reads (drivers/base.py `SettledCounts`)."""

    model_config = ConfigDict(frozen=True)

    done: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return self.done + self.failed + self.dead + self.cancelled


class WorkerInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    hostname: str
    pid: int
    queues: list[str] | None
    concurrency: int
    started_at: int
    last_seen_at: int
    # Its concurrency caps (engine.limits.Limits.published), by cap key: what diagnose_queue
    # reads to tell a queue held at a cap from one short of workers. None: none set.
    caps: dict[str, int] | None = None
