"""Every key the driver writes, under one configurable prefix (the default `mcp-jobs:`).

Layout (P is the prefix):
  P job:<id>        hash: a job's fields (JSON values; see codec.py), its lease token, a version
  P q:<queue>       zset: the queue's waiting ids, scored by rules.claim_rank (ties by id)
  P queues          set: the queues that may hold waiting ids (a claim for all queues walks
                    them and forgets one it finds empty; an enqueue adds it back)
  P leases          zset: running ids by lease expiry (rule 13: an expired one is claimable)
  P dedupe          hash: dedupe key (rule 2) -> the live job holding it
  P live / failing  sets: live ids; dead and failed ids
  P fail:<group>    zset: the dead or failed ids of one group at score 0 (lexical order),
                    group "<state>\0<tenant_id>\0<queue>" (state and tenant_id as stored, JSON),
                    listed in P failgroups while it holds any: the stats count these, and a
                    list of dead or failed jobs pages through them, not through the rows
  P reading:<id>    set: the live ids one stats reading has still to fold (expires in 60 s)
  P settled         zset: settled ids by finished_at (recent stats, retention, oldest first)
  P ids             zset: every id at score 0, so lexical ranges page newest first
  P byname:<name>   zset: the ids of one job name at score 0; P bytenant:<tenant> of one
                    tenant and P byqueue:<queue> of one queue: a filtered list pages through
                    the smallest that applies, not through ids (P byindex:built holds the
                    version migrate indexed the jobs stored before them to)
  P ev:<id>         zset: a job's events by a global sequence (P evseq), as "<seq>|<json>"
  P jobless         zset: the events of no job, "<seq>|<json>" by their `at` (the pruner deletes
                    the old ones; an earlier build kept them in P ev:, migrate moves them)
  P steps:<run>     hash: step name -> record; P steppos:<run>: name -> first-save position
  P slot:<key>      zset: holders of a limiter key by expiry; P jslots:<id>: the job's keys
  P workerorder     zset: workers by first beat (P workerseq counts), the order they list in
  P workers, P backfills, P desc, P tasks, P leaders, P sched: one hash each (P sched, the
                    one scheduler lease, is kept for workers of earlier versions and is read
                    by none of this version)
  P taskfail        hash: task -> its failure (JSON) while its rounds fail; a claim deletes it
  P ob:<id>         hash: an outbox row; P obq: unpublished rows by staged_at (ties by id);
                    P obpub: published rows by published_at (the pruner deletes the old ones;
                    P obpub:built says migrate indexed the rows published before it existed)
  P wake            pub/sub channel: an enqueue wakes idle workers in every process
  P pauses          hash: "<kind>:<name>" -> a pause in force (the claim script reads it)
  P inbound         hash: inbound event id -> event; P inboundexp: ids by expires_at
  P ie:<target>     zset: a target's event ids by sent_at (ties by id); target is JSON
                    [name, key, tenant]; P waiters: job id -> target; P waiting:<target>: ids
  P rate:<key>      a rate key's TAT and rate (JSON); P ratekeys: the keys, lexically
  P rsv:<id>        a job's rate reservation (JSON), indexed in P rsvslot (by slot_at), P rsvlate
                    (by late_at) and P rsvadopt:<keys> (by slot_at, the ones a take may adopt)
  P runs:<id>       set: a job's earlier run ids (a rerun's old steps, pruned with the job)
  P chg             pub/sub channel: change signals for followers (changes.py); P chgn counts
  P epoch           string: a token written once per store (lost.py): a process that finds
                    another than it saw knows the store was reset, though it was opened again
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "mcp-jobs:"

# The Redis type of each key above that has one fixed name (after the prefix): a key of another
# type there was written by another program, and every command of ours on it fails WRONGTYPE.
FIXED_KEY_TYPES: dict[str, str] = {
    **dict.fromkeys(("queues", "live", "failing", "failgroups"), "set"),
    **dict.fromkeys(
        (
            "leases",
            "settled",
            "ids",
            "jobless",
            "obq",
            "obpub",
            "workerorder",
            "inboundexp",
            "ratekeys",
            "rsvslot",
            "rsvlate",
        ),
        "zset",
    ),
    **dict.fromkeys(
        (
            "dedupe",
            "workers",
            "backfills",
            "desc",
            "tasks",
            "taskfail",
            "leaders",
            "sched",
            "pauses",
            "inbound",
            "waiters",
        ),
        "hash",
    ),
    **dict.fromkeys(
        ("version", "evseq", "workerseq", "chgn", "byindex:built", "obpub:built", "epoch"),
        "string",
    ),
}
# The same for each family of keys named `<family>:<part>`.
FAMILY_KEY_TYPES: dict[str, str] = {
    **dict.fromkeys(("job", "steps", "steppos", "ob"), "hash"),
    **dict.fromkeys(
        ("q", "ev", "fail", "byname", "bytenant", "byqueue", "slot", "ie", "rsvadopt"), "zset"
    ),
    **dict.fromkeys(("jslots", "reading", "waiting", "runs"), "set"),
    **dict.fromkeys(("rate", "rsv"), "string"),
}


def expected_type(name: str) -> str | None:
    """The Redis type the driver keeps at `name` (a key without its prefix); None for a name
    that is none of its keys."""
    fixed = FIXED_KEY_TYPES.get(name)
    if fixed is not None or ":" not in name:
        return fixed
    return FAMILY_KEY_TYPES.get(name.split(":", 1)[0])


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
    def failing_groups(self) -> str:
        return self.prefix + "failgroups"

    def failing_group(self, group: str) -> str:
        return f"{self.prefix}fail:{group}"

    def reading(self, reading_id: str) -> str:
        return f"{self.prefix}reading:{reading_id}"

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
    def jobless_events(self) -> str:
        return self.prefix + "jobless"

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
    def taskfail(self) -> str:
        return self.prefix + "taskfail"

    @property
    def leaders(self) -> str:
        return self.prefix + "leaders"

    @property
    def obq(self) -> str:
        return self.prefix + "obq"

    @property
    def obpub(self) -> str:
        return self.prefix + "obpub"

    def by_name(self, name: str) -> str:
        return self.prefix + "byname:" + name

    def by_tenant(self, tenant_id: str) -> str:
        return self.prefix + "bytenant:" + tenant_id

    def by_queue(self, queue: str) -> str:
        return self.prefix + "byqueue:" + queue

    @property
    def by_index_built(self) -> str:
        return self.prefix + "byindex:built"

    @property
    def obpub_built(self) -> str:
        return self.prefix + "obpub:built"

    @property
    def wake(self) -> str:
        return self.prefix + "wake"

    @property
    def version(self) -> str:
        return self.prefix + "version"

    @property
    def epoch(self) -> str:
        return self.prefix + "epoch"

    @property
    def workerorder(self) -> str:
        return self.prefix + "workerorder"

    @property
    def workerseq(self) -> str:
        return self.prefix + "workerseq"

    # Optional capabilities (pauses, inbound events, rate limits, reruns).

    @property
    def pauses(self) -> str:
        return self.prefix + "pauses"

    @property
    def inbound(self) -> str:
        return self.prefix + "inbound"

    @property
    def inbound_expiry(self) -> str:
        return self.prefix + "inboundexp"

    def inbound_target(self, target: str) -> str:
        return f"{self.prefix}ie:{target}"

    @property
    def waiters(self) -> str:
        return self.prefix + "waiters"

    def waiting(self, target: str) -> str:
        return f"{self.prefix}waiting:{target}"

    def rate(self, key: str) -> str:
        return f"{self.prefix}rate:{key}"

    @property
    def rate_keys(self) -> str:
        return self.prefix + "ratekeys"

    def reservation(self, job_id: str) -> str:
        return f"{self.prefix}rsv:{job_id}"

    @property
    def reservations_by_slot(self) -> str:
        return self.prefix + "rsvslot"

    @property
    def reservations_by_late(self) -> str:
        return self.prefix + "rsvlate"

    def adoptable(self, rate_keys: str) -> str:
        return f"{self.prefix}rsvadopt:{rate_keys}"

    def job_runs(self, job_id: str) -> str:
        return f"{self.prefix}runs:{job_id}"

    # Change signals (changes.py): the scripts spell these as p .. 'chg' and p .. 'chgn'.

    @property
    def changes(self) -> str:
        return self.prefix + "chg"

    @property
    def change_count(self) -> str:
        return self.prefix + "chgn"
