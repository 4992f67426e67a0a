"""Every key the driver writes, under one configurable prefix (the default `mcp-jobs:`).

Layout (P is the prefix):
  P job:<id>        hash: a job's fields (JSON values; see codec.py), its lease token, a version
  P q:<queue>       zset: the queue's waiting ids, scored by rules.claim_rank (ties by id)
  P queues          set: every queue name ever enqueued to (a claim for all queues walks them)
  P leases          zset: running ids by lease expiry (rule 13: an expired one is claimable)
  P dedupe          hash: dedupe key (rule 2) -> the live job holding it
  P live / failing  sets: live ids; dead and failed ids (stats count every one of these)
  P settled         zset: settled ids by finished_at (recent stats, retention, oldest first)
  P ids             zset: every id at score 0, so lexical ranges page newest first
  P ev:<id>         zset: a job's events by a global sequence (P evseq)
  P steps:<run>     hash: step name -> record; P steppos:<run>: name -> first-save position
  P slot:<key>      zset: holders of a limiter key by expiry; P jslots:<id>: the job's keys
  P workerorder     zset: workers by first beat (P workerseq counts), the order they list in
  P workers, P backfills, P desc, P tasks, P leaders, P sched: one hash each
  P ob:<id>         hash: an outbox row; P obq: unpublished rows by staged_at (ties by id)
  P wake            pub/sub channel: an enqueue wakes idle workers in every process
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "mcp-jobs:"


@dataclass(frozen=True)
class Keys:
    prefix: str = DEFAULT_PREFIX

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def queue(self, queue: str) -> str:
        return f"{self.prefix}q:{queue}"

    def events(self, job_id: str | None) -> str:
        return f"{self.prefix}ev:{job_id or ''}"

    def steps(self, run_id: str) -> str:
        return f"{self.prefix}steps:{run_id}"

    def step_positions(self, run_id: str) -> str:
        return f"{self.prefix}steppos:{run_id}"

    def job_slots(self, job_id: str) -> str:
        return f"{self.prefix}jslots:{job_id}"

    def outbox_row(self, row_id: str) -> str:
        return f"{self.prefix}ob:{row_id}"

    @property
    def slot_prefix(self) -> str:
        return f"{self.prefix}slot:"

    @property
    def queues(self) -> str:
        return self.prefix + "queues"

    @property
    def leases(self) -> str:
        return self.prefix + "leases"

    @property
    def dedupe(self) -> str:
        return self.prefix + "dedupe"

    @property
    def live(self) -> str:
        return self.prefix + "live"

    @property
    def failing(self) -> str:
        return self.prefix + "failing"

    @property
    def settled(self) -> str:
        return self.prefix + "settled"

    @property
    def ids(self) -> str:
        return self.prefix + "ids"

    @property
    def evseq(self) -> str:
        return self.prefix + "evseq"

    @property
    def workers(self) -> str:
        return self.prefix + "workers"

    @property
    def backfills(self) -> str:
        return self.prefix + "backfills"

    @property
    def desc(self) -> str:
        return self.prefix + "desc"

    @property
    def tasks(self) -> str:
        return self.prefix + "tasks"

    @property
    def leaders(self) -> str:
        return self.prefix + "leaders"

    @property
    def sched(self) -> str:
        return self.prefix + "sched"

    @property
    def obq(self) -> str:
        return self.prefix + "obq"

    @property
    def wake(self) -> str:
        return self.prefix + "wake"

    @property
    def version(self) -> str:
        return self.prefix + "version"

    @property
    def workerorder(self) -> str:
        return self.prefix + "workerorder"

    @property
    def workerseq(self) -> str:
        return self.prefix + "workerseq"
