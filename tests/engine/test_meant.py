"""engine/meant.py: which declared name an unknown one plainly stands for, and when none."""

from __future__ import annotations

import pytest

from engine.meant import meant_as, meant_choices

DECLARED = ["state", "name", "queue", "tenant_id", "limit", "cursor"]


@pytest.mark.parametrize(
    ("unknown", "meant"),
    [
        ("states", "state"),  # the same words, another spelling
        ("tenantId", "tenant_id"),
        ("tenant-id", "tenant_id"),
        ("TENANT_ID", "tenant_id"),
        ("tenant", "tenant_id"),  # one's words within the other's
        ("job_name", "name"),
        ("nmae", "name"),  # a slip of the keys
        ("status", "state"),
        ("quueue", "queue"),
        ("queue_name", None),  # queue or name: not plain
        ("zzz", None),
        ("", None),
        ("_", None),
        ("x" * 100_000, None),
    ],
)
def test_an_unknown_name_is_meant_as_the_one_declared_name_it_plainly_stands_for(
    unknown: str, meant: str | None
) -> None:
    assert meant_as(unknown, DECLARED) == meant


def test_a_name_already_given_is_not_meant_and_the_required_one_breaks_a_tie() -> None:
    assert meant_as("tenant", DECLARED, given={"tenant_id": "t"}) is None
    assert meant_as("id", ["job_id", "run_id"]) is None
    assert meant_as("id", ["job_id", "run_id"], required=["job_id"]) == "job_id"


def test_of_names_alike_the_clearly_closest_is_meant() -> None:
    """`bench_steps` is alike enough too (0.7), but `bench_noop` is far closer."""
    names = ["bench_noop", "bench_noop_limited", "bench_steps"]
    assert meant_as("bench_nop", names) == "bench_noop"
    assert meant_as("bench_step", names) == "bench_steps"
    assert meant_as("mail", ["mail1", "mail2"]) is None  # as close to each


def test_id_alone_stands_only_for_the_name_the_call_requires() -> None:
    """`ids` on retry_jobs was read as its `tenant_id`, the one name there holding `id`."""
    assert meant_as("ids", ["name", "queue", "tenant_id", "states"]) is None
    assert meant_as("id", ["job_id", "steps_limit"], required=["job_id"]) == "job_id"


STATES = ["ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled"]


@pytest.mark.parametrize(
    ("pieces", "found"),
    [
        (["dead"], (["dead"], False)),
        (["Dead", " FAILED "], (["dead", "failed"], False)),  # another case is no guess
        (["deda"], (["dead"], True)),  # a slip of the keys is
        (["failed", "redy"], (["failed", "ready"], True)),
        (["failed", "zzz"], None),  # one piece standing for nothing: none is taken
        ([""], None),
        ([], None),
    ],
)
def test_choices_are_read_as_the_declared_ones_they_stand_for(
    pieces: list[str], found: tuple[list[str], bool] | None
) -> None:
    assert meant_choices(pieces, STATES) == found


# The probe's hostile app: queue and job names in other scripts, with emoji and markup.
HOSTILE_QUEUES = ['q"uote\\back\nnl', "очередь-🚀", '<script>alert("q")</script>', "plain"]
HOSTILE_JOBS = ['na"me\\x\nz', "работа", "<img src=x onerror=alert(1)>", "slow", "🚀"]


@pytest.mark.parametrize(
    ("unknown", "declared", "meant"),
    [
        ("plian", HOSTILE_QUEUES, "plain"),  # a Cyrillic name does not take every typo
        ("nope", HOSTILE_QUEUES, None),
        ("slw", HOSTILE_JOBS, "slow"),
        ("zzz", HOSTILE_JOBS, None),
        ("🚀🚀", HOSTILE_JOBS, None),  # no words to match by: no guess
        ("очеред", HOSTILE_QUEUES, "очередь-🚀"),  # a slip in another script is still read
        ("очередь", HOSTILE_QUEUES, "очередь-🚀"),
        ("раобта", HOSTILE_JOBS, "работа"),
        ("РаботаId", ["работа_id", "работа"], "работа_id"),
        ("キュー_name", ["キュー名", "キュー_name", "plain"], "キュー_name"),
    ],
)
def test_names_in_any_script_are_meant_only_by_their_own_words(
    unknown: str, declared: list[str], meant: str | None
) -> None:
    assert meant_as(unknown, declared) == meant
